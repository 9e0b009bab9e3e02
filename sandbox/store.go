package sandbox

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/payd/payd/domain"
)

// chargeRow is a sandbox_charges row.
type chargeRow struct {
	ID             string `gorm:"column:id;primaryKey"`
	IdempotencyKey string `gorm:"column:idempotency_key"`
	OrderID        string `gorm:"column:order_id"`
	PaymentMethod  string `gorm:"column:payment_method"`
	Currency       string `gorm:"column:currency"`
	AmountMinor    int64  `gorm:"column:amount_minor"`
	RefundedMinor  int64  `gorm:"column:refunded_minor"`
	Status         string `gorm:"column:status"`
	FailureCode    string `gorm:"column:failure_code"`
	SettleAt       dbTime `gorm:"column:settle_at"`
	CreatedAt      dbTime `gorm:"column:created_at"`
	UpdatedAt      dbTime `gorm:"column:updated_at"`
}

// TableName tells GORM the row's table.
func (chargeRow) TableName() string { return "sandbox_charges" }

// refundRow is a sandbox_refunds row.
type refundRow struct {
	ID             string `gorm:"column:id;primaryKey"`
	IdempotencyKey string `gorm:"column:idempotency_key"`
	ChargeID       string `gorm:"column:charge_id"`
	Currency       string `gorm:"column:currency"`
	AmountMinor    int64  `gorm:"column:amount_minor"`
	Reason         string `gorm:"column:reason"`
	Status         string `gorm:"column:status"`
	CreatedAt      dbTime `gorm:"column:created_at"`
}

// TableName tells GORM the row's table.
func (refundRow) TableName() string { return "sandbox_refunds" }

// deliveryRow is a sandbox_webhook_deliveries row: one copy of one event
// and the state of getting it to the receiver.
type deliveryRow struct {
	ID            string `gorm:"column:id;primaryKey"`
	EventID       string `gorm:"column:event_id"`
	CopyNo        int    `gorm:"column:copy_no"`
	EventType     string `gorm:"column:event_type"`
	Payload       string `gorm:"column:payload"`
	Attempts      int    `gorm:"column:attempts"`
	NextAttemptAt dbTime `gorm:"column:next_attempt_at"`
	ClaimedUntil  dbTime `gorm:"column:claimed_until"`
	DeliveredAt   dbTime `gorm:"column:delivered_at"`
	LastStatus    int    `gorm:"column:last_status"`
	LastError     string `gorm:"column:last_error"`
	CreatedAt     dbTime `gorm:"column:created_at"`
}

// TableName tells GORM the row's table.
func (deliveryRow) TableName() string { return "sandbox_webhook_deliveries" }

// errNoRow is a lookup that found nothing; callers turn it into a 404.
var errNoRow = errors.New("sandbox: no such row")

// chargeByKey finds the charge created under an idempotency key.
func chargeByKey(ctx context.Context, db *gorm.DB, key string) (chargeRow, error) {
	return first[chargeRow](ctx, db, "idempotency_key = ?", key)
}

// chargeByID finds a charge by its ID.
func chargeByID(ctx context.Context, db *gorm.DB, id string) (chargeRow, error) {
	return first[chargeRow](ctx, db, "id = ?", id)
}

// refundByKey finds the refund created under an idempotency key.
func refundByKey(ctx context.Context, db *gorm.DB, key string) (refundRow, error) {
	return first[refundRow](ctx, db, "idempotency_key = ?", key)
}

// first loads one row matching where, or errNoRow.
func first[T any](ctx context.Context, db *gorm.DB, where string, args ...any) (T, error) {
	var rows []T
	if err := db.WithContext(ctx).Where(where, args...).Limit(1).Find(&rows).Error; err != nil {
		var zero T
		return zero, fmt.Errorf("sandbox: load: %w", err)
	}
	if len(rows) == 0 {
		var zero T
		return zero, errNoRow
	}
	return rows[0], nil
}

// chargesCreated lists charges created in [from, to), oldest first. A zero
// bound leaves that side open.
func chargesCreated(ctx context.Context, db *gorm.DB, from, to dbTime) ([]chargeRow, error) {
	q := db.WithContext(ctx).Order("created_at, id")
	if !from.IsZero() {
		q = q.Where("created_at >= ?", from)
	}
	if !to.IsZero() {
		q = q.Where("created_at < ?", to)
	}
	var rows []chargeRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("sandbox: list charges: %w", err)
	}
	return rows, nil
}

// toCharge converts a stored charge into payd's provider type.
func (r chargeRow) toCharge() domain.Charge {
	c := domain.Currency(r.Currency)
	return domain.Charge{
		ID:             r.ID,
		IdempotencyKey: r.IdempotencyKey,
		OrderID:        r.OrderID,
		Amount:         domain.FromMinorUnits(r.AmountMinor, c),
		Currency:       r.Currency,
		PaymentMethod:  r.PaymentMethod,
		Status:         domain.ChargeStatus(r.Status),
		FailureCode:    r.FailureCode,
		RefundedAmount: domain.FromMinorUnits(r.RefundedMinor, c),
		CreatedAt:      r.CreatedAt.Time,
	}
}
