package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/payd/payd/domain"
)

// ActorProvider is the audit trail's actor for what the provider did on
// its own (an outside refund, a dispute): no operator chose it.
const ActorProvider = "provider"

// Reported applies a provider's report that a refund succeeded (a
// refund.succeeded webhook): payd's own refund is confirmed, once; a
// refund payd never asked for is money given back all the same, and is
// recorded as an outside refund (Outside).
func (s *Refunds) Reported(ctx context.Context, ev domain.ProviderEvent) (WebhookOutcome, error) {
	if ev.IdempotencyKey != "" {
		_, err := s.Store.FindByProviderKey(ctx, ev.IdempotencyKey)
		switch {
		case err == nil:
			return s.Confirmed(ctx, ev.IdempotencyKey, ev.RefundID, ev.AmountText, ev.Currency)
		case !errors.Is(err, domain.ErrRefundNotFound):
			return "", err
		}
	}
	if ev.RefundID == "" || ev.ChargeID == "" || !ev.AmountReadable() {
		return OutcomeIgnored, nil // nothing payd could book or ask about
	}
	return s.Outside(ctx, domain.ProviderRefund{
		ID: ev.RefundID, IdempotencyKey: ev.IdempotencyKey, ChargeID: ev.ChargeID, OrderID: ev.OrderID,
		Amount: ev.Amount, Currency: ev.Currency, Status: domain.ChargeSucceeded, CreatedAt: ev.CreatedAt,
	}, domain.SourceWebhook)
}

