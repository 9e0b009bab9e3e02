package service

import (
	"context"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// chargeEntry is the ledger entry of attempt a's charge chargeID: the
// attempt's money, which payd applies only when the provider reported the
// same (Checkout's money check).
func chargeEntry(a domain.Attempt, chargeID string, src domain.LedgerSource, now time.Time) domain.LedgerEntry {
	return domain.LedgerEntry{
		ID: newID(), OrderID: a.OrderID, Kind: domain.LedgerCharge, Reference: domain.ChargeReference(chargeID),
		ChargeID: chargeID, Amount: a.Amount, Currency: a.Currency, Source: src, CreatedAt: now,
	}
}

// payingEntry is the ledger entry of the charge that pays its order, for
// the transaction that pays it after another settled the attempt. That
// one booked the charge as it settled it, and the entry is then a repeat
// that records nothing; but an order is never paid with its charge missing
// from its ledger, whatever cut the settlement short, so the payment books
// it too. An entry this writes says so.
func payingEntry(a domain.Attempt, chargeID string, src domain.LedgerSource, now time.Time) domain.LedgerEntry {
	e := chargeEntry(a, chargeID, src, now)
	e.Note = "booked as the order was paid: the attempt's settlement had not booked it"
	return e
}

// providerChargeEntry is the ledger entry of a charge as the provider
// reported it (a held charge: other money than the attempt's). False when
// the report cannot be booked: a currency payd does not know, or no
// positive amount.
func providerChargeEntry(a domain.Attempt, orderID string, ch domain.Charge, src domain.LedgerSource, now time.Time) (domain.LedgerEntry, bool) {
	cur, err := domain.ParseCurrency(ch.Currency)
	if err != nil || !ch.Amount.IsPositive() || ch.ID == "" {
		return domain.LedgerEntry{}, false
	}
	return domain.LedgerEntry{
		ID: newID(), OrderID: orderID, Kind: domain.LedgerCharge, Reference: domain.ChargeReference(ch.ID),
		ChargeID: ch.ID, Amount: ch.Amount, Currency: cur, Source: src, CreatedAt: now,
		Note: fmt.Sprintf("the provider charged other money than attempt %s asked for", a.ID),
	}, true
}

// refundEntry is the ledger entry of payd's refund r, which the provider
// confirmed as providerRefundID.
func refundEntry(r domain.Refund, providerRefundID string, src domain.LedgerSource, now time.Time) domain.LedgerEntry {
	ref := providerRefundID
	if ref == "" {
		ref = "payd:" + r.ID // a provider that names no refund: payd's own ID, still once
	}
	return domain.LedgerEntry{
		ID: newID(), OrderID: r.OrderID, Kind: domain.LedgerRefund, Reference: domain.RefundReference(ref),
		ChargeID: r.ChargeID, Amount: r.Amount, Currency: r.Currency, Source: src, CreatedAt: now,
		Note: fmt.Sprintf("refund %s (%s: %s)", r.ID, r.Kind, truncate(r.Reason, 200)),
	}
}

// appendEntry appends e to l, if payd keeps a ledger (tests may not).
func appendEntry(ctx context.Context, l LedgerStore, e domain.LedgerEntry) error {
	if l == nil || (e.Kind == domain.LedgerCharge && e.ChargeID == "") {
		return nil // a charge the provider named no ID for has no reference to be booked once by
	}
	if _, err := l.Append(ctx, e); err != nil {
		return fmt.Errorf("book %s %s: %w", e.Kind, e.Reference, err)
	}
	return nil
}

// seenChargeEntry is the ledger entry of a successful charge as the
// provider's own record shows it (its list, or its answer about the
// charge), booked against orderID: what it took (a hold's capture, or the
// whole amount). False when it cannot be booked.
func seenChargeEntry(orderID string, ch domain.Charge, src domain.LedgerSource, now time.Time) (domain.LedgerEntry, bool) {
	cur, err := domain.ParseCurrency(ch.Currency)
	taken := ch.Amount
	if ch.CaptureMethod == domain.CaptureManual {
		taken = ch.AmountCaptured // a hold's capture took this much; the rest was released
	}
	if err != nil || ch.Status != domain.ChargeSucceeded || !taken.IsPositive() || ch.ID == "" || orderID == "" {
		return domain.LedgerEntry{}, false
	}
	return domain.LedgerEntry{
		ID: newID(), OrderID: orderID, Kind: domain.LedgerCharge, Reference: domain.ChargeReference(ch.ID),
		ChargeID: ch.ID, Amount: taken, Currency: cur, Source: src, CreatedAt: now,
		Note: "as the provider's books show it",
	}, true
}

// countOutside counts into order orderID's refunded amount the outside
// refunds of its charge chargeID that its ledger holds already: refunds
// made at the provider and reported before the order was paid by that
// charge, which could not be counted then (Refunds.Outside). It runs in the
// transaction that marks the order paid, right after that guarded UPDATE:
// the order's row is then this transaction's, so an outside refund either
// committed before (and is read here) or is recorded after and counts
// itself (ADR 0030). The count is the refund book's count
// (domain.MoveCount), so a full refund moves the order to refunded. It reports whether it changed the order. It must follow
// the MarkPaid that wrote the transaction's order.paid event: the event is
// brought up to the counted order (OrderStore.Restamp).
func countOutside(ctx context.Context, l LedgerStore, orders OrderStore, orderID, chargeID string, cur domain.Currency, now time.Time) (bool, error) {
	if l == nil || chargeID == "" {
		return false, nil
	}
	entries, err := l.ListByOrder(ctx, orderID)
	if err != nil {
		return false, err
	}
	sum := decimal.Zero
	for _, e := range entries {
		if e.Kind == domain.LedgerOutsideRefund && e.ChargeID == chargeID {
			sum = sum.Add(e.Amount)
		}
	}
	if !sum.IsPositive() {
		return false, nil
	}
	// The provider confirmed each refund against the charge before it was
	// booked (Refunds.refundShown), and the charge is the order's payment
	// for the order's money: the guard cannot refuse an order paid just
	// now. Should it, the payment stands and the ledger keeps the refunds.
	counted, err := orders.MoveRefund(ctx, orderID, domain.MoveCount, domain.MinorUnits(sum, cur), now)
	if err != nil || !counted {
		return counted, err
	}
	// The order.paid event MarkPaid wrote tells the order as this
	// transaction leaves it, refunds counted (ADR 0053).
	return true, orders.Restamp(ctx, orderID)
}
