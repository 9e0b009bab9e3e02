package domain

import (
	"errors"
	"fmt"
	"slices"
)

// RefundBook is a paid order's refund money, in minor units: what the
// provider has confirmed given back (Refunded) apart from what payd's own
// refunds still in flight have reserved (Reserved). Only confirmed money
// is money: the order's status follows Refunded alone, an event tells
// Refunded alone, and a reservation released takes nothing confirmed with
// it. A new refund is limited by both, so refunds in flight can never add
// up to more than was paid; money the provider confirmed is counted
// whatever is reserved, because it moved (ADR 0055).
//
// The repository performs each move as one guarded UPDATE whose WHERE
// clause is Allows written in SQL and whose SET is Apply's arithmetic
// (repository/order_refunds.go); TestRefundBookStatements there holds the
// statements to this table.
type RefundBook struct {
	Amount   int64 // what the order's payment charged
	Refunded int64 // what the provider confirmed given back
	Reserved int64 // what payd's refunds in flight reserved
}

// RefundMove is one change of a refund book.
type RefundMove string

// The moves of a refund book.
const (
	// MoveReserve reserves a refund payd is about to ask for: only of a
	// paid order, and only what neither a confirmed refund nor another
	// reservation holds.
	MoveReserve RefundMove = "reserve"
	// MoveSettle turns a reservation the provider confirmed into money
	// given back.
	MoveSettle RefundMove = "settle"
	// MoveCount counts money the provider gave back without a reservation
	// (a refund made outside payd): whatever is reserved, it moved.
	MoveCount RefundMove = "count"
	// MoveRelease gives back a reservation the provider refused.
	MoveRelease RefundMove = "release"
	// MoveReverse takes back money the provider had confirmed given back
	// and then reversed (a refund that succeeded and then failed).
	MoveReverse RefundMove = "reverse"
)

// RefundMoves lists every move, for table tests.
var RefundMoves = []RefundMove{MoveReserve, MoveSettle, MoveCount, MoveRelease, MoveReverse}

// From lists the statuses of an order move m may be made in: money is
// reserved, settled and counted only on a paid order (a refunded one has
// nothing left), while a reservation is released and confirmed money
// reversed on a paid or a refunded one. Each list is the order machine's:
// a settle or a count leaves as EventRefundFull and EventRefundPartial
// do, a reverse as EventRefundReversed (TestRefundMoveStatuses).
func (m RefundMove) From() []OrderStatus {
	switch m {
	case MoveReserve, MoveSettle, MoveCount:
		return []OrderStatus{StatusPaid}
	case MoveRelease, MoveReverse:
		return []OrderStatus{StatusPaid, StatusRefunded}
	}
	return nil
}

// ErrRefundBookRefused is what Apply returns for a move its guard refuses.
var ErrRefundBookRefused = errors.New("refund book: move refused")

// Refundable is what a new refund may still reserve.
func (b RefundBook) Refundable() int64 { return max(b.Amount-b.Refunded-b.Reserved, 0) }

// Status is the status a paid order's confirmed money gives it: refunded
// once all of it was given back, paid before.
func (b RefundBook) Status() OrderStatus {
	if b.Refunded >= b.Amount {
		return StatusRefunded
	}
	return StatusPaid
}

// Allows reports whether move m of minor units may be made on the book of
// an order in status s. Every guard is written as a difference, never a
// sum, so no amount can overflow it.
func (b RefundBook) Allows(s OrderStatus, m RefundMove, minor int64) bool {
	if minor <= 0 || !slices.Contains(m.From(), s) {
		return false
	}
	switch m {
	case MoveReserve:
		return b.Amount-b.Refunded-b.Reserved >= minor
	case MoveSettle:
		return b.Reserved >= minor && b.Amount-b.Refunded >= minor
	case MoveCount:
		return b.Amount-b.Refunded >= minor
	case MoveRelease:
		return b.Reserved >= minor
	case MoveReverse:
		return b.Refunded >= minor
	}
	return false
}

// Apply makes move m of minor units on the book of an order in status s,
// and returns the book and the status after it; ErrRefundBookRefused when
// Allows refuses it. Only the moves of confirmed money (settle, count,
// reverse) may change the status, and only by the order machine's refund
// events (StatusEvent).
func (b RefundBook) Apply(s OrderStatus, m RefundMove, minor int64) (RefundBook, OrderStatus, error) {
	if !b.Allows(s, m, minor) {
		return b, s, fmt.Errorf("%w: %s of %d on %s %+v", ErrRefundBookRefused, m, minor, s, b)
	}
	switch m {
	case MoveReserve:
		b.Reserved += minor
	case MoveSettle:
		b.Reserved -= minor
		b.Refunded += minor
	case MoveCount:
		b.Refunded += minor
	case MoveRelease:
		b.Reserved -= minor
	case MoveReverse:
		b.Refunded -= minor
	}
	if m == MoveReserve || m == MoveRelease {
		return b, s, nil
	}
	return b, b.Status(), nil
}

// StatusEvent is the order machine's event for move m of minor units from
// book b (before the move): a settle or a count that reaches the whole
// payment is EventRefundFull, any other one EventRefundPartial, a reverse
// EventRefundReversed; reservations and releases move no status and have
// none (false).
func (b RefundBook) StatusEvent(m RefundMove, minor int64) (Event, bool) {
	switch m {
	case MoveSettle, MoveCount:
		if b.Amount-b.Refunded == minor {
			return EventRefundFull, true
		}
		return EventRefundPartial, true
	case MoveReverse:
		return EventRefundReversed, true
	}
	return "", false
}
