package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/payd/payd/domain"
)

// ResolveRepaired is the resolution of an order_books_repaired: payd
// repaired the order from its ledger as soon as it found the difference;
// the discrepancy is the trace for an operator.
const ResolveRepaired = "repaired"

// Heal compares order orderID's confirmed refunds and status with its
// ledger, and repairs the order when they differ (ADR 0055): the ledger
// holds every movement of money the provider confirmed, once, so what the
// order counts as refunded is what the ledger holds given back of its
// paying charge (domain.RefundedOn), and its status is what that gives
// (domain.RefundBook.Status). The repair is one guarded UPDATE on the
// order at the version read (OrderStore.RepairBooks), with its audit
// entry and the event that tells the shop the order as it now is, in one
// transaction; it is recorded as an order_books_repaired discrepancy,
// resolved at once. It reports whether it repaired the order.
//
// It reads the order before the ledger: every change that books a
// refund changes the order in the same transaction, so a booking that
// commits between the two reads has moved the order's version, and the
// repair, guarded by the version read, matches nothing and is tried again
// on the order as it then is.
//
// An order whose ledger does not hold its paying charge (one paid before
// payd kept a ledger, until a reconciliation books it) is left alone:
// its ledger does not know all of its money. A repair only ever raises
// the order's confirmed refunds (or fixes the status they give): an order
// that counts more than its ledger holds is left alone too, since a
// ledger may lack refunds booked before it was kept, and money is taken
// back only by a reversal the provider confirmed.
func (s *Refunds) Heal(ctx context.Context, orderID string, src domain.LedgerSource) (bool, error) {
	if s.Ledger == nil {
		return false, nil
	}
	for range 3 {
		o, err := s.Orders.FindByID(ctx, orderID)
		if errors.Is(err, domain.ErrOrderNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		book, ok, err := s.ledgerBook(ctx, o)
		if err != nil || !ok {
			return false, err
		}
		have := domain.MinorUnits(o.RefundedAmount, o.Currency)
		if have == book.Refunded && o.Status == book.Status() {
			return false, nil
		}
		repaired, err := s.repair(ctx, o, book, have, src)
		if err != nil || repaired {
			return repaired, err
		}
	}
	return false, nil
}

// HealAll heals the orders ids as Heal heals each, 500 at a time: it
// reads their orders, attempts and ledgers in three statements, and heals
// one by one (Heal reads it again and repairs it under its version) only
// an order whose books differ from its ledger's. A reconciliation run
// heals every refunded order of its window with it.
func (s *Refunds) HealAll(ctx context.Context, ids []string, src domain.LedgerSource) error {
	if s.Ledger == nil {
		return nil
	}
	for part := range slices.Chunk(ids, 500) {
		orders, err := s.Orders.FindByIDs(ctx, part)
		if err != nil {
			return err
		}
		attempts, err := s.Attempts.ListByOrders(ctx, part)
		if err != nil {
			return err
		}
		entries, err := s.Ledger.ListByOrders(ctx, part)
		if err != nil {
			return err
		}
		for _, id := range part {
			o, ok := orders[id]
			if !ok {
				continue
			}
			book, ok := bookOf(o, lastOfRequest(attempts[id], o.PayRequestID), entries[id])
			if !ok || domain.MinorUnits(o.RefundedAmount, o.Currency) == book.Refunded && o.Status == book.Status() {
				continue
			}
			if _, err := s.Heal(ctx, id, src); err != nil {
				return err
			}
		}
	}
	return nil
}

// ledgerBook is order o's refund book as its ledger has it: false when the
// order is not paid, or its ledger does not hold its paying charge.
func (s *Refunds) ledgerBook(ctx context.Context, o domain.Order) (domain.RefundBook, bool, error) {
	if !o.Status.WasPaid() {
		return domain.RefundBook{}, false, nil
	}
	a, err := s.Attempts.Latest(ctx, o.ID, o.PayRequestID)
	if errors.Is(err, domain.ErrAttemptNotFound) {
		return domain.RefundBook{}, false, nil
	}
	if err != nil {
		return domain.RefundBook{}, false, err
	}
	if a.Status != domain.AttemptSucceeded || a.ProviderChargeID == "" {
		return domain.RefundBook{}, false, nil
	}
	entries, err := s.Ledger.ListByOrder(ctx, o.ID)
	if err != nil {
		return domain.RefundBook{}, false, err
	}
	book, ok := bookOf(o, a, entries)
	return book, ok, nil
}

// bookOf is order o's refund book as its ledger's entries have it, given
// its paying attempt a (none: a zero Attempt): false when the order is not
// paid, a did not succeed with a charge, or the ledger does not hold that
// charge.
func bookOf(o domain.Order, a domain.Attempt, entries []domain.LedgerEntry) (domain.RefundBook, bool) {
	charge := a.ProviderChargeID
	if !o.Status.WasPaid() || a.Status != domain.AttemptSucceeded || charge == "" {
		return domain.RefundBook{}, false
	}
	charged := false
	for _, e := range entries {
		charged = charged || (e.Kind == domain.LedgerCharge && e.ChargeID == charge)
	}
	if !charged {
		return domain.RefundBook{}, false
	}
	refunded := domain.RefundedOn(charge, o.Currency, entries)
	if refunded.LessThan(o.RefundedAmount) {
		// The ledger holds less than the order counts: money payd booked
		// before it kept a ledger (a refund of its own or one made at the
		// dashboard, which no entry records), or written behind its back.
		// The ledger cannot say the order is wrong, and a repair would
		// tell the shop money came back that never did: money is taken
		// back only by a reversal the provider confirmed (reverse).
		// Reconciliation compares such refunds with the provider's.
		return domain.RefundBook{}, false
	}
	amount := domain.MinorUnits(o.Captured(), o.Currency) // what the charge took: a manual order's capture
	return domain.RefundBook{
		Amount:   amount,
		Refunded: min(max(domain.MinorUnits(refunded, o.Currency), 0), amount),
		Reserved: domain.MinorUnits(o.RefundPending, o.Currency),
	}, true
}

// repair sets order o's confirmed refunds to book's, if o is still at the
// version read, and tells and records it.
func (s *Refunds) repair(ctx context.Context, o domain.Order, book domain.RefundBook, had int64, src domain.LedgerSource) (bool, error) {
	now := s.Now().UTC()
	var repaired bool
	tell := domain.NotifyOrderRefunded
	if book.Refunded < had {
		tell = domain.NotifyOrderRefundReversed
	}
	err := s.Tx.InTx(ctx, func(ctx context.Context) error {
		var err error
		if repaired, err = s.Orders.RepairBooks(ctx, o.ID, o.Version, book, now); err != nil || !repaired {
			return err
		}
		if s.Audit != nil {
			detail, err := json.Marshal(map[string]any{
				"refunded_was": domain.FormatAmount(domain.FromMinorUnits(had, o.Currency), o.Currency),
				"refunded_now": domain.FormatAmount(domain.FromMinorUnits(book.Refunded, o.Currency), o.Currency),
				"status_was":   o.Status, "status_now": book.Status(), "learned_from": src,
			})
			if err != nil {
				return err
			}
			if err := s.Audit.Append(ctx, domain.AuditEntry{
				ID: newID(), Actor: ActorLedger, Action: "repair_books", OrderID: o.ID, Target: o.ID,
				Result: 200, Detail: string(detail), CreatedAt: now,
			}); err != nil {
				return err
			}
		}
		return s.Orders.Tell(ctx, o.ID, tell, sourceCause(ctx, src, o.ID), now)
	})
	if err != nil || !repaired {
		return false, err
	}
	observing(s.Observer).OrderChanged(o.ID)
	d := newDiscrepancy(domain.Discrepancy{
		Type: domain.OrderBooksRepaired, Reference: fmt.Sprintf("books:%s:%d", o.ID, o.Version), OrderID: o.ID,
		LocalAmount: domain.FromMinorUnits(had, o.Currency), ProviderAmount: domain.FromMinorUnits(book.Refunded, o.Currency), Currency: o.Currency,
		Note: truncate(fmt.Sprintf("the order counted %s refunded (%s), its ledger holds %s: repaired from the ledger (%s)",
			domain.FormatAmount(domain.FromMinorUnits(had, o.Currency), o.Currency), o.Status,
			domain.FormatAmount(domain.FromMinorUnits(book.Refunded, o.Currency), o.Currency), book.Status()), 500),
	}, s.Now)
	at := d.DetectedAt
	d.Status, d.Resolution, d.ResolvedAt = domain.DiscrepancyResolved, ResolveRepaired, &at
	return true, s.record(ctx, d)
}

// ActorLedger is the audit trail's actor for a repair payd made from an
// order's ledger: no operator chose it.
const ActorLedger = "ledger"

// record keeps d once, and tells the observer of it when it is new.
func (s *Refunds) record(ctx context.Context, d domain.Discrepancy) error {
	if s.Discrepancies == nil {
		return nil
	}
	stored, isNew, err := s.Discrepancies.Record(ctx, d)
	if err == nil && isNew {
		observing(s.Observer).DiscrepancyRecorded(ctx, stored)
	}
	return err
}

// Reversed applies a provider's report that a refund of payd's that it
// had confirmed has failed after all (Stripe: refund.updated to failed,
// then refund.failed). The report is a hint: the provider is asked about
// the refund by its ID, and only its answer that the refund failed
// reverses it (reverse). Without a way to ask (the sandbox, whose
// refunds never fail once succeeded) the report changes nothing.
func (s *Refunds) Reversed(ctx context.Context, r domain.Refund, src domain.LedgerSource) (WebhookOutcome, error) {
	if r.Status != domain.RefundSucceeded || r.ProviderRefundID == "" || s.Getter == nil {
		return OutcomeIgnored, nil
	}
	pr, err := s.Getter.GetRefund(ctx, r.ProviderRefundID)
	if err != nil {
		return "", fmt.Errorf("%w: ask the provider about refund %s: %w", domain.ErrProviderUnavailable, truncate(r.ProviderRefundID, 64), err)
	}
	if pr.Status != domain.ChargeFailed {
		return OutcomeIgnored, nil // the provider still counts it given back
	}
	reversed, err := s.reverse(ctx, r, src)
	if err != nil || !reversed {
		return OutcomeIgnored, err
	}
	return OutcomeApplied, nil
}

// reverse takes back refund r, which the provider confirmed and then
// reversed: the refund becomes failed (a guarded UPDATE: once), a
// reversing ledger entry is booked, an order's own refund gives its money
// back to the order's confirmed refunds (domain.MoveReverse, which makes a
// refunded order paid again), and the shop is told (order.refund_reversed),
// in one transaction; a refund_reversed discrepancy tells an operator, who
// may refund again. It reports whether it reversed r.
func (s *Refunds) reverse(ctx context.Context, r domain.Refund, src domain.LedgerSource) (bool, error) {
	now := s.Now().UTC()
	var reversed bool
	err := s.Tx.InTx(ctx, func(ctx context.Context) error {
		reversed = false
		var err error
		if reversed, err = s.Store.Reverse(ctx, r.ID, now); err != nil || !reversed {
			return err
		}
		ref := r.ProviderRefundID
		if ref == "" {
			ref = "payd:" + r.ID
		}
		if err := appendEntry(ctx, s.Ledger, domain.LedgerEntry{
			ID: newID(), OrderID: r.OrderID, Kind: domain.LedgerRefundReversed, Reference: domain.ReversalReference(ref),
			ChargeID: r.ChargeID, Amount: r.Amount, Currency: r.Currency, Source: src, CreatedAt: now,
			Note: fmt.Sprintf("the provider reversed refund %s after confirming it", r.ID),
		}); err != nil {
			return err
		}
		if r.Kind == domain.RefundManual {
			if _, err = s.Orders.MoveRefund(ctx, r.OrderID, domain.MoveReverse, domain.MinorUnits(r.Amount, r.Currency), now); err != nil {
				return err
			}
		}
		return s.Orders.Tell(ctx, r.OrderID, domain.NotifyOrderRefundReversed, sourceCause(ctx, src, r.ID), now)
	})
	if err != nil || !reversed {
		return false, err
	}
	observing(s.Observer).OrderChanged(r.OrderID)
	if r.Kind == domain.RefundManual {
		if _, err := s.Heal(ctx, r.OrderID, src); err != nil { // repairs only a difference (moved or not)
			return true, err
		}
	}
	what := "payd's refund"
	if r.Kind != domain.RefundManual {
		what = "payd's automatic refund of charge " + truncate(r.ChargeID, 64)
	}
	return true, s.record(ctx, newDiscrepancy(domain.Discrepancy{
		Type: domain.RefundReversed, Reference: domain.ReversalReference(r.ID), OrderID: r.OrderID, ChargeID: r.ChargeID,
		LocalAmount: r.Amount, Currency: r.Currency,
		Note: truncate(fmt.Sprintf("the provider reversed %s %s of %s after confirming it: the money is the merchant's again and the order was given it back; refund again if it is still owed",
			what, r.ID, domain.FormatAmount(r.Amount, r.Currency)), 500),
	}, s.Now))
}

// Recheck asks the provider about refund r, which payd counts as
// succeeded but the provider's list did not show (a reconciliation's
// refund_missing_at_provider), and reverses it when the provider says it
// failed. Without a way to ask it changes nothing.
func (s *Refunds) Recheck(ctx context.Context, r domain.Refund, src domain.LedgerSource) (bool, error) {
	out, err := s.Reversed(ctx, r, src)
	return out == OutcomeApplied, err
}

// OutsideReversed applies a provider's report that a refund made outside
// payd failed: if payd booked it as an outside refund, the money is the
// merchant's again, and payd takes it back as it does its own refunds
// (reverse): a reversing ledger entry, the order's confirmed refunds
// given back when it counted them, order.refund_reversed told, a
// refund_reversed discrepancy for the operator, once. The report is a
// hint: the provider is asked which order the charge pays and what became
// of the refund; a refund payd never booked changes nothing.
func (s *Refunds) OutsideReversed(ctx context.Context, ev domain.ProviderEvent) (WebhookOutcome, error) {
	if ev.RefundID == "" || ev.ChargeID == "" || s.Ledger == nil || s.Getter == nil || s.Charges == nil {
		return OutcomeIgnored, nil
	}
	ch, err := s.Charges.FindCharge(ctx, ev.ChargeID)
	if errors.Is(err, domain.ErrChargeNotFound) {
		return OutcomeIgnored, nil
	}
	if err != nil {
		return "", fmt.Errorf("%w: ask the provider about charge %s: %w", domain.ErrProviderUnavailable, truncate(ev.ChargeID, 64), err)
	}
	if ch.OrderID == "" {
		return OutcomeIgnored, nil
	}
	entries, err := s.Ledger.ListByOrder(ctx, ch.OrderID)
	if err != nil {
		return "", err
	}
	var booked *domain.LedgerEntry
	for i, e := range entries {
		if e.Kind == domain.LedgerOutsideRefund && e.Reference == domain.RefundReference(ev.RefundID) {
			booked = &entries[i]
		}
	}
	if booked == nil {
		return OutcomeIgnored, nil // never booked: nothing to take back
	}
	pr, err := s.Getter.GetRefund(ctx, ev.RefundID)
	if err != nil {
		return "", fmt.Errorf("%w: ask the provider about refund %s: %w", domain.ErrProviderUnavailable, truncate(ev.RefundID, 64), err)
	}
	if pr.Status != domain.ChargeFailed {
		return OutcomeIgnored, nil
	}
	now := s.Now().UTC()
	var isNew bool
	err = s.Tx.InTx(ctx, func(ctx context.Context) error {
		var err error
		isNew, err = s.Ledger.Append(ctx, domain.LedgerEntry{
			ID: newID(), OrderID: booked.OrderID, Kind: domain.LedgerRefundReversed, Reference: domain.ReversalReference(ev.RefundID),
			ChargeID: booked.ChargeID, Amount: booked.Amount, Currency: booked.Currency, Source: domain.SourceWebhook, CreatedAt: now,
			Note: "the provider reversed refund " + truncate(ev.RefundID, 64) + ", made outside payd, after confirming it",
		})
		if err != nil || !isNew {
			return err
		}
		cur, err := s.Orders.Lock(ctx, booked.OrderID)
		if err != nil {
			return err
		}
		counted, err := s.pays(ctx, cur, domain.ProviderRefund{ChargeID: booked.ChargeID})
		if err != nil {
			return err
		}
		if counted {
			if _, err := s.Orders.MoveRefund(ctx, cur.ID, domain.MoveReverse, domain.MinorUnits(booked.Amount, booked.Currency), now); err != nil {
				return err
			}
		}
		return s.Orders.Tell(ctx, cur.ID, domain.NotifyOrderRefundReversed, sourceCause(ctx, domain.SourceWebhook, ev.RefundID), now)
	})
	if err != nil {
		return "", fmt.Errorf("reverse outside refund %s: %w", truncate(ev.RefundID, 64), err)
	}
	if !isNew {
		return OutcomeIgnored, nil
	}
	observing(s.Observer).OrderChanged(booked.OrderID)
	if _, err := s.Heal(ctx, booked.OrderID, domain.SourceWebhook); err != nil {
		return "", err
	}
	err = s.record(ctx, newDiscrepancy(domain.Discrepancy{
		Type: domain.RefundReversed, Reference: domain.ReversalReference(ev.RefundID), OrderID: booked.OrderID, ChargeID: booked.ChargeID,
		LocalAmount: booked.Amount, Currency: booked.Currency,
		Note: truncate(fmt.Sprintf("the provider reversed refund %s of %s, made outside payd, after confirming it: the money is the merchant's again and the order was given it back; refund again if it is still owed",
			ev.RefundID, domain.FormatAmount(booked.Amount, booked.Currency)), 500),
	}, s.Now))
	if err != nil {
		return "", err
	}
	return OutcomeApplied, nil
}
