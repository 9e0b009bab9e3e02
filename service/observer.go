package service

import (
	"context"

	"github.com/payd/payd/domain"
)

// Observer is told what the use cases did, after they did it: the port
// through which service publishes outcomes to the rest of payd (the event
// stream, metrics, logs). An observer only watches: it cannot change or
// fail what happened, so its methods return nothing and must not block for
// long. Embed NopObserver to implement only some of them. What must be
// written when a pay answer settles is not watching: that is
// SettledAnswers.
type Observer interface {
	// OrderChanged: the order's status or amounts changed (event stream).
	OrderChanged(orderID string)
	// PaymentResult: payment attempt a ended as paid, declined, unknown or
	// held. ctx is the one the outcome was learnt in (its trace).
	PaymentResult(ctx context.Context, a domain.Attempt, result PaymentOutcome)
	// DiscrepancyRecorded: discrepancy d was newly recorded (committed).
	DiscrepancyRecorded(ctx context.Context, d domain.Discrepancy)
	// RefundedAutomatically: payd gave back a charge an order could not
	// take (refund r, as the provider answered it).
	RefundedAutomatically(ctx context.Context, r domain.Refund)
	// WebhookApplied: a provider event of eventType was handled with outcome
	// (applied, duplicate, ignored, discrepancy).
	WebhookApplied(eventType string, outcome WebhookOutcome)
	// JobDone: a pass of the background job name handled n > 0 rows.
	JobDone(name JobName, n int64)
	// Retained: retention deleted n > 0 rows of table (RetainedTables).
	Retained(table string, n int64)
	// OrderCreated: an order was created, by the merchant's server or by
	// a buyer (not told for a replayed creation).
	OrderCreated(byMerchant bool)
	// OutOfStock: an order was refused because a line was beyond its
	// product's stock.
	OutOfStock()
	// HoldEnded: a hold action of kind k ended as result (HoldResults).
	HoldEnded(k domain.HoldActionKind, result HoldResult)
}

// HoldResult is how a capture, void or lapse ended, as Observer.HoldEnded
// reports it (payd_hold_actions_total's result label).
type HoldResult string

// The results of a hold action.
const (
	HoldSucceeded HoldResult = "succeeded" // the provider captured or voided the hold
	HoldRefused   HoldResult = "refused"   // the provider refused: nothing happened to the hold
	HoldUnknown   HoldResult = "unknown"   // the provider's answer did not come: asked again later
)

// HoldResults lists every result.
var HoldResults = []HoldResult{HoldSucceeded, HoldRefused, HoldUnknown}

// PaymentOutcome is how a payment attempt ended, as Observer.PaymentResult
// reports it (payd_payments_total's result label, the outcome log's result).
type PaymentOutcome string

// Payment outcomes.
const (
	PaymentPaid     PaymentOutcome = "paid"
	PaymentDeclined PaymentOutcome = "declined"
	// PaymentUnknown: the provider's answer was lost; the recoverer or a
	// retry must find it.
	PaymentUnknown PaymentOutcome = "unknown"
	// PaymentHeld: the provider charged other money than the attempt's; an
	// operator must settle it (ADR 0010).
	PaymentHeld PaymentOutcome = "held"
)

// PaymentOutcomes lists every payment outcome.
var PaymentOutcomes = []PaymentOutcome{PaymentPaid, PaymentDeclined, PaymentUnknown, PaymentHeld}

// NeedsAction reports whether someone must act on the outcome: the
// recoverer (unknown) or an operator (held).
func (o PaymentOutcome) NeedsAction() bool { return o == PaymentUnknown || o == PaymentHeld }

// NopObserver observes nothing; embed it to implement part of Observer.
type NopObserver struct{}

// OrderChanged does nothing.
func (NopObserver) OrderChanged(string) {}

// PaymentResult does nothing.
func (NopObserver) PaymentResult(context.Context, domain.Attempt, PaymentOutcome) {}

// DiscrepancyRecorded does nothing.
func (NopObserver) DiscrepancyRecorded(context.Context, domain.Discrepancy) {}

// RefundedAutomatically does nothing.
func (NopObserver) RefundedAutomatically(context.Context, domain.Refund) {}

// WebhookApplied does nothing.
func (NopObserver) WebhookApplied(string, WebhookOutcome) {}

// JobDone does nothing.
func (NopObserver) JobDone(JobName, int64) {}

// Retained does nothing.
func (NopObserver) Retained(string, int64) {}

// OrderCreated does nothing.
func (NopObserver) OrderCreated(bool) {}

// OutOfStock does nothing.
func (NopObserver) OutOfStock() {}

// HoldEnded does nothing.
func (NopObserver) HoldEnded(domain.HoldActionKind, HoldResult) {}

// Observers tells every observer in it, in order.
type Observers []Observer

// OrderChanged tells every observer.
func (all Observers) OrderChanged(orderID string) {
	for _, o := range all {
		o.OrderChanged(orderID)
	}
}

// PaymentResult tells every observer.
func (all Observers) PaymentResult(ctx context.Context, a domain.Attempt, result PaymentOutcome) {
	for _, o := range all {
		o.PaymentResult(ctx, a, result)
	}
}

// DiscrepancyRecorded tells every observer.
func (all Observers) DiscrepancyRecorded(ctx context.Context, d domain.Discrepancy) {
	for _, o := range all {
		o.DiscrepancyRecorded(ctx, d)
	}
}

// RefundedAutomatically tells every observer.
func (all Observers) RefundedAutomatically(ctx context.Context, r domain.Refund) {
	for _, o := range all {
		o.RefundedAutomatically(ctx, r)
	}
}

// WebhookApplied tells every observer.
func (all Observers) WebhookApplied(eventType string, outcome WebhookOutcome) {
	for _, o := range all {
		o.WebhookApplied(eventType, outcome)
	}
}

// JobDone tells every observer.
func (all Observers) JobDone(name JobName, n int64) {
	for _, o := range all {
		o.JobDone(name, n)
	}
}

// Retained tells every observer.
func (all Observers) Retained(table string, n int64) {
	for _, o := range all {
		o.Retained(table, n)
	}
}

// observing is o, or an observer of nothing when o is nil: every use case's
// Observer field is optional.
func observing(o Observer) Observer {
	if o == nil {
		return NopObserver{}
	}
	return o
}

// OrderCreated tells every observer.
func (all Observers) OrderCreated(byMerchant bool) {
	for _, o := range all {
		o.OrderCreated(byMerchant)
	}
}

// OutOfStock tells every observer.
func (all Observers) OutOfStock() {
	for _, o := range all {
		o.OutOfStock()
	}
}

// HoldEnded tells every observer.
func (all Observers) HoldEnded(k domain.HoldActionKind, result HoldResult) {
	for _, o := range all {
		o.HoldEnded(k, result)
	}
}
