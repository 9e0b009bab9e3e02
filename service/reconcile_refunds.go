package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/payd/payd/domain"
)

// ResolveRecorded is the resolution of a refund_missing_locally that payd
// recorded as an outside refund as soon as it found it: the money is in
// the order's books, and the discrepancy is kept as the trace of how payd
// learned of it.
const ResolveRecorded = "recorded"

// OutsideRecorder records a refund the provider made without payd asking
// (Refunds.Outside): it asks the provider's books first and records the
// refund once.
type OutsideRecorder interface {
	Outside(ctx context.Context, pr domain.ProviderRefund, src domain.LedgerSource) (WebhookOutcome, error)
}

// refundSlack widens the provider's refund list past the window's end,
// only to match payd's own refunds: payd records a refund before it asks
// the provider, so one payd created just before the end may carry the
// provider's time just after it.
const refundSlack = time.Hour

// refundCheck is what comparing refunds found: the findings, and the
// refunds to record as outside refunds, each with its finding's index.
type refundCheck struct {
	found   []domain.Discrepancy
	outside map[int]domain.ProviderRefund
	// missing are payd's succeeded refunds the provider did not list, each
	// with its finding's index; orders are the orders whose refunds the
	// comparison saw.
	missing map[int]domain.Refund
	orders  map[string]bool
}

// refundsToCompare returns the provider's refunds a run compares: the
// settlement file's refunds (listed reports whether the file names them
// one by one), or the provider's list over the window and refundSlack
// past it; listed is false when there is nothing to compare with.
func (s *Reconciler) refundsToCompare(ctx context.Context, run domain.ReconciliationRun, req ReconcileRequest) ([]domain.ProviderRefund, bool, error) {
	if s.RefundStore == nil {
		return nil, false, nil
	}
	if req.File != nil {
		return req.File.Refunds, req.File.Refunds != nil, nil
	}
	if s.Refunds == nil {
		return nil, false, nil
	}
	refunds, err := s.Refunds.ListRefunds(ctx, run.From, run.To.Add(refundSlack))
	if err != nil {
		return nil, false, fmt.Errorf("list provider refunds: %w", err)
	}
	return refunds, true, nil
}

// compareRefunds walks the provider's succeeded refunds, then payd's
// succeeded refunds in the window. A provider refund payd made is compared
// with payd's record of it (refund_amount_mismatch); one payd holds as an
// outside refund already agrees (a webhook or an earlier run recorded it);
// any other is a refund_missing_locally, to be recorded (record). A refund
// of payd's the provider does not list is a refund_missing_at_provider.
// Beyond the window's end (the provider list's slack) a provider refund
// only vouches for payd's.
func (s *Reconciler) compareRefunds(ctx context.Context, run domain.ReconciliationRun, listed []domain.ProviderRefund, fromFile bool) (refundCheck, error) {
	local, err := s.localRefunds(ctx, run)
	if err != nil {
		return refundCheck{}, err
	}
	byID, byKey := map[string]domain.Refund{}, map[string]domain.Refund{}
	for _, r := range local {
		if r.ProviderRefundID != "" {
			byID[r.ProviderRefundID] = r
		}
		byKey[r.ProviderKey] = r
	}
	check := refundCheck{outside: map[int]domain.ProviderRefund{}, missing: map[int]domain.Refund{}, orders: map[string]bool{}}
	for _, r := range local {
		check.orders[r.OrderID] = true
	}
	listedIDs := map[string]bool{}
	for _, pr := range listed {
		if pr.Status != domain.ChargeSucceeded || pr.ID == "" {
			continue
		}
		if pr.OrderID != "" {
			check.orders[pr.OrderID] = true
		}
		r, own := byID[pr.ID]
		if !own && pr.IdempotencyKey != "" {
			r, own = byKey[pr.IdempotencyKey]
		}
		if own {
			listedIDs[r.ID] = true
		}
		if !fromFile && !pr.CreatedAt.Before(run.To) {
			continue
		}
		if !own {
			if r, own, err = s.ownRefund(ctx, pr); err != nil {
				return refundCheck{}, err
			}
		}
		d, record, err := s.checkRefund(ctx, pr, r, own)
		if err != nil {
			return refundCheck{}, err
		}
		if d == nil {
			continue
		}
		if record {
			check.outside[len(check.found)] = pr
		}
		check.found = append(check.found, *d)
	}
	for _, r := range local {
		if !listedIDs[r.ID] {
			check.missing[len(check.found)] = r
			check.found = append(check.found, missingAtProvider(r))
		}
	}
	return check, nil
}

