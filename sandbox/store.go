package sandbox

import (
	"cmp"
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
	// DisputeAt is when a pm_dispute charge's dispute opens; cleared as it does.
	DisputeAt dbTime `gorm:"column:dispute_at"`
	// DisputeOpenMinor is the money its open dispute holds, DisputeLostMinor
	// what a lost one kept.
	DisputeOpenMinor int64 `gorm:"column:dispute_open_minor"`
	DisputeLostMinor int64 `gorm:"column:dispute_lost_minor"`
	// CaptureMethod is automatic or manual. A manual charge that succeeds
	// is authorized until CaptureBefore; its capture records
	// CapturedMinor (an automatic charge keeps 0: it took AmountMinor).
	CaptureMethod string `gorm:"column:capture_method"`
	CapturedMinor int64  `gorm:"column:captured_minor"`
	CaptureBefore dbTime `gorm:"column:capture_before"`
	CreatedAt     dbTime `gorm:"column:created_at"`
	UpdatedAt     dbTime `gorm:"column:updated_at"`
}

// manual reports whether the charge holds its money until a capture.
func (r chargeRow) manual() bool { return r.CaptureMethod == string(domain.CaptureManual) }

// capturedMinor is the money the charge took: all of it for an automatic
// charge that succeeded, what its capture took for a manual one.
func (r chargeRow) capturedMinor() int64 {
	if r.Status != string(domain.ChargeSucceeded) {
		return 0
	}
	return r.takenMinor()
}

// takenMinor is what the charge takes when it succeeds: its whole amount,
// or for a manual charge what its capture took. Refunds and disputes are
// bounded by it.
func (r chargeRow) takenMinor() int64 {
	if r.manual() {
		return r.CapturedMinor
	}
	return r.AmountMinor
}

// takenColumn is takenMinor in SQL.
const takenColumn = `CASE WHEN capture_method = 'manual' THEN captured_minor ELSE amount_minor END`

// disputedMinor is the money disputes withdrew and have not given back.
func (r chargeRow) disputedMinor() int64 { return r.DisputeOpenMinor + r.DisputeLostMinor }

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
	// OrderID is the refunded charge's order, read with it (refundsWhere).
	OrderID string `gorm:"column:order_id;->"`
}

// TableName tells GORM the row's table.
func (refundRow) TableName() string { return "sandbox_refunds" }

// disputeRow is a sandbox_disputes row.
type disputeRow struct {
	ID          string `gorm:"column:id;primaryKey"`
	ChargeID    string `gorm:"column:charge_id"`
	Currency    string `gorm:"column:currency"`
	AmountMinor int64  `gorm:"column:amount_minor"`
	Status      string `gorm:"column:status"`
	Reason      string `gorm:"column:reason"`
	CreatedAt   dbTime `gorm:"column:created_at"`
	ClosedAt    dbTime `gorm:"column:closed_at"`
	UpdatedAt   dbTime `gorm:"column:updated_at"`
	// ChargeKey and OrderID are the disputed charge's idempotency key and
	// order, read with it (disputesWhere).
	ChargeKey string `gorm:"column:charge_key;->"`
	OrderID   string `gorm:"column:order_id;->"`
}

// TableName tells GORM the row's table.
func (disputeRow) TableName() string { return "sandbox_disputes" }

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
	rows, err := refundsWhere(ctx, db, "r.idempotency_key = ?", key)
	if err != nil || len(rows) == 0 {
		return refundRow{}, cmp.Or(err, errNoRow)
	}
	return rows[0], nil
}

// refundsCreated lists the refunds created in [from, to), oldest first; a
// zero bound leaves that side open.
func refundsCreated(ctx context.Context, db *gorm.DB, from, to dbTime) ([]refundRow, error) {
	where, args := window("r.created_at", from, to)
	return refundsWhere(ctx, db, where, args...)
}

func refundsWhere(ctx context.Context, db *gorm.DB, where string, args ...any) ([]refundRow, error) {
	return refundsUpTo(ctx, db, 0, where, args...)
}

// refundsUpTo is refundsWhere with at most limit rows (0: all).
func refundsUpTo(ctx context.Context, db *gorm.DB, limit int, where string, args ...any) ([]refundRow, error) {
	var rows []refundRow
	q := db.WithContext(ctx).Table("sandbox_refunds r").Select("r.*, c.order_id").
		Joins("JOIN sandbox_charges c ON c.id = r.charge_id").
		Where(where, args...).Order("r.created_at, r.id")
	if limit > 0 {
		q = q.Limit(limit)
	}
	if err := q.Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("sandbox: load refunds: %w", err)
	}
	return rows, nil
}

// refundsPage lists up to limit refunds created in [from, to), oldest
// first, after the refund with ID after ("": from the start), and reports
// whether more follow: the refunds' chargesPage, with the same keyset along
// sandbox_refunds_created and the same 400 for a cursor that names none.
func refundsPage(ctx context.Context, db *gorm.DB, from, to dbTime, after string, limit int) ([]refundRow, bool, error) {
	where, args := window("r.created_at", from, to)
	if after != "" {
		cond, curArgs, err := continuing(ctx, db, "sandbox_refunds", "r.", after)
		if err != nil {
			return nil, false, err
		}
		where, args = where+" AND "+cond, append(args, curArgs...)
	}
	rows, err := refundsUpTo(ctx, db, limit+1, where, args...)
	if err != nil {
		return nil, false, err
	}
	rows, more := upTo(rows, limit)
	return rows, more, nil
}

