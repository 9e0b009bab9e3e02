package repository

import (
	"context"
	"fmt"
	"time"

	"github.com/payd/payd/domain"
)

// An order's refund money is two columns: refunded_minor, what the
// provider confirmed given back, and refund_reserved_minor, what payd's
// refunds in flight reserved (domain.RefundBook, ADR 0055). Each move of
// domain's table is one guarded UPDATE: its WHERE clause is the move's
// guard (RefundBook.Allows) and its SET the move's arithmetic
// (RefundBook.Apply), with the statuses from domain (RefundMove.From and
// the order machine's refund events), so a move the table refuses matches
// no row. Every guard is a difference, never a sum, so no amount can
// overflow it.
//
// A move that changes confirmed money assigns status first on purpose:
// MySQL and MariaDB evaluate SET assignments left to right, each seeing
// the columns already assigned, while SQLite sees the old row throughout.
// With status first, its CASE reads the old refunded_minor on both.
// takenMinor is the money the order's charge took, which refunds are
// bounded by (domain.Order.Captured): what a manual order's capture took,
// else its amount (a manual order a charge paid whole has captured none:
// a provider that took it all, or a payd from before holds).
const takenMinor = `(CASE WHEN capture_method = 'manual' AND captured_minor > 0 THEN captured_minor ELSE amount_minor END)`

var refundMoves = map[domain.RefundMove]string{
	domain.MoveReserve: `UPDATE orders
		SET refund_reserved_minor = refund_reserved_minor + ?, version = version + 1, updated_at = ?
		WHERE id = ? AND status IN ` + sqlStatuses(domain.MoveReserve.From()...) + ` AND ` + takenMinor + ` - refunded_minor - refund_reserved_minor >= ?`,

	domain.MoveSettle: `UPDATE orders
		SET status = CASE WHEN ` + takenMinor + ` - refunded_minor = ? THEN ` + orderRefundFull.to + ` ELSE ` + orderRefundPartial.to + ` END,
			refunded_minor = refunded_minor + ?, refund_reserved_minor = refund_reserved_minor - ?, version = version + 1, updated_at = ?
		WHERE id = ? AND status IN ` + sqlStatuses(domain.MoveSettle.From()...) + ` AND refund_reserved_minor >= ? AND ` + takenMinor + ` - refunded_minor >= ?`,

	domain.MoveCount: `UPDATE orders
		SET status = CASE WHEN ` + takenMinor + ` - refunded_minor = ? THEN ` + orderRefundFull.to + ` ELSE ` + orderRefundPartial.to + ` END,
			refunded_minor = refunded_minor + ?, version = version + 1, updated_at = ?
		WHERE id = ? AND status IN ` + sqlStatuses(domain.MoveCount.From()...) + ` AND ` + takenMinor + ` - refunded_minor >= ?`,

	domain.MoveRelease: `UPDATE orders
		SET refund_reserved_minor = refund_reserved_minor - ?, version = version + 1, updated_at = ?
		WHERE id = ? AND status IN ` + sqlStatuses(domain.MoveRelease.From()...) + ` AND refund_reserved_minor >= ?`,

	domain.MoveReverse: `UPDATE orders
		SET status = ` + orderRefundReverse.to + `, refunded_minor = refunded_minor - ?, version = version + 1, updated_at = ?
		WHERE id = ? AND status IN ` + sqlStatuses(domain.MoveReverse.From()...) + ` AND refunded_minor >= ?`,
}

// refundMoveArgs are the arguments of move m's statement.
func refundMoveArgs(m domain.RefundMove, id string, minor int64, now time.Time) []any {
	switch m {
	case domain.MoveSettle:
		return []any{minor, minor, minor, ts(now), id, minor, minor}
	case domain.MoveCount:
		return []any{minor, minor, ts(now), id, minor}
	}
	return []any{minor, ts(now), id, minor}
}

// MoveRefund makes move m of minor units on order id's refund money and
// reports whether the move's guard let it: false, with nothing changed,
// for a move domain.RefundBook refuses (more than is left to reserve, a
// release of more than is reserved, an order not paid, ...) or an order
// that does not exist. Under concurrency the database decides, as for
// every transition: of two reservations that together exceed what is
// left, exactly one matches. It writes no event: money reserved or
// released is not money, and money confirmed is told by the caller with
// its ledger entry (Tell).
func (s *OrderStore) MoveRefund(ctx context.Context, id string, m domain.RefundMove, minor int64, now time.Time) (bool, error) {
	query, ok := refundMoves[m]
	if !ok {
		return false, fmt.Errorf("%s refund of order %s: unknown move", m, id)
	}
	if minor <= 0 {
		return false, fmt.Errorf("%s refund of order %s: amount %d minor units is not positive", m, id, minor)
	}
	return s.db.guarded(ctx, act{string(m) + " refund of order", id}, query, refundMoveArgs(m, id, minor, now)...)
}

// repairBooks is RepairBooks's statement: the order's confirmed refunds
// and the status they give, only if the order is still at the version its
// caller read and paid or refunded.
var repairBooks = `UPDATE orders
		SET status = ?, refunded_minor = ?, version = version + 1, updated_at = ?
		WHERE id = ? AND version = ? AND status IN ` + sqlStatuses(domain.MoveReverse.From()...)

// RepairBooks sets order id's confirmed refunds to refundedMinor, and its
// status to the one they give (domain.RefundBook.Status), if the order is
// still at version and paid or refunded: an operator's or reconciliation's
// repair of an order whose books disagree with its ledger (ADR 0055). It
// reports whether the order was at version; a repair that lost a race is
// asked again by its caller on the order as it now is.
func (s *OrderStore) RepairBooks(ctx context.Context, id string, version int64, book domain.RefundBook, now time.Time) (bool, error) {
	if book.Refunded < 0 || book.Refunded > book.Amount {
		return false, fmt.Errorf("repair books of order %s: refunded %d minor units is outside 0..%d", id, book.Refunded, book.Amount)
	}
	return s.db.guarded(ctx, act{"repair books of order", id}, repairBooks, string(book.Status()), book.Refunded, ts(now), id, version)
}
