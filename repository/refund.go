package repository

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/payd/payd/domain"
)

// refundRow is a row of refunds. Money is in integer minor units.
type refundRow struct {
	ID               string         `gorm:"column:id"`
	OrderID          string         `gorm:"column:order_id"`
	ChargeID         string         `gorm:"column:charge_id"`
	RequestID        sql.NullString `gorm:"column:request_id"`
	RequestFP        sql.NullString `gorm:"column:request_fingerprint"`
	Kind             string         `gorm:"column:kind"`
	ProviderKey      string         `gorm:"column:provider_key"`
	ProviderRefundID sql.NullString `gorm:"column:provider_refund_id"`
	Currency         string         `gorm:"column:currency"`
	AmountMinor      int64          `gorm:"column:amount_minor"`
	Status           string         `gorm:"column:status"`
	Reason           string         `gorm:"column:reason"`
	CreatedAt        utcTime        `gorm:"column:created_at"`
	UpdatedAt        utcTime        `gorm:"column:updated_at"`
}

// TableName tells GORM the table.
func (refundRow) TableName() string { return "refunds" }

// refundFromDomain converts r, refusing an amount that is not a positive,
// exact number of minor units of r's currency.
func refundFromDomain(r domain.Refund) (refundRow, error) {
	amount, err := toMinor(r.Amount, r.Currency, "amount")
	if err != nil {
		return refundRow{}, err
	}
	if amount <= 0 {
		return refundRow{}, fmt.Errorf("refund amount %s is not positive", r.Amount)
	}
	return refundRow{
		ID: r.ID, OrderID: r.OrderID, ChargeID: r.ChargeID, RequestID: nullString(r.RequestID), RequestFP: nullString(r.RequestFingerprint), Kind: r.Kind,
		ProviderKey: r.ProviderKey, ProviderRefundID: nullString(r.ProviderRefundID), Currency: string(r.Currency),
		AmountMinor: amount, Status: string(r.Status), Reason: r.Reason,
		CreatedAt: ts(r.CreatedAt), UpdatedAt: ts(r.UpdatedAt),
	}, nil
}

func (r refundRow) toDomain() domain.Refund {
	c := domain.Currency(r.Currency)
	return domain.Refund{
		ID: r.ID, OrderID: r.OrderID, ChargeID: r.ChargeID, RequestID: r.RequestID.String, RequestFingerprint: r.RequestFP.String, Kind: r.Kind,
		ProviderKey: r.ProviderKey, ProviderRefundID: r.ProviderRefundID.String,
		Amount: domain.FromMinorUnits(r.AmountMinor, c), Currency: c, Status: domain.RefundStatus(r.Status),
		Reason: r.Reason, CreatedAt: r.CreatedAt.time(), UpdatedAt: r.UpdatedAt.time(),
	}
}

// The refund machine's guards, rendered from domain's table. Finish
// performs both settlements with one UPDATE: they leave from the same
// statuses (a domain test holds them to it).
var (
	refundFinish   = guardOf(domain.RefundMachine, domain.RefundEventSucceed)
	refundIdentify = guardOf(domain.RefundMachine, domain.RefundEventIdentify)
	refundReverse  = guardOf(domain.RefundMachine, domain.RefundEventReverse)
)

// The refund's guarded statements, each built once from the guards above
// (TestDerivedStatements has them written out in full).
var (
	// finishRefund is Finish's.
	finishRefund = `UPDATE refunds
		SET status = ?, provider_refund_id = COALESCE(?, provider_refund_id), updated_at = ?
		WHERE id = ? AND status IN ` + refundFinish.from

	// reverseRefund is Reverse's.
	reverseRefund = `UPDATE refunds
		SET status = ` + refundReverse.to + `, updated_at = ?
		WHERE id = ? AND status IN ` + refundReverse.from

	// recordRefundProviderID is RecordProviderID's.
	recordRefundProviderID = `UPDATE refunds
		SET provider_refund_id = ?
		WHERE id = ? AND status IN ` + refundIdentify.from + ` AND provider_refund_id IS NULL`
)

// RefundStore keeps refunds. The unique index on provider_key is what stops
// one charge being refunded automatically twice, and one manual refund
// request reaching the provider under two keys.
type RefundStore struct{ db *DB }

// NewRefundStore returns a RefundStore on db.
func NewRefundStore(db *DB) *RefundStore { return &RefundStore{db: db} }

// Create stores r in status pending, whatever r.Status says: a refund is
// recorded before the provider is asked, and only Finish settles it. An
// existing provider key is domain.ErrRefundExists, decided by the unique
// index, so of two racing creators exactly one proceeds.
func (s *RefundStore) Create(ctx context.Context, r domain.Refund) error {
	row, err := refundFromDomain(r)
	if err == nil {
		row.Status = string(domain.RefundPending)
		err = s.db.create(ctx, &row)
	}
	if err != nil {
		if violatesIndex(err, "refunds", "provider_key") {
			return domain.ErrRefundExists
		}
		return fmt.Errorf("create refund %s: %w", r.ID, err)
	}
	return nil
}

