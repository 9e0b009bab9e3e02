package repository

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/payd/payd/domain"
)

// disputeRow is a row of disputes. Money is in integer minor units.
type disputeRow struct {
	ID                string   `gorm:"column:id"`
	ProviderDisputeID string   `gorm:"column:provider_dispute_id"`
	OrderID           string   `gorm:"column:order_id"`
	ChargeID          string   `gorm:"column:charge_id"`
	Status            string   `gorm:"column:status"`
	Currency          string   `gorm:"column:currency"`
	AmountMinor       int64    `gorm:"column:amount_minor"`
	Reason            string   `gorm:"column:reason"`
	OpenedAt          utcTime  `gorm:"column:opened_at"`
	ClosedAt          *utcTime `gorm:"column:closed_at"`
	EvidenceDueAt     *utcTime `gorm:"column:evidence_due_at"`
	UpdatedAt         utcTime  `gorm:"column:updated_at"`
}

// TableName tells GORM the table.
func (disputeRow) TableName() string { return "disputes" }

// disputeFromDomain converts d as it is opened: status open, never closed,
// last changed when it opened. It refuses a dispute without the
// provider's ID or an amount that is not a positive, exact number of minor
// units of a currency payd knows.
func disputeFromDomain(d domain.Dispute) (disputeRow, error) {
	if d.ProviderDisputeID == "" {
		return disputeRow{}, errors.New("dispute has no provider ID")
	}
	amount, err := toMinor(d.Amount, d.Currency, "amount")
	if err != nil {
		return disputeRow{}, err
	}
	if amount <= 0 {
		return disputeRow{}, fmt.Errorf("dispute amount %s is not positive", d.Amount)
	}
	return disputeRow{
		ID: d.ID, ProviderDisputeID: d.ProviderDisputeID, OrderID: d.OrderID, ChargeID: d.ChargeID,
		Status: string(domain.DisputeOpen), Currency: string(d.Currency), AmountMinor: amount, Reason: d.Reason,
		OpenedAt: ts(d.OpenedAt), EvidenceDueAt: tsPtr(d.EvidenceDueBy), UpdatedAt: ts(d.OpenedAt),
	}, nil
}

func (r disputeRow) toDomain() domain.Dispute {
	c := domain.Currency(r.Currency)
	return domain.Dispute{
		ID: r.ID, ProviderDisputeID: r.ProviderDisputeID, OrderID: r.OrderID, ChargeID: r.ChargeID,
		Status: domain.DisputeStatus(r.Status), Amount: domain.FromMinorUnits(r.AmountMinor, c), Currency: c,
		Reason: r.Reason, OpenedAt: r.OpenedAt.time(), ClosedAt: timePtr(r.ClosedAt),
		EvidenceDueBy: timePtr(r.EvidenceDueAt), UpdatedAt: r.UpdatedAt.time(),
	}
}

// DisputeStore keeps customers' disputes of charges. The unique index on
// provider_dispute_id opens a dispute once however often, and by however
// many callers at once, the provider reports it; each close is one
// guarded UPDATE built from domain's dispute table.
type DisputeStore struct{ db *DB }

// NewDisputeStore returns a DisputeStore on db.
func NewDisputeStore(db *DB) *DisputeStore { return &DisputeStore{db: db} }

