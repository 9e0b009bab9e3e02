package repository

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// CheckpointStore keeps the checkpoints of reconciliation runs in progress
// (migration 00031, ADR 0068): a row per run, owned by the process running
// it, and a row per page of charges it has decided.
type CheckpointStore struct{ db *DB }

// NewCheckpointStore returns a CheckpointStore on db.
func NewCheckpointStore(db *DB) *CheckpointStore { return &CheckpointStore{db: db} }

const (
	takeCheckpoint = `UPDATE reconciliation_checkpoints SET owner = ?, updated_at = ? WHERE resume_key = ?`
	readCheckpoint = `SELECT run_id, run_created_at FROM reconciliation_checkpoints WHERE resume_key = ?`
	newCheckpoint  = `INSERT INTO reconciliation_checkpoints (resume_key, run_id, owner, run_created_at, updated_at) VALUES (?, ?, ?, ?, ?)`
	readPages      = `SELECT page, after_page, last_page, body FROM reconciliation_checkpoint_pages WHERE resume_key = ? ORDER BY page`
	holdCheckpoint = `UPDATE reconciliation_checkpoints SET updated_at = ? WHERE resume_key = ? AND owner = ?`
	insertPage     = `INSERT INTO reconciliation_checkpoint_pages (resume_key, page, after_page, last_page, body) VALUES (?, ?, ?, ?, ?)`
	dropCheckpoint = `DELETE FROM reconciliation_checkpoints WHERE resume_key = ? AND owner = ?`
	dropPages      = `DELETE FROM reconciliation_checkpoint_pages WHERE resume_key = ?`
)

// Take returns the checkpoint of key, taken for owner: the stored one, with
// its pages (whoever held it loses it: its next Save fails), or a new one
// of run runID created at createdAt when there is none.
func (s *CheckpointStore) Take(ctx context.Context, key, owner, runID string, createdAt, now time.Time) (domain.RunCheckpoint, error) {
	cp := domain.RunCheckpoint{Key: key, Owner: owner}
	// Two processes that find no row both insert; the loser reads the
	// winner's on its second turn, and takes it from there.
	for turn := 0; ; turn++ {
		err := s.db.inTx(ctx, func(ctx context.Context) error {
			cp.Pages = nil
			taken, err := s.db.guarded(ctx, act{"take reconciliation checkpoint", key}, takeCheckpoint, owner, ts(now), key)
			if err != nil {
				return err
			}
			if !taken {
				cp.RunID, cp.CreatedAt = runID, createdAt.UTC()
				_, err := s.db.exec(ctx, newCheckpoint, key, runID, owner, ts(createdAt), ts(now))
				return err
			}
			var created utcTime
			if err := s.db.queryRow(ctx, readCheckpoint, key).Scan(&cp.RunID, &created); err != nil {
				return err
			}
			cp.CreatedAt = created.time()
			cp.Pages, err = s.pages(ctx, key)
			if errors.Is(err, errPageUnreadable) {
				// Written by a payd that stored pages otherwise: the run
				// starts its walk again, as its own run still.
				cp.Pages = nil
				_, err = s.db.exec(ctx, dropPages, key)
			}
			return err
		})
		if err != nil && isUniqueViolation(err) && turn == 0 {
			continue
		}
		if err != nil {
			return domain.RunCheckpoint{}, fmt.Errorf("take reconciliation checkpoint %s: %w", key, err)
		}
		return cp, nil
	}
}

