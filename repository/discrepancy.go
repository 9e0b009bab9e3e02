package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/payd/payd/domain"
)

// discrepancyRow is a row of discrepancies. Amounts are integer minor units
// of currency; all three are NULL when the discrepancy concerns no amount.
type discrepancyRow struct {
	ID                  string         `gorm:"column:id"`
	RunID               sql.NullString `gorm:"column:run_id"`
	Type                string         `gorm:"column:type"`
	Reference           string         `gorm:"column:reference"`
	OrderID             sql.NullString `gorm:"column:order_id"`
	AttemptID           sql.NullString `gorm:"column:attempt_id"`
	ChargeID            sql.NullString `gorm:"column:charge_id"`
	Currency            sql.NullString `gorm:"column:currency"`
	ProviderAmountMinor sql.NullInt64  `gorm:"column:provider_amount_minor"`
	LocalAmountMinor    sql.NullInt64  `gorm:"column:local_amount_minor"`
	Status              string         `gorm:"column:status"`
	Resolution          sql.NullString `gorm:"column:resolution"`
	Note                sql.NullString `gorm:"column:note"`
	DetectedAt          utcTime        `gorm:"column:detected_at"`
	ResolvedAt          *utcTime       `gorm:"column:resolved_at"`
}

// TableName tells GORM the table.
func (discrepancyRow) TableName() string { return "discrepancies" }

// discrepancyFromDomain converts d, defaulting an empty status to open and
// refusing an unknown type or status, and amounts that are not exact in
// d's currency (or that have no currency to be counted in).
func discrepancyFromDomain(d domain.Discrepancy) (discrepancyRow, error) {
	if !d.Type.Valid() {
		return discrepancyRow{}, fmt.Errorf("discrepancy type %q is not valid", d.Type)
	}
	if d.Status == "" {
		d.Status = domain.DiscrepancyOpen
	}
	if !slices.Contains(domain.DiscrepancyMachine.Initial(), d.Status) {
		return discrepancyRow{}, fmt.Errorf("discrepancy status %q is not valid", d.Status)
	}
	row := discrepancyRow{
		ID: d.ID, RunID: nullString(d.RunID), Type: string(d.Type), Reference: d.Reference,
		OrderID: nullString(d.OrderID), AttemptID: nullString(d.AttemptID), ChargeID: nullString(d.ChargeID),
		Currency: nullString(string(d.Currency)), Status: string(d.Status), Resolution: nullString(d.Resolution),
		Note: nullString(d.Note), DetectedAt: ts(d.DetectedAt), ResolvedAt: tsPtr(d.ResolvedAt),
	}
	if d.Currency == "" {
		if !d.ProviderAmount.IsZero() || !d.LocalAmount.IsZero() {
			return discrepancyRow{}, errors.New("discrepancy amounts need a currency")
		}
		return row, nil
	}
	provider, err := toMinor(d.ProviderAmount, d.Currency, "provider amount")
	if err != nil {
		return discrepancyRow{}, err
	}
	local, err := toMinor(d.LocalAmount, d.Currency, "local amount")
	if err != nil {
		return discrepancyRow{}, err
	}
	row.ProviderAmountMinor = sql.NullInt64{Int64: provider, Valid: true}
	row.LocalAmountMinor = sql.NullInt64{Int64: local, Valid: true}
	return row, nil
}

func (r discrepancyRow) toDomain() domain.Discrepancy {
	c := domain.Currency(r.Currency.String)
	return domain.Discrepancy{
		ID: r.ID, RunID: r.RunID.String, Type: domain.DiscrepancyType(r.Type), Reference: r.Reference,
		OrderID: r.OrderID.String, AttemptID: r.AttemptID.String, ChargeID: r.ChargeID.String,
		ProviderAmount: domain.FromMinorUnits(r.ProviderAmountMinor.Int64, c),
		LocalAmount:    domain.FromMinorUnits(r.LocalAmountMinor.Int64, c),
		Currency:       c, Status: domain.DiscrepancyStatus(r.Status), Resolution: r.Resolution.String, Note: r.Note.String,
		DetectedAt: r.DetectedAt.time(), ResolvedAt: timePtr(r.ResolvedAt),
	}
}

// DiscrepancyStore keeps disagreements between payd and the provider. The
// unique index on (type, reference) makes finding one again (a redelivered
// webhook, a re-run window) a no-op.
type DiscrepancyStore struct{ db *DB }

// NewDiscrepancyStore returns a DiscrepancyStore on db.
func NewDiscrepancyStore(db *DB) *DiscrepancyStore { return &DiscrepancyStore{db: db} }

// Record stores d and reports true, or returns the discrepancy already
// stored under d's (type, reference) and false. The INSERT decides, so of
// concurrent finders exactly one records it. Any unique violation is
// followed by the lookup, not only the (type, reference) one: a Record
// retried with the same ID may trip the primary key first, and it is the
// same discrepancy. If no row has d's (type, reference), the violation was
// something else and is returned.
func (s *DiscrepancyStore) Record(ctx context.Context, d domain.Discrepancy) (domain.Discrepancy, bool, error) {
	row, err := discrepancyFromDomain(d)
	if err == nil {
		err = s.db.create(ctx, &row)
	}
	if err == nil {
		return row.toDomain(), true, nil
	}
	if !isUniqueViolation(err) {
		return domain.Discrepancy{}, false, fmt.Errorf("record discrepancy %s %s: %w", d.Type, d.Reference, err)
	}
	var stored discrepancyRow
	if found := s.db.conn(ctx).Where("type = ? AND reference = ?", string(d.Type), d.Reference).Take(&stored).Error; found != nil {
		return domain.Discrepancy{}, false, fmt.Errorf("record discrepancy %s %s: %w (then %w)", d.Type, d.Reference, err, found)
	}
	return stored.toDomain(), false, nil
}