// localRefunds returns payd's succeeded refunds created in the run's window.
func (s *Reconciler) localRefunds(ctx context.Context, run domain.ReconciliationRun) ([]domain.Refund, error) {
	var out []domain.Refund
	for after := ""; ; {
		page, err := s.RefundStore.ListSucceededBetween(ctx, run.From, run.To, after, 500)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < 500 {
			return out, nil
		}
		after = page[len(page)-1].ID
	}
}

// ownRefund finds payd's refund of pr outside the window, by the key payd
// sent it under.
func (s *Reconciler) ownRefund(ctx context.Context, pr domain.ProviderRefund) (domain.Refund, bool, error) {
	if pr.IdempotencyKey == "" {
		return domain.Refund{}, false, nil
	}
	r, err := s.RefundStore.FindByProviderKey(ctx, pr.IdempotencyKey)
	if errors.Is(err, domain.ErrRefundNotFound) {
		return domain.Refund{}, false, nil
	}
	return r, err == nil, err
}

// checkRefund decides one succeeded provider refund: a finding or none,
// and whether the finding is an outside refund to record. r is payd's own
// record of it when own.
func (s *Reconciler) checkRefund(ctx context.Context, pr domain.ProviderRefund, r domain.Refund, own bool) (*domain.Discrepancy, bool, error) {
	d := withProviderAmount(domain.Discrepancy{Reference: domain.RefundReference(pr.ID), OrderID: pr.OrderID, ChargeID: pr.ChargeID},
		pr.Amount.String(), pr.Currency)
	if own {
		d.OrderID, d.ChargeID, d.LocalAmount, d.Currency = r.OrderID, r.ChargeID, r.Amount, r.Currency
		d = withProviderAmount(d, pr.Amount.String(), pr.Currency)
		switch {
		case !sameRefund(r, pr.Amount.String(), pr.Currency):
			d.Type = domain.RefundAmountMismatch
			d.Note = truncate(fmt.Sprintf("the provider lists payd's refund %s for another amount or currency", r.ID), 500)
		case r.Status == domain.RefundFailed:
			d.Type = domain.RefundMissingLocally
			d.Note = truncate(fmt.Sprintf("payd counts its refund %s as failed, but the provider lists it succeeded", r.ID), 500)
		default:
			return nil, false, nil // agrees, or pending: its reply, webhook or the recoverer settles it
		}
		return &d, false, nil
	}
	held, err := s.heldOutside(ctx, pr)
	if err != nil || held == nil {
		return nil, false, err
	}
	d.Type = domain.RefundMissingLocally
	if *held {
		// Recorded by an earlier run whose own record was lost with its
		// transaction (see Run): the trace is kept again, once.
		d.Note = "refunded at the provider without payd; recorded as an outside refund by reconciliation"
		resolvedAt(&d, ResolveRecorded, s.Now)
		return &d, false, nil
	}
	d.Note = "refunded at the provider without payd; to be recorded as an outside refund"
	return &d, true, nil
}

// heldOutside reports what payd's ledger holds of a refund that is not
// payd's own: nil when the ledger books it already (learned from a webhook,
// or payd's own refund under another key), true when a reconciliation run
// recorded it, false when payd does not hold it. Without a ledger, or
// without the refund's order, payd cannot tell: Outside decides.
func (s *Reconciler) heldOutside(ctx context.Context, pr domain.ProviderRefund) (*bool, error) {
	notHeld := false
	if s.Ledger == nil || pr.OrderID == "" {
		return &notHeld, nil
	}
	entries, err := s.Ledger.ListByOrder(ctx, pr.OrderID)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Reference != domain.RefundReference(pr.ID) {
			continue
		}
		if e.Kind == domain.LedgerOutsideRefund && e.Source == domain.SourceReconciliation {
			byRun := true
			return &byRun, nil
		}
		return nil, nil
	}
	return &notHeld, nil
}

// missingAtProvider is the finding of payd's succeeded refund r that the
// provider does not list.
func missingAtProvider(r domain.Refund) domain.Discrepancy {
	ref := r.ProviderRefundID
	if ref == "" {
		ref = "payd:" + r.ID // as its ledger entry names it
	}
	return domain.Discrepancy{
		Type: domain.RefundMissingAtProvider, Reference: domain.RefundReference(ref), OrderID: r.OrderID, ChargeID: r.ChargeID,
		LocalAmount: r.Amount, Currency: r.Currency,
		Note: truncate(fmt.Sprintf("payd counts its refund %s as succeeded, but the provider does not list it", r.ID), 500),
	}
}

