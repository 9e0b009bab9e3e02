package repository

import (
	"context"
	"errors"
	"fmt"

	"github.com/payd/payd/domain"
)

// runRow is a row of reconciliation_runs.
type runRow struct {
	ID         string   `gorm:"column:id"`
	Source     string   `gorm:"column:source"`
	WindowFrom utcTime  `gorm:"column:window_from"`
	WindowTo   utcTime  `gorm:"column:window_to"`
	DryRun     bool     `gorm:"column:dry_run"`
	Matched    int      `gorm:"column:matched"`
	Found      int      `gorm:"column:found"`
	NewFound   int      `gorm:"column:new_found"`
	CreatedAt  utcTime  `gorm:"column:created_at"`
	FinishedAt *utcTime `gorm:"column:finished_at"`
}

// TableName tells GORM the table.
func (runRow) TableName() string { return "reconciliation_runs" }

// findingRow is a row of reconciliation_findings: run RunID saw
// discrepancy DiscrepancyID.
type findingRow struct {
	RunID         string `gorm:"column:run_id"`
	DiscrepancyID string `gorm:"column:discrepancy_id"`
}

// TableName tells GORM the table.
func (findingRow) TableName() string { return "reconciliation_findings" }

func runFromDomain(r domain.ReconciliationRun) runRow {
	return runRow{
		ID: r.ID, Source: r.Source, WindowFrom: ts(r.From), WindowTo: ts(r.To), DryRun: r.DryRun,
		Matched: r.Matched, Found: r.Found, NewFound: r.New, CreatedAt: ts(r.CreatedAt), FinishedAt: tsPtr(r.FinishedAt),
	}
}

func (r runRow) toDomain(found []domain.Discrepancy) domain.ReconciliationRun {
	return domain.ReconciliationRun{
		ID: r.ID, Source: r.Source, From: r.WindowFrom.time(), To: r.WindowTo.time(), DryRun: r.DryRun,
		Matched: r.Matched, Found: r.Found, New: r.NewFound, CreatedAt: r.CreatedAt.time(),
		FinishedAt: timePtr(r.FinishedAt), Discrepancies: found,
	}
}

// RunStore keeps reconciliation runs and, through reconciliation_findings,
// which discrepancies each run saw: a discrepancy is stored once, however
// many runs find it again.
type RunStore struct{ db *DB }

// NewRunStore returns a RunStore on db.
func NewRunStore(db *DB) *RunStore { return &RunStore{db: db} }

// Create stores a new run (its discrepancies are added with AddFinding).
func (s *RunStore) Create(ctx context.Context, r domain.ReconciliationRun) error {
	row := runFromDomain(r)
	if err := s.db.create(ctx, &row); err != nil {
		return fmt.Errorf("create reconciliation run %s: %w", r.ID, err)
	}
	return nil
}

// Finish stores r's counts and finish time on the stored run, or returns
// domain.ErrRunNotFound. It is not a guarded transition: a run belongs to
// the one request that created it (its idempotency key sees to that), so
// there is no race to decide, and finishing again just restates the counts.
func (s *RunStore) Finish(ctx context.Context, r domain.ReconciliationRun) error {
	if r.FinishedAt == nil {
		return errors.New("finish reconciliation run " + r.ID + ": no finish time")
	}
	n, err := s.db.exec(ctx, finishRun, r.Matched, r.Found, r.New, ts(*r.FinishedAt), r.ID)
	if err != nil {
		return fmt.Errorf("finish reconciliation run %s: %w", r.ID, err)
	}
	// RowsAffected counts matched rows on both databases, so 0 means no such run.
	if n == 0 {
		return fmt.Errorf("finish reconciliation run %s: %w", r.ID, domain.ErrRunNotFound)
	}
	return nil
}

const finishRun = `UPDATE reconciliation_runs
		SET matched = ?, found = ?, new_found = ?, finished_at = ?
		WHERE id = ?`

// AddFinding records that run runID saw discrepancy discrepancyID. Adding
// it again is no error: a run that meets one discrepancy twice (a charge
// listed twice, a retried step) has still found it once.
func (s *RunStore) AddFinding(ctx context.Context, runID, discrepancyID string) error {
	row := findingRow{RunID: runID, DiscrepancyID: discrepancyID}
	if err := s.db.create(ctx, &row); err != nil && !isUniqueViolation(err) {
		return fmt.Errorf("add finding %s to reconciliation run %s: %w", discrepancyID, runID, err)
	}
	return nil
}

// FindByID returns a run with the discrepancies it found, oldest first, or
// domain.ErrRunNotFound: two queries, the run and its findings joined to
// their discrepancies.
func (s *RunStore) FindByID(ctx context.Context, id string) (domain.ReconciliationRun, error) {
	var row runRow
	if err := s.db.conn(ctx).Where("id = ?", id).Take(&row).Error; err != nil {
		return domain.ReconciliationRun{}, fmt.Errorf("find reconciliation run %s: %w", id, notFound(err, domain.ErrRunNotFound))
	}
	var found []discrepancyRow
	err := s.db.conn(ctx).Table("discrepancies d").Select("d.*").
		Joins("JOIN reconciliation_findings f ON f.discrepancy_id = d.id").
		Where("f.run_id = ?", id).Order("d.detected_at, d.id").Find(&found).Error
	if err != nil {
		return domain.ReconciliationRun{}, fmt.Errorf("find reconciliation run %s: load findings: %w", id, err)
	}
	return row.toDomain(discrepanciesToDomain(found)), nil
}
