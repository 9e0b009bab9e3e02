package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/payd/payd/domain"
)

// attemptRow is a row of payment_attempts.
type attemptRow struct {
	ID               string         `gorm:"column:id"`
	OrderID          string         `gorm:"column:order_id"`
	RequestID        string         `gorm:"column:request_id"`
	Status           string         `gorm:"column:status"`
	PaymentMethod    string         `gorm:"column:payment_method"`
	ProviderChargeID sql.NullString `gorm:"column:provider_charge_id"`
	FailureCode      sql.NullString `gorm:"column:failure_code"`
	Currency         string         `gorm:"column:currency"`
	AmountMinor      int64          `gorm:"column:amount_minor"`
	CreatedAt        utcTime        `gorm:"column:created_at"`
	UpdatedAt        utcTime        `gorm:"column:updated_at"`
	LeasedUntil      *utcTime       `gorm:"column:leased_until"`
	InFlightUntil    *utcTime       `gorm:"column:in_flight_until"`
}

// TableName tells GORM the table.
func (attemptRow) TableName() string { return "payment_attempts" }

func attemptFromDomain(a domain.Attempt) (attemptRow, error) {
	amount, err := toMinor(a.Amount, a.Currency, "amount")
	if err != nil {
		return attemptRow{}, err
	}
	return attemptRow{
		ID: a.ID, OrderID: a.OrderID, RequestID: a.RequestID, Status: string(a.Status),
		PaymentMethod: a.PaymentMethod, ProviderChargeID: nullString(a.ProviderChargeID),
		FailureCode: nullString(a.FailureCode), Currency: string(a.Currency), AmountMinor: amount,
		CreatedAt: ts(a.CreatedAt), UpdatedAt: ts(a.UpdatedAt),
		LeasedUntil: tsPtr(nonZero(a.LeasedUntil)), InFlightUntil: tsPtr(nonZero(a.InFlightUntil)),
	}, nil
}

func (r attemptRow) toDomain() domain.Attempt {
	c := domain.Currency(r.Currency)
	return domain.Attempt{
		ID: r.ID, OrderID: r.OrderID, RequestID: r.RequestID, Status: domain.AttemptStatus(r.Status),
		PaymentMethod: r.PaymentMethod, ProviderChargeID: r.ProviderChargeID.String,
		FailureCode: r.FailureCode.String, Amount: domain.FromMinorUnits(r.AmountMinor, c), Currency: c,
		CreatedAt: r.CreatedAt.time(), UpdatedAt: r.UpdatedAt.time(),
		LeasedUntil: zeroIfNil(r.LeasedUntil), InFlightUntil: zeroIfNil(r.InFlightUntil),
	}
}

// nonZero is t, or nil (SQL NULL) for the zero time.
func nonZero(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// zeroIfNil is the inverse of nonZero.
func zeroIfNil(t *utcTime) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.time()
}

// AttemptStore keeps payment attempts.
type AttemptStore struct{ db *DB }

// NewAttemptStore returns an AttemptStore on db.
func NewAttemptStore(db *DB) *AttemptStore { return &AttemptStore{db: db} }

// Create stores a new attempt.
func (s *AttemptStore) Create(ctx context.Context, a domain.Attempt) error {
	row, err := attemptFromDomain(a)
	if err == nil {
		err = s.db.conn(ctx).Create(&row).Error
	}
	if err != nil {
		return fmt.Errorf("create attempt %s: %w", a.ID, err)
	}
	return nil
}

// FindByID returns one attempt, or domain.ErrAttemptNotFound.
func (s *AttemptStore) FindByID(ctx context.Context, id string) (domain.Attempt, error) {
	var row attemptRow
	if err := s.db.conn(ctx).Where("id = ?", id).Take(&row).Error; err != nil {
		return domain.Attempt{}, fmt.Errorf("find attempt %s: %w", id, notFound(err, domain.ErrAttemptNotFound))
	}
	return row.toDomain(), nil
}

// ListByOrder returns an order's attempts, oldest first.
func (s *AttemptStore) ListByOrder(ctx context.Context, orderID string) ([]domain.Attempt, error) {
	var rows []attemptRow
	err := s.db.conn(ctx).Where("order_id = ?", orderID).Order("created_at, id").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list attempts of order %s: %w", orderID, err)
	}
	return attemptsToDomain(rows), nil
}

