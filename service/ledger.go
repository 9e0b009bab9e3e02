package service

import (
	"time"

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
