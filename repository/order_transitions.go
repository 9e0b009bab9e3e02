package repository

import (
	"context"
	"fmt"
	"time"

	"github.com/payd/payd/domain"
)

// Each transition of the order state machine is one guarded UPDATE whose
// WHERE clause holds the statuses it starts from (and, where it matters,
// the request that claimed the order). The statuses on both sides come
// from domain's table (Event.From, Event.To), rendered into the
// statement's text once, when payd starts (guardOf), so the guards cannot
// drift from it and only a row's values are bound. Under concurrency the database decides: exactly one caller's
// UPDATE matches the row, every other caller's matches nothing and reports
// false, and then re-reads the order to learn why. version=version+1 makes
// every match a change.
//
// The transitions a merchant is told of (MarkPaid, Release, Cancel, the
// expiry) take the change's cause and write its event in the change's
// own transaction (outbox.go): a guard that matched nothing writes none.
// Claim and the refund reservations tell nothing: no money moved yet (a
// refund is told when the provider confirmed its money, with its ledger
// entry, Tell).

// Claim moves a pending order to processing for the pay request requestID.
// It happens before the provider is called, so no second request can ever
// start a charge for the same order. An order past its expires_at is not
// claimed, whether or not the expiry job has run: the guard is in the
// statement, so no read-then-write race can pay an order that just expired.
// Unless version is domain.AnyVersion, the order must still be at version,
// the one its caller read (or created: TakeCreated): a claim that matched
// then changed exactly the row its caller knows, which it may answer from
// without reading it again.
func (s *OrderStore) Claim(ctx context.Context, id, requestID string, version int64, now time.Time) (bool, error) {
	st := claimStatement(id, requestID, version, now)
	return s.db.guarded(ctx, act{"claim order", id}, st.query, st.args...)
}

// claimStatement is Claim's statement (PayBatch.Claim sends it too).
func claimStatement(id, requestID string, version int64, now time.Time) statement {
	if mutantClaim() { // test builds only (mutant_on.go)
		return statement{query: claimOrderUnguarded, args: []any{requestID, ts(now), id, ts(now)}}
	}
	if version == domain.AnyVersion {
		return statement{query: claimOrder, args: []any{requestID, ts(now), id, ts(now)}}
	}
	return statement{query: claimOrderAt, args: []any{requestID, ts(now), id, ts(now), version}}
}

// The order machine's guards, rendered from domain's table. The refund
// moves (order_refunds.go) perform the full and the partial refund with
// one UPDATE: they leave from the same statuses (a domain test holds them
// to it).
var (
	orderClaim         = guardOf(domain.OrderMachine, domain.EventClaim)
	orderPay           = guardOf(domain.OrderMachine, domain.EventSucceed)
	orderRelease       = guardOf(domain.OrderMachine, domain.EventRelease)
	orderCancel        = guardOf(domain.OrderMachine, domain.EventCancel)
	orderExpire        = guardOf(domain.OrderMachine, domain.EventExpire)
	orderRefundFull    = guardOf(domain.OrderMachine, domain.EventRefundFull)
	orderRefundPartial = guardOf(domain.OrderMachine, domain.EventRefundPartial)
	orderRefundReverse = guardOf(domain.OrderMachine, domain.EventRefundReversed)
)

// The order's guarded statements, each built once from the guards above
// (TestDerivedStatements has them written out in full).
var (
	// claimOrder is Claim's (and PayBatch.Claim's first).
	claimOrder = `UPDATE orders
		SET status = ` + orderClaim.to + `, pay_request_id = ?, version = version + 1, updated_at = ?
		WHERE id = ? AND status IN ` + orderClaim.from + ` AND expires_at > ?`

	// claimOrderAt is Claim's for an order still at the version its
	// caller read.
	claimOrderAt = claimOrder + ` AND version = ?`

	// markPaid is MarkPaid's (PayBatch.SucceedAndPay sends it as
	// markPaidIfBooked).
	markPaid = `UPDATE orders
		SET status = ` + orderPay.to + `, paid_at = ?, version = version + 1, updated_at = ?
		WHERE id = ? AND status IN ` + orderPay.from + ` AND pay_request_id = ?`

	// markPaidAt is markPaid for an order still at the version its caller
	// read (PayBatch.SucceedAndPay's, as markPaidAtIfBooked).
	markPaidAt = markPaid + ` AND version = ?`

	// releaseOrder is Release's.
	releaseOrder = `UPDATE orders
		SET status = ` + orderRelease.to + `, pay_request_id = NULL, version = version + 1, updated_at = ?
		WHERE id = ? AND status IN ` + orderRelease.from + ` AND pay_request_id = ?`

	// cancelOrder is Cancel's.
	cancelOrder = `UPDATE orders
		SET status = ` + orderCancel.to + `, version = version + 1, updated_at = ?
		WHERE id = ? AND status IN ` + orderCancel.from

	// expireOrder is expire's.
	expireOrder = `UPDATE orders
		SET status = ` + orderExpire.to + `, version = version + 1, updated_at = ?
		WHERE id = ? AND status IN ` + orderExpire.from + ` AND expires_at <= ?`
)

