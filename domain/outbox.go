package domain

import (
	"time"

	"github.com/shopspring/decimal"
)

// OutboxEvent is an event as the outbox holds it, with the snapshot its
// transaction took (docs/adr/0053-telling-the-shop.md): the order's
// changing columns and its ledger's sums as the change left them, in the
// order's currency. The event's body is rendered from it.
type OutboxEvent struct {
	NotifyEvent
	Currency     Currency
	OrderStatus  OrderStatus
	PayRequestID string
	PaidAt       *time.Time
	Refunded     decimal.Decimal // the order's refunded amount
	UpdatedAt    time.Time       // the order's
	Books        Books           // the ledger's sums, as Summarize adds them
}