// FindByProviderKey returns the refund with provider idempotency key key,
// or domain.ErrRefundNotFound.
func (s *RefundStore) FindByProviderKey(ctx context.Context, key string) (domain.Refund, error) {
	var row refundRow
	if err := s.db.conn(ctx).Where("provider_key = ?", key).Take(&row).Error; err != nil {
		return domain.Refund{}, fmt.Errorf("find refund by provider key %s: %w", key, notFound(err, domain.ErrRefundNotFound))
	}
	return row.toDomain(), nil
}

// Finish moves a pending refund to succeeded or failed and reports whether
// it did: the provider's reply, its refund.succeeded webhook and the
// recoverer may all try, and the status guard lets exactly one settle it
// (and so exactly one release the reservation of a failed refund). A
// provider refund ID once learned is a fact: an empty one keeps it.
func (s *RefundStore) Finish(ctx context.Context, id string, to domain.RefundStatus, providerRefundID string, now time.Time) (bool, error) {
	if _, ok := domain.FinishEvent(to); !ok {
		return false, fmt.Errorf("finish refund %s: status %q is not final", id, to)
	}
	return s.db.guarded(ctx, act{"finish refund", id}, finishRefund,
		string(to), nullString(providerRefundID), ts(now), id)
}

// Reverse moves a succeeded refund to failed and reports whether it did:
// the provider took back a refund it had confirmed (Stripe's succeeded,
// then failed). The guard lets exactly one of the paths that learn it
// (the webhook, a reconciliation) reverse the refund's money.
func (s *RefundStore) Reverse(ctx context.Context, id string, now time.Time) (bool, error) {
	return s.db.guarded(ctx, act{"reverse refund", id}, reverseRefund, ts(now), id)
}

// RecordProviderID stores the provider's ID of a refund it answered
// pending, so the next ask is by that ID. Only a pending refund without
// one is changed; updated_at is left alone (it orders the retries).
func (s *RefundStore) RecordProviderID(ctx context.Context, id, providerRefundID string) (bool, error) {
	if providerRefundID == "" {
		return false, nil
	}
	return s.db.guarded(ctx, act{"record provider id of refund", id}, recordRefundProviderID, providerRefundID, id)
}

// ListByOrder returns an order's refunds, oldest first.
func (s *RefundStore) ListByOrder(ctx context.Context, orderID string) ([]domain.Refund, error) {
	var rows []refundRow
	err := s.db.conn(ctx).Where("order_id = ?", orderID).Order("created_at, id").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list refunds of order %s: %w", orderID, err)
	}
	return refundsToDomain(rows), nil
}

// ListPending returns refunds still pending whose last change is older than
// olderThan, oldest first, at most limit (100 when limit <= 0): the
// recoverer's work list of refunds whose outcome was lost.
func (s *RefundStore) ListPending(ctx context.Context, olderThan time.Time, limit int) ([]domain.Refund, error) {
	var rows []refundRow
	err := s.db.conn(ctx).Where("status = ? AND updated_at < ?", string(domain.RefundPending), ts(olderThan)).
		Order("updated_at, id").Limit(batchSize(limit)).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list pending refunds: %w", err)
	}
	return refundsToDomain(rows), nil
}

// ListSucceededBetween returns the refunds that succeeded and were created
// in [from, to), ordered by created_at then ID, after the refund after
// (none when empty), at most limit (100 when limit <= 0): the refunds a
// reconciliation run expects the provider to list. The pages walk
// refunds_succeeded (status, created_at, id); the cursor stays a plain
// refund ID, whose created_at is read first.
func (s *RefundStore) ListSucceededBetween(ctx context.Context, from, to time.Time, after string, limit int) ([]domain.Refund, error) {
	q := s.db.conn(ctx).Where("status = ? AND created_at >= ? AND created_at < ?", string(domain.RefundSucceeded), ts(from), ts(to))
	if after != "" {
		at, ok, err := s.db.cursorAt(ctx, &refundRow{}, "created_at", after)
		if err != nil {
			return nil, fmt.Errorf("list refunds succeeded between %v and %v: %w", from, to, err)
		}
		if !ok {
			return nil, fmt.Errorf("list refunds succeeded between %v and %v: the cursor %s is no refund", from, to, after)
		}
		q = keysetAfter(q, "created_at", at, after, false)
	}
	var rows []refundRow
	if err := q.Order("created_at, id").Limit(batchSize(limit)).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list refunds succeeded between %v and %v: %w", from, to, err)
	}
	return refundsToDomain(rows), nil
}

func refundsToDomain(rows []refundRow) []domain.Refund {
	out := make([]domain.Refund, len(rows))
	for i, r := range rows {
		out[i] = r.toDomain()
	}
	return out
}