// recordOutside records each outside refund the comparison found, before
// the run's transaction (Outside asks the provider, which a transaction
// must not wait on, and commits its own), and turns each finding into
// what happened: resolved as recorded; dropped when payd turns out to
// hold it already; or, when the provider's books do not confirm it
// (nothing was recorded: never money on a file's word), the
// refund_amount_mismatch Outside recorded for an operator.
func (s *Reconciler) recordOutside(ctx context.Context, check refundCheck) ([]domain.Discrepancy, error) {
	if s.Outside == nil || len(check.outside) == 0 {
		return check.found, nil
	}
	out := make([]domain.Discrepancy, 0, len(check.found))
	for i, d := range check.found {
		pr, ok := check.outside[i]
		if !ok {
			out = append(out, d)
			continue
		}
		outcome, err := s.Outside.Outside(ctx, pr, domain.SourceReconciliation)
		if err != nil {
			return nil, fmt.Errorf("record outside refund %s: %w", pr.ID, err)
		}
		switch outcome {
		case OutcomeApplied:
			d.Note = "refunded at the provider without payd; recorded as an outside refund by reconciliation"
			resolvedAt(&d, ResolveRecorded, s.Now)
		case OutcomeDiscrepancy:
			// Not confirmed, or booked but more than the order's refunded
			// amount could take: Outside recorded a refund_amount_mismatch,
			// which the run links. A booked one keeps its trace too.
			if held, err := s.heldOutside(ctx, pr); err != nil {
				return nil, err
			} else if held != nil && *held {
				trace := d
				trace.Note = "refunded at the provider without payd; recorded as an outside refund by reconciliation"
				resolvedAt(&trace, ResolveRecorded, s.Now)
				out = append(out, trace)
			}
			d.Type = domain.RefundAmountMismatch
			d.Note = "a listed refund payd could not record as the provider has it"
		default:
			continue // payd holds it already
		}
		out = append(out, d)
	}
	return out, nil
}

// resolvedAt marks d resolved with resolution, now.
func resolvedAt(d *domain.Discrepancy, resolution string, now func() time.Time) {
	at := now().UTC()
	d.Status, d.Resolution, d.ResolvedAt = domain.DiscrepancyResolved, resolution, &at
}

// confirmFileRefunds asks the provider's refund list about each refund a
// settlement file names that payd would record: a file is nobody's word.
// One the provider lists the same way is recorded from the provider's
// record; any other is a refund_amount_mismatch and nothing is recorded.
// Without the provider's list, Outside still asks the provider's charge.
func (s *Reconciler) confirmFileRefunds(ctx context.Context, run domain.ReconciliationRun, check *refundCheck) error {
	if s.Refunds == nil || len(check.outside) == 0 {
		return nil
	}
	from, to := run.From, run.To
	for _, pr := range check.outside {
		if pr.CreatedAt.Before(from) {
			from = pr.CreatedAt
		}
		if !pr.CreatedAt.Before(to) {
			to = pr.CreatedAt.Add(time.Second)
		}
	}
	// A file's dates are its own word: the provider is asked about at
	// most a window of the run's own bound around it. A refund dated
	// further out is not found, and so not recorded.
	if earliest := run.From.Add(-31 * 24 * time.Hour); from.Before(earliest) {
		from = earliest
	}
	if latest := run.To.Add(31 * 24 * time.Hour); to.After(latest) {
		to = latest
	}
	theirs, err := s.Refunds.ListRefunds(ctx, from, to.Add(refundSlack))
	if err != nil {
		return fmt.Errorf("list provider refunds: %w", err)
	}
	byID := map[string]domain.ProviderRefund{}
	for _, p := range theirs {
		byID[p.ID] = p
	}
	for i, pr := range check.outside {
		p, ok := byID[pr.ID]
		if ok && p.Status == domain.ChargeSucceeded && p.ChargeID == pr.ChargeID && p.Currency == pr.Currency && p.Amount.Equal(pr.Amount) {
			check.outside[i] = p
			continue
		}
		delete(check.outside, i)
		d := &check.found[i]
		d.Type = domain.RefundAmountMismatch
		d.Note = "the settlement file lists a refund the provider does not (or not for this charge, amount and currency): not recorded"
	}
	return nil
}