// Latest returns the newest attempt an order has for requestID, or
// domain.ErrAttemptNotFound.
func (s *AttemptStore) Latest(ctx context.Context, orderID, requestID string) (domain.Attempt, error) {
	var row attemptRow
	err := s.db.conn(ctx).Where("order_id = ? AND request_id = ?", orderID, requestID).
		Order("created_at DESC, id DESC").Take(&row).Error
	if err != nil {
		return domain.Attempt{}, fmt.Errorf("latest attempt of order %s: %w", orderID, notFound(err, domain.ErrAttemptNotFound))
	}
	return row.toDomain(), nil
}

// Finish moves attempt id from one of the statuses in from to to, and
// reports whether it did: the status guard makes the reply, the webhook and
// the recoverer race safely, only one of them settles the attempt. A charge
// ID once learned is a fact, so an empty chargeID keeps the stored one; the
// failure code describes the final outcome and is always overwritten.
func (s *AttemptStore) Finish(ctx context.Context, id string, from []domain.AttemptStatus, to domain.AttemptStatus,
	chargeID, failureCode string, now time.Time) (bool, error) {
	if len(from) == 0 {
		return false, errors.New("finish attempt " + id + ": no status to move from")
	}
	froms := make([]string, len(from))
	for i, f := range from {
		froms[i] = string(f)
	}
	res := s.db.conn(ctx).Exec(`UPDATE payment_attempts
		SET status = ?, provider_charge_id = COALESCE(?, provider_charge_id), failure_code = ?, updated_at = ?
		WHERE id = ? AND status IN ?`,
		string(to), nullString(chargeID), nullString(failureCode), ts(now), id, froms)
	if res.Error != nil {
		return false, fmt.Errorf("finish attempt %s: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// ListUnsettled returns attempts in status started or unknown last updated
// before olderThan, oldest first, at most limit (100 when limit <= 0): the
// recoverer's work list.
func (s *AttemptStore) ListUnsettled(ctx context.Context, olderThan time.Time, limit int) ([]domain.Attempt, error) {
	var rows []attemptRow
	err := s.db.conn(ctx).
		Where("status IN ? AND updated_at < ?", []string{string(domain.AttemptStarted), string(domain.AttemptUnknown)}, ts(olderThan)).
		Order("updated_at, id").Limit(batchSize(limit)).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list unsettled attempts: %w", err)
	}
	return attemptsToDomain(rows), nil
}

// Lease claims an unsettled attempt until until for one worker — the
// recoverer of one replica, or a request retrying its key — and reports
// whether this caller won. The guard is the lease itself: whoever holds an
// unexpired lease keeps it, so a request and a recoverer (or two replicas)
// never ask the provider and settle the same attempt at once. A worker
// that dies just lets its lease run out.
func (s *AttemptStore) Lease(ctx context.Context, id string, now, until time.Time) (bool, error) {
	res := s.db.conn(ctx).Exec(`UPDATE payment_attempts SET leased_until = ?
		WHERE id = ? AND status IN ? AND (leased_until IS NULL OR leased_until < ?)`,
		ts(until), id, []string{string(domain.AttemptStarted), string(domain.AttemptUnknown)}, ts(now))
	if res.Error != nil {
		return false, fmt.Errorf("lease attempt %s: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// Resend records that the worker holding the lease that ends at held is
// about to send a charge request under the attempt's key again, which may
// reach the provider until until: the attempt is in flight, and leased to
// the worker, until then. It reports false, and nothing may be sent, when
// the attempt is settled or the lease is no longer the caller's.
func (s *AttemptStore) Resend(ctx context.Context, id string, held, until time.Time) (bool, error) {
	res := s.db.conn(ctx).Exec(`UPDATE payment_attempts SET in_flight_until = ?, leased_until = ?
		WHERE id = ? AND status IN ? AND leased_until = ?`,
		ts(until), ts(until), id, []string{string(domain.AttemptStarted), string(domain.AttemptUnknown)}, ts(held))
	if res.Error != nil {
		return false, fmt.Errorf("resend attempt %s: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// Unlease ends the lease that ends at held, when its worker is done with the
// attempt before then (the request answered 202), so a retry after a
// restart may ask the provider at once. The lease's end is its token: a
// lease someone else took since is left alone.
func (s *AttemptStore) Unlease(ctx context.Context, id string, held time.Time) (bool, error) {
	res := s.db.conn(ctx).Exec(`UPDATE payment_attempts SET leased_until = NULL WHERE id = ? AND leased_until = ?`, id, ts(held))
	if res.Error != nil {
		return false, fmt.Errorf("unlease attempt %s: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

func attemptsToDomain(rows []attemptRow) []domain.Attempt {
	out := make([]domain.Attempt, len(rows))
	for i, r := range rows {
		out[i] = r.toDomain()
	}
	return out
}