// MarkPaid moves a processing order to paid, only for the request that
// claimed it: a late success of another request never pays the order.
func (s *OrderStore) MarkPaid(ctx context.Context, id, requestID string, c domain.Cause, now time.Time) (bool, error) {
	return s.transition(ctx, act{"mark paid order", id}, domain.NotifyOrderPaid, c, now, markPaid, ts(now), ts(now), id, requestID)
}

// Release moves a processing order back to pending after a definitive
// decline, clearing pay_request_id so the customer may try again; only the
// request that claimed the order may release it.
func (s *OrderStore) Release(ctx context.Context, id, requestID string, c domain.Cause, now time.Time) (bool, error) {
	return s.transition(ctx, act{"release order", id}, domain.NotifyOrderPaymentFailed, c, now, releaseOrder, ts(now), id, requestID)
}

// Cancel moves a pending order to cancelled. A processing order cannot be
// cancelled: money may be moving.
// The stock the order took comes back in the same transaction.
func (s *OrderStore) Cancel(ctx context.Context, id string, c domain.Cause, now time.Time) (bool, error) {
	return s.closeUnpaid(ctx, id, func(ctx context.Context) (bool, error) {
		return s.transition(ctx, act{"cancel order", id}, domain.NotifyOrderCancelled, c, now, cancelOrder, ts(now), id)
	})
}

// expire moves one pending order that is due at now to expired, and
// gives back the stock it took in the same transaction.
func (s *OrderStore) expire(ctx context.Context, id string, c domain.Cause, now time.Time) (bool, error) {
	return s.closeUnpaid(ctx, id, func(ctx context.Context) (bool, error) {
		return s.transition(ctx, act{"expire order", id}, domain.NotifyOrderExpired, c, now, expireOrder, ts(now), id, ts(now))
	})
}

// ExpireDue moves pending orders whose expires_at is at or before now to
// expired, the oldest first and at most limit of them (100 when limit <= 0),
// and returns the IDs of those it changed, so the caller can tell each
// order's watchers. It reads the due IDs, then expires each by its primary
// key with the status guard kept: an order claimed in between is left
// alone, and replicas running it at once never expire an order twice (each
// ID is returned by exactly one of them). Row by row on purpose: one UPDATE
// over a range of the status index takes gap locks, and replicas doing that
// at once deadlock on InnoDB (the store tests showed it); a single-row
// UPDATE by primary key holds one row lock and cannot be part of a deadlock
// cycle. On an error it returns the IDs expired so far along with it: those
// changes are committed.
func (s *OrderStore) ExpireDue(ctx context.Context, c domain.Cause, now time.Time, limit int) ([]string, error) {
	var due []string
	err := s.db.conn(ctx).Model(&orderRow{}).
		Where("status IN ? AND expires_at <= ?", names(domain.EventExpire.From()), ts(now)).
		Order("expires_at, id").Limit(batchSize(limit)).Pluck("id", &due).Error
	if err != nil {
		return nil, fmt.Errorf("expire due orders: %w", err)
	}
	expired := make([]string, 0, len(due))
	for _, id := range due {
		ok, err := s.expire(ctx, id, c, now)
		if err != nil {
			return expired, err
		}
		if ok {
			expired = append(expired, id)
		}
	}
	return expired, nil
}

// batchSize bounds the rows one background statement touches, so a job
// never holds locks on a huge range.
func batchSize(limit int) int {
	const def, most = 100, 10_000
	switch {
	case limit <= 0:
		return def
	case limit > most:
		return most
	}
	return limit
}

// Lock takes order id's row for the caller's transaction and returns the
// order as it is now. It is no transition: it raises the order's version
// and nothing else, so that it is a write, the one thing every database
// payd runs on orders by. On InnoDB the row stays locked until the
// transaction ends and a transaction that changes the order waits for it
// (a plain read would see the old row and wait for nothing); on Galera,
// which certifies written rows and not read locks, a transaction on
// another node that changed the order meanwhile conflicts with this one
// and is undone (1213), so InTx runs it again. The order read after it is
// therefore the order as committed by everyone before this transaction, and
// no transaction that changes the order commits between the read and this
// transaction's end. Outside refunds use it to decide, against the order's
// settlement, which of the two counts a refund reported before the order
// was paid (ADR 0030). domain.ErrOrderNotFound when there is no such order.
func (s *OrderStore) Lock(ctx context.Context, id string) (domain.Order, error) {
	n, err := s.db.exec(ctx, lockOrder, id)
	if err != nil {
		return domain.Order{}, fmt.Errorf("lock order %s: %w", id, err)
	}
	if n != 1 {
		return domain.Order{}, domain.ErrOrderNotFound
	}
	return s.FindByID(ctx, id)
}

const lockOrder = `UPDATE orders SET version = version + 1 WHERE id = ?`