// insertDispute is Open's statement, written out. A plain INSERT: a taken
// provider ID fails it, alone (the statement is undone, a caller's
// transaction stands), and Open returns the stored dispute.
const insertDispute = `INSERT INTO disputes (id, provider_dispute_id, order_id, charge_id, status, currency,
	amount_minor, reason, opened_at, closed_at, evidence_due_at, updated_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// Open stores d, open whatever d.Status says, unless a dispute with its
// ProviderDisputeID is stored already. It returns the stored dispute and
// whether it is the new one; of racing openers exactly one gets true.
func (s *DisputeStore) Open(ctx context.Context, d domain.Dispute) (domain.Dispute, bool, error) {
	row, err := disputeFromDomain(d)
	if err != nil {
		return domain.Dispute{}, false, fmt.Errorf("open dispute %s: %w", d.ProviderDisputeID, err)
	}
	_, err = s.db.exec(ctx, insertDispute, row.ID, row.ProviderDisputeID, row.OrderID, row.ChargeID, row.Status,
		row.Currency, row.AmountMinor, row.Reason, row.OpenedAt, row.ClosedAt, row.EvidenceDueAt, row.UpdatedAt)
	if err == nil {
		return row.toDomain(), true, nil
	}
	if isUniqueViolation(err) {
		// The provider's ID is taken (or, by the same dispute opened
		// again, its ID): the stored dispute answers. Any other owner of
		// the ID is not found, and the violation is the error.
		if stored, ferr := s.FindByProviderID(ctx, d.ProviderDisputeID); ferr == nil {
			return stored, false, nil
		}
	}
	return domain.Dispute{}, false, fmt.Errorf("open dispute %s: %w", d.ProviderDisputeID, err)
}

// FindByProviderID returns the dispute the provider calls id, or
// domain.ErrDisputeNotFound.
func (s *DisputeStore) FindByProviderID(ctx context.Context, id string) (domain.Dispute, error) {
	var row disputeRow
	if err := s.db.conn(ctx).Where("provider_dispute_id = ?", id).Take(&row).Error; err != nil {
		return domain.Dispute{}, fmt.Errorf("find dispute %s: %w", id, notFound(err, domain.ErrDisputeNotFound))
	}
	return row.toDomain(), nil
}

// Close moves dispute id by e — open to won or lost — and reports whether
// it did. The statuses on both sides come from domain's table
// (DisputeEvent.From, .To): a dispute closes once, so of a won and a lost
// that race, or two deliveries of one, exactly one matches the row, and a
// closed dispute is never changed again.
func (s *DisputeStore) Close(ctx context.Context, id string, e domain.DisputeEvent, now time.Time) (bool, error) {
	query, ok := closeDispute[e]
	if !ok {
		return false, fmt.Errorf("close dispute %s: unknown event %q", id, e)
	}
	return s.db.guarded(ctx, act{"close dispute", id}, query, ts(now), ts(now), id)
}

// SetEvidenceDue records due as when the provider wants dispute id's
// evidence, and reports whether that changed it: the provider names the
// date after the dispute opened, or moves it. Repeating it changes
// nothing.
func (s *DisputeStore) SetEvidenceDue(ctx context.Context, id string, due, now time.Time) (bool, error) {
	return s.db.guarded(ctx, act{"set dispute evidence due date", id},
		`UPDATE disputes SET evidence_due_at = ?, updated_at = ?
		WHERE id = ? AND (evidence_due_at IS NULL OR evidence_due_at <> ?)`,
		ts(due), ts(now), id, ts(due))
}

// closeDispute is Close's statement for each event of domain's dispute
// machine (won, lost), built once from its table (TestDerivedStatements
// has them written out in full).
var closeDispute = func() map[domain.DisputeEvent]string {
	out := make(map[domain.DisputeEvent]string)
	for _, e := range domain.DisputeMachine.Events() {
		g := guardOf(domain.DisputeMachine, e)
		out[e] = `UPDATE disputes
		SET status = ` + g.to + `, closed_at = ?, updated_at = ?
		WHERE id = ? AND status IN ` + g.from
	}
	return out
}()

// ListByOrder returns an order's disputes, oldest first.
func (s *DisputeStore) ListByOrder(ctx context.Context, orderID string) ([]domain.Dispute, error) {
	var rows []disputeRow
	err := s.db.conn(ctx).Where("order_id = ?", orderID).Order("opened_at, id").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list disputes of order %s: %w", orderID, err)
	}
	out := make([]domain.Dispute, len(rows))
	for i, r := range rows {
		out[i] = r.toDomain()
	}
	return out, nil
}

// List returns disputes newest first (by ID, which grows with time), in
// status when it is not empty, after the ID cursor when it is not empty,
// at most limit and one more, which tells the caller there is a next page.
// An operator's list: by disputes_status, or the primary key.
func (s *DisputeStore) List(ctx context.Context, status domain.DisputeStatus, cursor string, limit int) ([]domain.Dispute, error) {
	q := s.db.conn(ctx)
	if status != "" {
		q = q.Where("status = ?", string(status))
	}
	if cursor != "" {
		q = q.Where("id < ?", cursor)
	}
	var rows []disputeRow
	if err := q.Order("id DESC").Limit(limit + 1).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list disputes: %w", err)
	}
	out := make([]domain.Dispute, len(rows))
	for i, r := range rows {
		out[i] = r.toDomain()
	}
	return out, nil
}

// OpenForCharge reports whether the provider's charge chargeID has a
// dispute still open: a refund of it would give the money back twice.
func (s *DisputeStore) OpenForCharge(ctx context.Context, chargeID string) (bool, error) {
	var n int64
	err := s.db.queryRow(ctx, `SELECT COUNT(*) FROM disputes WHERE charge_id = ? AND status = ?`,
		chargeID, string(domain.DisputeOpen)).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("open disputes of charge %s: %w", chargeID, classify(err))
	}
	return n > 0, nil
}

// CountOpen counts the disputes still open (payd_disputes_open).
func (s *DisputeStore) CountOpen(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.queryRow(ctx, `SELECT COUNT(*) FROM disputes WHERE status = ?`, string(domain.DisputeOpen)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count open disputes: %w", classify(err))
	}
	return n, nil
}