func (s *CheckpointStore) pages(ctx context.Context, key string) ([]domain.CheckpointPage, error) {
	rows, err := s.db.query(ctx, readPages, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var pages []domain.CheckpointPage
	for rows.Next() {
		var p domain.CheckpointPage
		var body string
		if err := rows.Scan(&p.N, &p.After, &p.Last, &body); err != nil {
			return nil, err
		}
		if err := decodePage(body, &p); err != nil {
			return nil, fmt.Errorf("%w: page %d: %w", errPageUnreadable, p.N, err)
		}
		pages = append(pages, p)
	}
	return pages, classify(rows.Err())
}

// errPageUnreadable: a stored page's body does not decode.
var errPageUnreadable = errors.New("checkpoint page unreadable")

// Save records page p of key's run if owner still holds it, and
// domain.ErrRunTakenOver if not.
func (s *CheckpointStore) Save(ctx context.Context, key, owner string, p domain.CheckpointPage, now time.Time) error {
	body, err := encodePage(p)
	if err != nil {
		return fmt.Errorf("save reconciliation checkpoint %s page %d: %w", key, p.N, err)
	}
	err = s.db.inTx(ctx, func(ctx context.Context) error {
		held, err := s.db.guarded(ctx, act{"hold reconciliation checkpoint", key}, holdCheckpoint, ts(now), key, owner)
		if err != nil {
			return err
		}
		if !held {
			return domain.ErrRunTakenOver
		}
		_, err = s.db.exec(ctx, insertPage, key, p.N, p.After, p.Last, body)
		if isUniqueViolation(err) {
			return domain.ErrRunTakenOver // the page is another's: it took the run and went on
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("save reconciliation checkpoint %s page %d: %w", key, p.N, err)
	}
	return nil
}

// Drop deletes key's checkpoint and its pages if owner still holds it; it
// reports whether it did. A run drops its checkpoint in the transaction
// that records it, so that exactly one process records the run.
func (s *CheckpointStore) Drop(ctx context.Context, key, owner string) (bool, error) {
	var dropped bool
	err := s.db.inTx(ctx, func(ctx context.Context) error {
		var err error
		if dropped, err = s.db.guarded(ctx, act{"drop reconciliation checkpoint", key}, dropCheckpoint, key, owner); err != nil || !dropped {
			return err
		}
		_, err = s.db.exec(ctx, dropPages, key)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("drop reconciliation checkpoint %s: %w", key, err)
	}
	return dropped, nil
}

// pageJSON is a page's body as stored: its own names, so that a change to
// the domain's types does not silently change what old checkpoints say.
type pageJSON struct {
	Matched int         `json:"matched"`
	Keys    []string    `json:"keys"`
	Found   []foundJSON `json:"found,omitempty"`
}

type foundJSON struct {
	Type           domain.DiscrepancyType   `json:"type"`
	Reference      string                   `json:"reference"`
	OrderID        string                   `json:"order_id,omitempty"`
	AttemptID      string                   `json:"attempt_id,omitempty"`
	ChargeID       string                   `json:"charge_id,omitempty"`
	ProviderAmount decimal.Decimal          `json:"provider_amount"`
	LocalAmount    decimal.Decimal          `json:"local_amount"`
	Currency       domain.Currency          `json:"currency,omitempty"`
	Status         domain.DiscrepancyStatus `json:"status,omitempty"`
	Note           string                   `json:"note,omitempty"`
	DetectedAt     time.Time                `json:"detected_at"`
}

func encodePage(p domain.CheckpointPage) (string, error) {
	body := pageJSON{Matched: p.Matched, Keys: p.Keys}
	if body.Keys == nil {
		body.Keys = []string{}
	}
	for _, d := range p.Found {
		if d.ID != "" || d.RunID != "" || d.ResolvedAt != nil || d.Resolution != "" {
			return "", errors.New("a page's finding is not recorded yet: it has no id, run or resolution")
		}
		body.Found = append(body.Found, foundJSON{Type: d.Type, Reference: d.Reference, OrderID: d.OrderID, AttemptID: d.AttemptID,
			ChargeID: d.ChargeID, ProviderAmount: d.ProviderAmount, LocalAmount: d.LocalAmount, Currency: d.Currency,
			Status: d.Status, Note: d.Note, DetectedAt: d.DetectedAt})
	}
	b, err := json.Marshal(body)
	return string(b), err
}

func decodePage(s string, p *domain.CheckpointPage) error {
	var body pageJSON
	if err := json.Unmarshal([]byte(s), &body); err != nil {
		return err
	}
	p.Matched, p.Keys = body.Matched, body.Keys
	for _, f := range body.Found {
		p.Found = append(p.Found, domain.Discrepancy{Type: f.Type, Reference: f.Reference, OrderID: f.OrderID, AttemptID: f.AttemptID,
			ChargeID: f.ChargeID, ProviderAmount: f.ProviderAmount, LocalAmount: f.LocalAmount, Currency: f.Currency,
			Status: f.Status, Note: f.Note, DetectedAt: f.DetectedAt})
	}
	return nil
}