// Outside records pr, a refund the provider made without payd asking (a
// refund from the provider's dashboard), as what it is: money given back.
// It is booked in the charge's order's ledger once (its reference is the
// provider's refund ID, as payd's own refunds' are) and, when the charge
// is the order's payment, counted at once in the order's confirmed
// refunds (domain.MoveCount), whatever payd's own refunds in flight have
// reserved: the money moved, so a full outside refund moves the order to
// refunded. A refund reported before its charge paid the
// order (the refund's webhook overtook the payment's outcome) is booked
// alone, and the settlement that pays the order by that charge counts it
// (ADR 0030). The audit trail records it with the provider as actor.
//
// The report is a hint: the provider is asked first (Charges) which order
// the charge pays and how much of it is refunded, and a refund its books
// do not show is not recorded but kept as a refund_amount_mismatch for an
// operator. A refund of payd's own (its provider key or ID is payd's) or
// one recorded already is OutcomeIgnored.
func (s *Refunds) Outside(ctx context.Context, pr domain.ProviderRefund, src domain.LedgerSource) (WebhookOutcome, error) {
	if pr.Status != domain.ChargeSucceeded || pr.ID == "" {
		return OutcomeIgnored, nil
	}
	if pr.IdempotencyKey != "" {
		if _, err := s.Store.FindByProviderKey(ctx, pr.IdempotencyKey); err == nil {
			return OutcomeIgnored, nil // payd's own: its reply or webhook settles it
		} else if !errors.Is(err, domain.ErrRefundNotFound) {
			return "", err
		}
	}
	orderID := pr.OrderID
	if s.Charges != nil {
		ch, err := s.Charges.FindCharge(ctx, pr.ChargeID)
		switch {
		case errors.Is(err, domain.ErrChargeNotFound):
			return s.outsideMismatch(ctx, pr, "", "the provider has no charge "+truncate(pr.ChargeID, 64))
		case err != nil:
			return "", fmt.Errorf("ask the provider about charge %s: %w", pr.ChargeID, err)
		}
		orderID = ch.OrderID
		if ok, err := s.refundShown(ctx, ch, pr); err != nil || !ok {
			if err != nil {
				return "", err
			}
			return s.outsideMismatch(ctx, pr, orderID, fmt.Sprintf("the provider's charge %s shows %s refunded, less than payd's books with this refund", truncate(ch.ID, 64), ch.RefundedAmount))
		}
	}
	o, err := s.Orders.FindByID(ctx, orderID)
	if errors.Is(err, domain.ErrOrderNotFound) {
		return s.outsideMismatch(ctx, pr, "", "the refunded charge pays no order of payd's")
	}
	if err != nil {
		return "", err
	}
	if pr.Currency != string(o.Currency) || !pr.Amount.IsPositive() {
		return s.outsideMismatch(ctx, pr, o.ID, "the refund is in "+truncate(pr.Currency, 8)+", the order in "+string(o.Currency))
	}
	own, err := s.ownRefund(ctx, o, pr)
	if err != nil || own {
		if own {
			return OutcomeIgnored, nil
		}
		return "", err
	}
	now := s.Now().UTC()
	var isNew, paying, counted bool
	err = s.Tx.InTx(ctx, func(ctx context.Context) error {
		isNew, paying, counted = false, false, false // InTx may run fn again after a conflict: start clean
		e := domain.LedgerEntry{
			ID: newID(), OrderID: o.ID, Kind: domain.LedgerOutsideRefund, Reference: domain.RefundReference(pr.ID),
			ChargeID: pr.ChargeID, Amount: pr.Amount, Currency: o.Currency, Source: src, CreatedAt: now,
			Note: "refunded at the provider without payd (refund " + truncate(pr.ID, 64) + ")",
		}
		if s.Ledger != nil {
			if isNew, err = s.Ledger.Append(ctx, e); err != nil || !isNew {
				return err
			}
		}
		// Whether the charge pays the order is decided on the order's row
		// taken for this transaction, never on the read above: the order
		// may be being paid by this very charge right now. Either its
		// settlement committed first, and the order reads paid here and
		// the refund is counted now; or it waits for this transaction and
		// then counts the refund booked here (countOutside). Exactly one
		// of the two counts it, on one database or on a Galera cluster.
		cur, err := s.Orders.Lock(ctx, o.ID)
		if err != nil {
			return err
		}
		if paying, err = s.pays(ctx, cur, pr); err != nil {
			return err
		}
		if paying {
			if counted, err = s.Orders.MoveRefund(ctx, o.ID, domain.MoveCount, domain.MinorUnits(pr.Amount, o.Currency), now); err != nil {
				return err
			}
		}
		if err := s.auditOutside(ctx, o.ID, pr, src, counted, now); err != nil {
			return err
		}
		// Money went back: the order's order.refunded event, with the
		// refund's entry, counted or not (ADR 0053).
		return s.Orders.Tell(ctx, o.ID, domain.NotifyOrderRefunded, sourceCause(ctx, src, pr.ID), now)
	})
	if err != nil {
		return "", fmt.Errorf("record outside refund %s: %w", pr.ID, err)
	}
	if !isNew && s.Ledger != nil {
		return OutcomeIgnored, nil
	}
	observing(s.Observer).OrderChanged(o.ID)
	if paying && counted {
		if _, err := s.Heal(ctx, o.ID, src); err != nil { // the cheap check after a money event
			return "", err
		}
	}
	if paying && !counted {
		// The order's confirmed refunds could not take it (they and it
		// exceed the payment): the money moved all the same and is in the
		// ledger. The order is repaired from its ledger, and an operator
		// told.
		if _, err := s.Heal(ctx, o.ID, src); err != nil {
			return "", err
		}
		return s.recordedMismatch(ctx, pr, o.ID, "the order's confirmed refunds could not take it: with them it exceeds the payment")
	}
	return OutcomeApplied, nil
}

// refundShown reports whether the provider's charge ch shows refunded at
// least what payd's ledger holds for it plus pr.
func (s *Refunds) refundShown(ctx context.Context, ch domain.Charge, pr domain.ProviderRefund) (bool, error) {
	if s.Ledger == nil || ch.OrderID == "" {
		return ch.RefundedAmount.GreaterThanOrEqual(pr.Amount), nil
	}
	entries, err := s.Ledger.ListByOrder(ctx, ch.OrderID)
	if err != nil {
		return false, err
	}
	booked := pr.Amount
	for _, e := range entries {
		if e.ChargeID != ch.ID || (e.Kind != domain.LedgerRefund && e.Kind != domain.LedgerOutsideRefund) {
			continue
		}
		if e.Reference == domain.RefundReference(pr.ID) {
			return true, nil // booked already: the repeat records nothing
		}
		booked = booked.Add(e.Amount)
	}
	return ch.RefundedAmount.GreaterThanOrEqual(booked), nil
}

