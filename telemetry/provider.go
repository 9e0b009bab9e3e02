package telemetry

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// ProviderOutcome is the outcome label of
// payd_provider_request_duration_seconds: one of a fixed set, whatever the
// provider answers (ADR 0022).
type ProviderOutcome string

// Provider call outcomes.
const (
	ProviderOK          ProviderOutcome = "ok"
	ProviderDeclined    ProviderOutcome = "declined"
	ProviderNotFound    ProviderOutcome = "not_found"
	ProviderRefused     ProviderOutcome = "refused"
	ProviderTimeout     ProviderOutcome = "timeout"
	ProviderUnavailable ProviderOutcome = "unavailable"
	ProviderCanceled    ProviderOutcome = "canceled"
	ProviderError       ProviderOutcome = "error"
)

// ProviderOutcomes are the values of the outcome label.
var ProviderOutcomes = []ProviderOutcome{ProviderOK, ProviderDeclined, ProviderNotFound, ProviderRefused, ProviderTimeout,
	ProviderUnavailable, ProviderCanceled, ProviderError}

// ProviderOperations are the values of its operation label.
var ProviderOperations = []string{"charge", "lookup", "refund", "list_charges", "find_charge", "list_refunds", "list_disputes", "find_dispute", "capture", "void"}

// providerBuckets run from a fast sandbox reply to past the longest
// provider timeout one would configure.
var providerBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

func newProviderHistogram() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "payd_provider_request_duration_seconds",
		Help:    "Latency of calls to the payment provider by operation (charge, lookup, refund, list_charges) and outcome (ok, declined, not_found, refused, timeout, unavailable, canceled, error).",
		Buckets: providerBuckets,
	}, []string{"operation", "outcome"})
}

// ProviderCalled times one call to the provider. Labels outside the fixed
// sets are counted as "error"/"other", so no caller grows the series.
func (m *Metrics) ProviderCalled(operation string, outcome ProviderOutcome, d time.Duration) {
	if !slices.Contains(ProviderOperations, operation) {
		operation = "other"
	}
	if !slices.Contains(ProviderOutcomes, outcome) {
		outcome = ProviderError
	}
	m.provider.WithLabelValues(operation, string(outcome)).Observe(d.Seconds())
}

func newWebhookRejections() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payd_webhook_rejected_total",
		Help: "Provider webhook deliveries refused before being stored, by reason: invalid_signature, malformed.",
	}, []string{"reason"})
}

// WebhookRejection is why a webhook delivery was refused before it was
// stored (payd_webhook_rejected_total's reason label).
type WebhookRejection string

// Webhook rejections.
const (
	RejectedInvalidSignature WebhookRejection = "invalid_signature"
	RejectedMalformed        WebhookRejection = "malformed"
)

// WebhookRejections are the values of the reason label.
var WebhookRejections = []WebhookRejection{RejectedInvalidSignature, RejectedMalformed}

// WebhookRejected counts one refused webhook delivery (handler.Webhooks.Rejected).
func (m *Metrics) WebhookRejected(reason WebhookRejection) {
	if reason != RejectedInvalidSignature {
		reason = RejectedMalformed
	}
	m.rejected.WithLabelValues(string(reason)).Inc()
}

// Provider is every port payd's use cases need from the provider: the
// sandbox's client (provider.Client) or Stripe's (stripeprovider.Client).
type Provider interface {
	service.PaymentProvider
	service.RefundProvider
	service.ChargeLister
	// The books (ADR 0030): asked before money moves on anyone's word,
	// and listed by reconciliation.
	service.ChargeFinder
	service.RefundLister
	service.DisputeLister
	service.DisputeFinder
	// Holds (ADR 0060): a capture or a void of an authorized charge.
	service.HoldProvider
}

// ObservedProvider is the provider port with a stopwatch: every call to
// Next is timed into payd_provider_request_duration_seconds by operation
// and outcome (Observe, normally Metrics.ProviderCalled). It wraps the
// port in the wiring, so neither service nor provider knows about
// Prometheus.
type ObservedProvider struct {
	Next    Provider
	Observe func(operation string, outcome ProviderOutcome, d time.Duration)
}

