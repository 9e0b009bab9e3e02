package repository

import (
	"cmp"
	"context"
	"database/sql"
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
	CaptureMethod    string         `gorm:"column:capture_method"`
}

// TableName tells GORM the table.
func (attemptRow) TableName() string { return "payment_attempts" }

// insertAttempt is Create's statement, written out: it runs on every pay,
// and GORM's Create would reflect on the row each time. PayBatch.Claim
// sends it as insertAttemptIfClaimed.
const insertAttempt = `INSERT INTO payment_attempts (id, order_id, request_id, status, payment_method,
	provider_charge_id, failure_code, currency, amount_minor, created_at, updated_at, leased_until, in_flight_until, capture_method)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// args are insertAttempt's arguments.
func (r attemptRow) args() []any {
	return []any{r.ID, r.OrderID, r.RequestID, r.Status, r.PaymentMethod, r.ProviderChargeID, r.FailureCode,
		r.Currency, r.AmountMinor, r.CreatedAt, r.UpdatedAt, r.LeasedUntil, r.InFlightUntil, r.CaptureMethod}
}

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
		CaptureMethod: string(cmp.Or(a.CaptureMethod, domain.CaptureAutomatic)),
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
		CaptureMethod: domain.CaptureMethod(cmp.Or(r.CaptureMethod, string(domain.CaptureAutomatic))),
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
		_, err = s.db.exec(ctx, insertAttempt, row.args()...)
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

// FindByIDs returns the attempts ids that exist, by ID: one query.
func (s *AttemptStore) FindByIDs(ctx context.Context, ids []string) (map[string]domain.Attempt, error) {
	out := make(map[string]domain.Attempt, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var rows []attemptRow
	if err := s.db.conn(ctx).Where("id IN ?", ids).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("find %d attempts: %w", len(ids), err)
	}
	for _, r := range rows {
		out[r.ID] = r.toDomain()
	}
	return out, nil
}

// ListByOrders returns the attempts of the orders ids, oldest first, by
// order ID: one query, by payment_attempts_order.
func (s *AttemptStore) ListByOrders(ctx context.Context, ids []string) (map[string][]domain.Attempt, error) {
	out, err := groupedIn(ctx, s.db, "order_id", ids, "order_id, created_at, id",
		func(r attemptRow) string { return r.OrderID }, attemptRow.toDomain)
	if err != nil {
		return nil, fmt.Errorf("attempts of %d orders: %w", len(ids), err)
	}
	return out, nil
}

// LastOfOrders returns the newest attempt of each of the orders ids that
// has one, by order ID: one query, by payment_attempts_order.
func (s *AttemptStore) LastOfOrders(ctx context.Context, ids []string) (map[string]domain.Attempt, error) {
	all, err := s.ListByOrders(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]domain.Attempt, len(all))
	for id, as := range all {
		out[id] = as[len(as)-1] // oldest first: the last one
	}
	return out, nil
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

// Each settlement of an attempt is one guarded UPDATE whose statuses, on
// both sides, come from domain's attempt table (AttemptEvent.From, .To):
// the status guard makes the reply, the webhook, the recoverer and an
// operator race safely, only one of them settles the attempt, and each
// reports whether it did. A charge ID once learned is a fact, so an empty
// chargeID keeps the stored one; the failure code describes the outcome
// now recorded and is always overwritten (cleared by a success).

// MarkUnknown moves a started attempt to unknown: the provider's reply was
// lost, and the provider must be asked before anything else is done.
func (s *AttemptStore) MarkUnknown(ctx context.Context, id, chargeID string, now time.Time) (bool, error) {
	return s.settle(ctx, act{"mark unknown attempt", id}, markUnknownAttempt, chargeID, "", now)
}

// RecordChargeID stores the provider's charge ID of an attempt still
// started or unknown that has none yet: the ID learned after the reply was
// lost (a replayed create, a webhook), so the next ask retrieves by ID.
// An ID once stored is never replaced, and a settled attempt is not
// touched. updated_at is left alone: it orders the recoverer's work.
func (s *AttemptStore) RecordChargeID(ctx context.Context, id, chargeID string) (bool, error) {
	if chargeID == "" {
		return false, nil
	}
	return s.db.guarded(ctx, act{"record charge id of attempt", id}, recordChargeID, chargeID, id)
}

// recordChargeID is RecordChargeID's.
var recordChargeID = `UPDATE payment_attempts
		SET provider_charge_id = ?
		WHERE id = ? AND provider_charge_id IS NULL AND status IN ` + unsettledIn

// Succeed moves a started or unknown attempt to succeeded: the provider
// charged the attempt's money.
func (s *AttemptStore) Succeed(ctx context.Context, id, chargeID string, now time.Time) (bool, error) {
	return s.settle(ctx, act{"succeed attempt", id}, succeedAttempt, chargeID, "", now)
}

// Fail moves a started or unknown attempt to failed with failureCode: the
// provider definitively charged nothing.
func (s *AttemptStore) Fail(ctx context.Context, id, chargeID, failureCode string, now time.Time) (bool, error) {
	return s.settle(ctx, act{"fail attempt", id}, failAttempt, chargeID, failureCode, now)
}

// Hold moves a started or unknown attempt to held, failure code
// amount_mismatch: the provider charged another amount or currency than
// the attempt's, and an operator decides (ADR 0010).
func (s *AttemptStore) Hold(ctx context.Context, id, chargeID string, now time.Time) (bool, error) {
	return s.settle(ctx, act{"hold attempt", id}, holdAttempt, chargeID, string(domain.AmountMismatch), now)
}

// Adopt moves a failed or held attempt to succeeded: the provider's word,
// checked with it first, that it charged after all (a false decline, or a
// held charge applied). from is the status the caller read: the attempt
// moves only if it still stands there, so an attempt an operator moved
// from held to failed meanwhile (its charge refunded) is not adopted.
func (s *AttemptStore) Adopt(ctx context.Context, id string, from domain.AttemptStatus, chargeID string, now time.Time) (bool, error) {
	query, ok := adoptAttempt[from]
	if !ok {
		return false, nil // a status the event does not leave from matches nothing
	}
	return s.settle(ctx, act{"adopt attempt", id}, query, chargeID, "", now)
}

// Apply moves a started, unknown or failed attempt to succeeded: an
// operator applies a charge the provider stands by that payd never saw
// succeed (a missing local payment). A held attempt is Adopt's.
func (s *AttemptStore) Apply(ctx context.Context, id, chargeID string, now time.Time) (bool, error) {
	return s.settle(ctx, act{"apply attempt", id}, applyAttempt, chargeID, "", now)
}

// Reject moves a held attempt to failed, failure code amount_mismatch: an
// operator refunded the charge held for other money.
func (s *AttemptStore) Reject(ctx context.Context, id string, now time.Time) (bool, error) {
	return s.settle(ctx, act{"reject attempt", id}, rejectAttempt, "", string(domain.AmountMismatch), now)
}

// settle sends query, one of the settlements below, for attempt what.row.
func (s *AttemptStore) settle(ctx context.Context, what act, query, chargeID, failureCode string, now time.Time) (bool, error) {
	return s.db.guarded(ctx, what, query, nullString(chargeID), nullString(failureCode), ts(now), what.row)
}

// settleAttempt is the statement of every settlement, with g's statuses.
func settleAttempt(g statusGuard) string {
	return `UPDATE payment_attempts
		SET status = ` + g.to + `, provider_charge_id = COALESCE(?, provider_charge_id), failure_code = ?, updated_at = ?
		WHERE id = ? AND status IN ` + g.from
}

// The settlements of an attempt, each built once from domain's table
// (TestDerivedStatements has them written out in full).
var (
	markUnknownAttempt = settleAttempt(guardOf(domain.AttemptMachine, domain.AttemptReplyLost))
	// succeedAttempt is Succeed's (and PayBatch.SucceedAndPay's first).
	succeedAttempt = settleAttempt(guardOf(domain.AttemptMachine, domain.AttemptCharged))
	failAttempt    = settleAttempt(guardOf(domain.AttemptMachine, domain.AttemptNotCharged))
	holdAttempt    = settleAttempt(guardOf(domain.AttemptMachine, domain.AttemptMismatched))
	applyAttempt   = settleAttempt(guardOf(domain.AttemptMachine, domain.AttemptApplied))
	rejectAttempt  = settleAttempt(guardOf(domain.AttemptMachine, domain.AttemptRejected))
	// adoptAttempt is Adopt's, from each status the event leaves from.
	adoptAttempt = settleFromEach(domain.AttemptChargedLate)
)

// settleFromEach renders ev's settlement once for each status it leaves
// from, moving the attempt only from that one.
func settleFromEach(ev domain.AttemptEvent) map[domain.AttemptStatus]string {
	out := make(map[domain.AttemptStatus]string)
	for _, from := range ev.From() {
		out[from] = settleAttempt(statusGuard{from: sqlStatuses(from), to: sqlStatus(ev.To())})
	}
	return out
}

// unsettled are the statuses of an attempt whose outcome the provider may
// still settle: the recoverer's work, and what a lease may be taken on.
// unsettledIn is the same as a guard's "status IN" list.
var (
	unsettled   = names(domain.UnsettledStatuses())
	unsettledIn = sqlStatuses(domain.UnsettledStatuses()...)
)

// ListUnsettled returns attempts in status started or unknown last updated
// before olderThan, oldest first, at most limit (100 when limit <= 0): the
// recoverer's work list.
func (s *AttemptStore) ListUnsettled(ctx context.Context, olderThan time.Time, limit int) ([]domain.Attempt, error) {
	var rows []attemptRow
	err := s.db.conn(ctx).
		Where("status IN ? AND updated_at < ?", unsettled, ts(olderThan)).
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
	return s.db.guarded(ctx, act{"lease attempt", id}, leaseAttempt, ts(until), id, ts(now))
}

// leaseAttempt is Lease's.
var leaseAttempt = `UPDATE payment_attempts SET leased_until = ?
		WHERE id = ? AND status IN ` + unsettledIn + ` AND (leased_until IS NULL OR leased_until < ?)`

// Resend records that the worker holding the lease that ends at held is
// about to send a charge request under the attempt's key again, which may
// reach the provider until until: the attempt is in flight, and leased to
// the worker, until then. It reports false, and nothing may be sent, when
// the attempt is settled or the lease is no longer the caller's.
func (s *AttemptStore) Resend(ctx context.Context, id string, held, until time.Time) (bool, error) {
	return s.db.guarded(ctx, act{"resend attempt", id}, resendAttempt, ts(until), ts(until), id, ts(held))
}

// resendAttempt is Resend's.
var resendAttempt = `UPDATE payment_attempts SET in_flight_until = ?, leased_until = ?
		WHERE id = ? AND status IN ` + unsettledIn + ` AND leased_until = ?`

// Unlease ends the lease that ends at held, when its worker is done with the
// attempt before then (the request answered 202), so a retry after a
// restart may ask the provider at once. The lease's end is its token: a
// lease someone else took since is left alone.
func (s *AttemptStore) Unlease(ctx context.Context, id string, held time.Time) (bool, error) {
	return s.db.guarded(ctx, act{"unlease attempt", id}, unleaseAttempt, id, ts(held))
}

const unleaseAttempt = `UPDATE payment_attempts SET leased_until = NULL WHERE id = ? AND leased_until = ?`

func attemptsToDomain(rows []attemptRow) []domain.Attempt {
	out := make([]domain.Attempt, len(rows))
	for i, r := range rows {
		out[i] = r.toDomain()
	}
	return out
}