// ownRefund reports whether pr is one of payd's own refunds of order o
// (by the provider's refund ID).
func (s *Refunds) ownRefund(ctx context.Context, o domain.Order, pr domain.ProviderRefund) (bool, error) {
	rs, err := s.Store.ListByOrder(ctx, o.ID)
	if err != nil {
		return false, err
	}
	for _, r := range rs {
		if r.ProviderRefundID == pr.ID {
			return true, nil
		}
	}
	return false, nil
}

// pays reports whether pr's charge is order o's payment: o is paid (or
// refunded) and its paying attempt succeeded with that charge. A refund of
// a charge that does not pay o yet is booked without being counted; the
// settlement that pays o by that charge counts it (countOutside).
func (s *Refunds) pays(ctx context.Context, o domain.Order, pr domain.ProviderRefund) (bool, error) {
	if !o.Status.WasPaid() {
		return false, nil
	}
	a, err := s.Attempts.Latest(ctx, o.ID, o.PayRequestID)
	if errors.Is(err, domain.ErrAttemptNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return a.SucceededWith(pr.ChargeID), nil
}

// auditOutside records an outside refund in the order's audit trail, the
// provider as actor.
func (s *Refunds) auditOutside(ctx context.Context, orderID string, pr domain.ProviderRefund, src domain.LedgerSource, counted bool, now time.Time) error {
	if s.Audit == nil {
		return nil
	}
	detail, err := json.Marshal(map[string]any{
		"refund_id": truncate(pr.ID, 64), "charge_id": truncate(pr.ChargeID, 64), "amount": pr.Amount.StringFixed(domain.Currency(pr.Currency).Scale()),
		"currency": pr.Currency, "learned_from": src, "counted_on_order": counted,
	})
	if err != nil {
		return err
	}
	return s.Audit.Append(ctx, domain.AuditEntry{
		ID: newID(), Actor: ActorProvider, Action: "outside_refund", OrderID: orderID, Target: truncate(pr.ID, 64),
		Result: 200, Detail: string(detail), CreatedAt: now,
	})
}

// recordedMismatch records, once, a refund that payd booked in the
// order's ledger but that disagrees with the order, for an operator: its
// note says the money was recorded.
func (s *Refunds) recordedMismatch(ctx context.Context, pr domain.ProviderRefund, orderID, why string) (WebhookOutcome, error) {
	return s.mismatch(ctx, pr, orderID, "a reported refund was recorded in the ledger (refund "+truncate(pr.ID, 64)+"), but "+why)
}

// outsideMismatch records, once, a reported refund payd could not record
// as an outside refund, for an operator.
func (s *Refunds) outsideMismatch(ctx context.Context, pr domain.ProviderRefund, orderID, why string) (WebhookOutcome, error) {
	return s.mismatch(ctx, pr, orderID, "a reported refund was not recorded: "+why)
}

// mismatch records, once, a refund_amount_mismatch of pr saying note.
func (s *Refunds) mismatch(ctx context.Context, pr domain.ProviderRefund, orderID, note string) (WebhookOutcome, error) {
	if s.Discrepancies == nil {
		return OutcomeIgnored, nil
	}
	d := withProviderAmount(domain.Discrepancy{
		Type: domain.RefundAmountMismatch, Reference: domain.RefundReference(pr.ID), OrderID: orderID, ChargeID: pr.ChargeID,
		Note: truncate(note, 500),
	}, pr.Amount.String(), pr.Currency)
	stored, isNew, err := s.Discrepancies.Record(ctx, newDiscrepancy(d, s.Now))
	if err != nil {
		return "", err
	}
	if isNew {
		observing(s.Observer).DiscrepancyRecorded(ctx, stored)
	}
	return OutcomeDiscrepancy, nil
}