// Charge times a charge; a decline is the outcome "declined".
func (p ObservedProvider) Charge(ctx context.Context, req domain.ChargeRequest) (domain.Charge, error) {
	start := time.Now()
	ch, err := p.Next.Charge(ctx, req)
	outcome := providerOutcome(err)
	if err == nil && ch.Status == domain.ChargeFailed {
		outcome = ProviderDeclined
	}
	p.Observe("charge", outcome, time.Since(start))
	return ch, err
}

// GetCharge times a lookup of an attempt's charge.
func (p ObservedProvider) GetCharge(ctx context.Context, a domain.Attempt) (domain.Charge, error) {
	start := time.Now()
	ch, err := p.Next.GetCharge(ctx, a)
	p.Observe("lookup", providerOutcome(err), time.Since(start))
	return ch, err
}

// Capture times a capture of a hold; a refusal is the outcome "declined".
func (p ObservedProvider) Capture(ctx context.Context, req domain.CaptureRequest) (domain.Charge, error) {
	start := time.Now()
	ch, err := p.Next.Capture(ctx, req)
	p.Observe("capture", holdOutcome(err), time.Since(start))
	return ch, err
}

// Void times a void of a hold; a refusal is the outcome "declined".
func (p ObservedProvider) Void(ctx context.Context, req domain.VoidRequest) (domain.Charge, error) {
	start := time.Now()
	ch, err := p.Next.Void(ctx, req)
	p.Observe("void", holdOutcome(err), time.Since(start))
	return ch, err
}

// holdOutcome is a capture's or a void's outcome: the provider's refusal
// is a decline of the request, not an error of the provider's.
func holdOutcome(err error) ProviderOutcome {
	if domain.IsProviderRequestError(err, "") {
		return ProviderDeclined
	}
	return providerOutcome(err)
}

// Refund times a refund.
func (p ObservedProvider) Refund(ctx context.Context, req domain.ProviderRefundRequest) (domain.ProviderRefund, error) {
	start := time.Now()
	r, err := p.Next.Refund(ctx, req)
	p.Observe("refund", providerOutcome(err), time.Since(start))
	return r, err
}

// ListCharges times each page of the listing a reconciliation run asks for.
func (p ObservedProvider) ListCharges(ctx context.Context, from, to time.Time, after string) (domain.ChargePage, error) {
	start := time.Now()
	page, err := p.Next.ListCharges(ctx, from, to, after)
	p.Observe("list_charges", providerOutcome(err), time.Since(start))
	return page, err
}

// FindCharge times a lookup of a charge by the provider's ID.
func (p ObservedProvider) FindCharge(ctx context.Context, chargeID string) (domain.Charge, error) {
	start := time.Now()
	ch, err := p.Next.FindCharge(ctx, chargeID)
	p.Observe("find_charge", providerOutcome(err), time.Since(start))
	return ch, err
}

// ListRefunds times the refund listing a reconciliation run asks for.
func (p ObservedProvider) ListRefunds(ctx context.Context, from, to time.Time) ([]domain.ProviderRefund, error) {
	start := time.Now()
	rs, err := p.Next.ListRefunds(ctx, from, to)
	p.Observe("list_refunds", providerOutcome(err), time.Since(start))
	return rs, err
}

// ListDisputes times the dispute listing a reconciliation run asks for.
func (p ObservedProvider) ListDisputes(ctx context.Context, from, to time.Time) ([]domain.ProviderDispute, error) {
	start := time.Now()
	ds, err := p.Next.ListDisputes(ctx, from, to)
	p.Observe("list_disputes", providerOutcome(err), time.Since(start))
	return ds, err
}

// FindDispute times a lookup of a dispute by the provider's ID.
func (p ObservedProvider) FindDispute(ctx context.Context, id string) (domain.ProviderDispute, error) {
	start := time.Now()
	d, err := p.Next.FindDispute(ctx, id)
	p.Observe("find_dispute", providerOutcome(err), time.Since(start))
	return d, err
}

// providerOutcome sorts a provider call's error into the outcome label's
// fixed set (ProviderOutcomes).
func providerOutcome(err error) ProviderOutcome {
	var refused *domain.ProviderRequestError
	switch {
	case err == nil:
		return ProviderOK
	case errors.Is(err, context.Canceled):
		return ProviderCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return ProviderTimeout
	case errors.Is(err, domain.ErrChargeNotFound):
		return ProviderNotFound
	case errors.As(err, &refused):
		return ProviderRefused
	case errors.Is(err, domain.ErrProviderUnavailable):
		return ProviderUnavailable
	}
	return ProviderError
}