// continuing is the condition of a page of table, ordered by (created_at,
// id), that continues after the row with ID after, its columns named with
// prefix ("" or a table's alias and a dot). The leading created_at >=
// gives both databases the start of the range on the created_at index:
// with the OR alone SQLite reads the walk from its beginning on every
// page. An after that names no row is refused (400), as Stripe refuses
// it: an empty last page would end a reconciliation's walk early without
// a word.
func continuing(ctx context.Context, db *gorm.DB, table, prefix, after string) (string, []any, error) {
	var at []dbTime
	if err := db.WithContext(ctx).Table(table).Where("id = ?", after).Limit(1).Pluck("created_at", &at).Error; err != nil {
		return "", nil, fmt.Errorf("sandbox: load the cursor of %s: %w", table, err)
	}
	if len(at) == 0 {
		return "", nil, badRequest("validation_failed", "starting_after names nothing in this list: %q", after)
	}
	c, id := prefix+"created_at", prefix+"id"
	return c + " >= ? AND (" + c + " > ? OR " + id + " > ?)", []any{at[0], at[0], after}, nil
}

// upTo is a page of at most limit of rows, read with one more than limit,
// and whether more follow it.
func upTo[T any](rows []T, limit int) ([]T, bool) {
	if len(rows) > limit {
		return rows[:limit], true
	}
	return rows, false
}

// disputeByID finds a dispute by its ID.
func disputeByID(ctx context.Context, db *gorm.DB, id string) (disputeRow, error) {
	rows, err := disputesWhere(ctx, db, "d.id = ?", id)
	if err != nil || len(rows) == 0 {
		return disputeRow{}, cmp.Or(err, errNoRow)
	}
	return rows[0], nil
}

// disputesCreated lists the disputes opened in [from, to), oldest first; a
// zero bound leaves that side open.
func disputesCreated(ctx context.Context, db *gorm.DB, from, to dbTime) ([]disputeRow, error) {
	where, args := window("d.created_at", from, to)
	return disputesWhere(ctx, db, where, args...)
}

func disputesWhere(ctx context.Context, db *gorm.DB, where string, args ...any) ([]disputeRow, error) {
	var rows []disputeRow
	err := db.WithContext(ctx).Table("sandbox_disputes d").
		Select("d.*, c.idempotency_key AS charge_key, c.order_id").
		Joins("JOIN sandbox_charges c ON c.id = d.charge_id").
		Where(where, args...).Order("d.created_at, d.id").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("sandbox: load disputes: %w", err)
	}
	return rows, nil
}

// window is the condition that column lies in [from, to); a zero bound
// leaves that side open.
func window(column string, from, to dbTime) (string, []any) {
	where, args := "1 = 1", []any{}
	if !from.IsZero() {
		where, args = where+" AND "+column+" >= ?", append(args, from)
	}
	if !to.IsZero() {
		where, args = where+" AND "+column+" < ?", append(args, to)
	}
	return where, args
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

// chargesPage lists up to limit charges created in [from, to), oldest
// first, after the charge with ID after ("": from the start), and
// reports whether more follow. It pages by (created_at, id) along
// sandbox_charges_created (continuing), so a page costs the same at any
// depth; an after that names no charge is refused.
func chargesPage(ctx context.Context, db *gorm.DB, from, to dbTime, after string, limit int) ([]chargeRow, bool, error) {
	q := db.WithContext(ctx).Order("created_at, id").Where("created_at >= ? AND created_at < ?", from, to)
	if after != "" {
		cond, args, err := continuing(ctx, db, "sandbox_charges", "", after)
		if err != nil {
			return nil, false, err
		}
		q = q.Where(cond, args...)
	}
	var rows []chargeRow
	if err := q.Limit(limit + 1).Find(&rows).Error; err != nil {
		return nil, false, fmt.Errorf("sandbox: list charges: %w", err)
	}
	rows, more := upTo(rows, limit)
	return rows, more, nil
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
		DisputedAmount: domain.FromMinorUnits(r.disputedMinor(), c),
		CreatedAt:      r.CreatedAt.Time,
	}
}

// toRefund converts a stored refund into payd's provider type.
func (r refundRow) toRefund() domain.ProviderRefund {
	return domain.ProviderRefund{
		ID: r.ID, IdempotencyKey: r.IdempotencyKey, ChargeID: r.ChargeID, OrderID: r.OrderID,
		Amount: domain.FromMinorUnits(r.AmountMinor, domain.Currency(r.Currency)), Currency: r.Currency,
		Status: domain.ChargeStatus(r.Status), CreatedAt: r.CreatedAt.Time,
	}
}

// toDispute converts a stored dispute into payd's provider type.
func (d disputeRow) toDispute() domain.ProviderDispute {
	return domain.ProviderDispute{
		ID: d.ID, ChargeID: d.ChargeID, IdempotencyKey: d.ChargeKey, OrderID: d.OrderID,
		Amount: domain.FromMinorUnits(d.AmountMinor, domain.Currency(d.Currency)), Currency: d.Currency,
		Status: domain.DisputeStatus(d.Status), Reason: d.Reason,
		CreatedAt: d.CreatedAt.Time, ClosedAt: d.ClosedAt.Time, EvidenceDueBy: d.evidenceDue(),
	}
}