// FindByID returns one discrepancy, or domain.ErrDiscrepancyNotFound.
func (s *DiscrepancyStore) FindByID(ctx context.Context, id string) (domain.Discrepancy, error) {
	var row discrepancyRow
	if err := s.db.conn(ctx).Where("id = ?", id).Take(&row).Error; err != nil {
		return domain.Discrepancy{}, fmt.Errorf("find discrepancy %s: %w", id, notFound(err, domain.ErrDiscrepancyNotFound))
	}
	return row.toDomain(), nil
}

// The discrepancy machine's guards, rendered from domain's table.
var (
	discrepancyResolve = guardOf(domain.DiscrepancyMachine, domain.DiscrepancyEventResolve)
	discrepancyClaim   = guardOf(domain.DiscrepancyMachine, domain.DiscrepancyEventClaim)
	discrepancySettle  = guardOf(domain.DiscrepancyMachine, domain.DiscrepancyEventSettle)
	discrepancyUnclaim = guardOf(domain.DiscrepancyMachine, domain.DiscrepancyEventUnclaim)
)

// The discrepancy's guarded statements, each built once from the guards
// above (TestDerivedStatements has them written out in full).
var (
	// resolveDiscrepancy is Resolve's.
	resolveDiscrepancy = `UPDATE discrepancies
		SET status = ` + discrepancyResolve.to + `, resolution = ?, note = ?, resolved_at = ?
		WHERE id = ? AND status IN ` + discrepancyResolve.from

	// claimDiscrepancy is Claim's.
	claimDiscrepancy = `UPDATE discrepancies SET status = ` + discrepancyClaim.to + `, resolution = ?
		WHERE id = ? AND status IN ` + discrepancyClaim.from

	// settleDiscrepancy is Settle's.
	settleDiscrepancy = `UPDATE discrepancies SET status = ` + discrepancySettle.to + `, note = ?, resolved_at = ?
		WHERE id = ? AND status IN ` + discrepancySettle.from + ` AND resolution = ?`

	// unclaimDiscrepancy is Unclaim's.
	unclaimDiscrepancy = `UPDATE discrepancies SET status = ` + discrepancyUnclaim.to + `, resolution = NULL
		WHERE id = ? AND status IN ` + discrepancyUnclaim.from + ` AND resolution = ?`
)

// Resolve moves an open discrepancy to resolved with the operator's
// resolution and note, and reports whether it did: the status guard lets
// exactly one of two operators (or retries) resolve it, and the loser
// re-reads it to learn how it was resolved.
func (s *DiscrepancyStore) Resolve(ctx context.Context, id, resolution, note string, now time.Time) (bool, error) {
	return s.db.guarded(ctx, act{"resolve discrepancy", id}, resolveDiscrepancy,
		nullString(resolution), nullString(note), ts(now), id)
}

// Claim takes an open discrepancy for one resolution (open → resolving),
// so two operators choosing different actions at once cannot both act; it
// reports whether this caller won.
func (s *DiscrepancyStore) Claim(ctx context.Context, id, resolution string, now time.Time) (bool, error) {
	return s.db.guarded(ctx, act{"claim discrepancy", id}, claimDiscrepancy, resolution, id)
}

// Settle finishes a claimed resolution (resolving → resolved), only for
// the action that claimed it.
func (s *DiscrepancyStore) Settle(ctx context.Context, id, resolution, note string, now time.Time) (bool, error) {
	return s.db.guarded(ctx, act{"settle discrepancy", id}, settleDiscrepancy, nullString(note), ts(now), id, resolution)
}

// Unclaim gives a claimed discrepancy back (resolving → open) when its
// action could not be carried out.
func (s *DiscrepancyStore) Unclaim(ctx context.Context, id, resolution string) (bool, error) {
	return s.db.guarded(ctx, act{"unclaim discrepancy", id}, unclaimDiscrepancy, id, resolution)
}

// ListByOrder returns the discrepancies about orderID, oldest first.
func (s *DiscrepancyStore) ListByOrder(ctx context.Context, orderID string) ([]domain.Discrepancy, error) {
	var rows []discrepancyRow
	err := s.db.conn(ctx).Where("order_id = ?", orderID).Order("detected_at, id").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list discrepancies of order %s: %w", orderID, err)
	}
	return discrepanciesToDomain(rows), nil
}

// ListOpen returns open discrepancies of type t (of every type when t is
// empty), oldest first, at most limit (100 when limit <= 0).
func (s *DiscrepancyStore) ListOpen(ctx context.Context, t domain.DiscrepancyType, limit int) ([]domain.Discrepancy, error) {
	q := s.db.conn(ctx).Where("status = ?", string(domain.DiscrepancyOpen))
	if t != "" {
		q = q.Where("type = ?", string(t))
	}
	var rows []discrepancyRow
	if err := q.Order("detected_at, id").Limit(batchSize(limit)).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list open discrepancies: %w", err)
	}
	return discrepanciesToDomain(rows), nil
}

func discrepanciesToDomain(rows []discrepancyRow) []domain.Discrepancy {
	out := make([]domain.Discrepancy, len(rows))
	for i, r := range rows {
		out[i] = r.toDomain()
	}
	return out
}
