package repository

import (
	"context"
	"database/sql"
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
	readCheckpoint   = `SELECT run_id, run_created_at, recorded_at, updated_at FROM reconciliation_checkpoints WHERE resume_key = ?`
	takeCheckpoint   = `UPDATE reconciliation_checkpoints SET owner = ?, updated_at = ? WHERE resume_key = ?`
	newCheckpoint    = `INSERT INTO reconciliation_checkpoints (resume_key, run_id, owner, run_created_at, updated_at) VALUES (?, ?, ?, ?, ?)`
	readPages        = `SELECT page, after_page, last_page, body FROM reconciliation_checkpoint_pages WHERE resume_key = ? ORDER BY page`
	holdCheckpoint   = `UPDATE reconciliation_checkpoints SET updated_at = ? WHERE resume_key = ? AND owner = ? AND recorded_at IS NULL`
	insertPage       = `INSERT INTO reconciliation_checkpoint_pages (resume_key, page, after_page, last_page, body) VALUES (?, ?, ?, ?, ?)`
	recordCheckpoint = `UPDATE reconciliation_checkpoints SET recorded_at = ?, updated_at = ? WHERE resume_key = ? AND owner = ? AND recorded_at IS NULL`
	dropCheckpoint   = `DELETE FROM reconciliation_checkpoints WHERE resume_key = ? AND owner = ?`
	dropPages        = `DELETE FROM reconciliation_checkpoint_pages WHERE resume_key = ?`
)

// Take returns the checkpoint of key, taken for owner: the stored one, with
// its pages (whoever held it loses it: its next Save fails), or a new one
// of run runID created at createdAt when there is none. The pages are read
// once the checkpoint is taken: only owner adds to them from then on.
func (s *CheckpointStore) Take(ctx context.Context, key, owner, runID string, createdAt, now time.Time) (domain.RunCheckpoint, error) {
	var cp domain.RunCheckpoint
	// Two processes that find no row both insert; the loser reads the
	// winner's on its second turn, and takes it from there.
	for turn := 0; ; turn++ {
		var err error
		cp, err = s.take(ctx, key, owner, runID, createdAt, now)
		if err != nil && isUniqueViolation(err) && turn == 0 {
			continue
		}
		if err != nil {
			return domain.RunCheckpoint{}, fmt.Errorf("take reconciliation checkpoint %s: %w", key, err)
		}
		break
	}
	if cp.Recorded || cp.Saved.IsZero() {
		return cp, nil // recorded: its pages are gone; new: it has none
	}
	pages, err := s.pages(ctx, key)
	if errors.Is(err, errPageUnreadable) {
		// Written by a payd that stored pages otherwise: the run starts
		// its walk again, as its own run still.
		if _, err := s.db.exec(ctx, dropPages, key); err != nil {
			return domain.RunCheckpoint{}, fmt.Errorf("take reconciliation checkpoint %s: %w", key, err)
		}
		return cp, nil
	}
	if err != nil {
		return domain.RunCheckpoint{}, fmt.Errorf("take reconciliation checkpoint %s: %w", key, err)
	}
	cp.Pages = pages
	return cp, nil
}

// take reads key's checkpoint and makes owner its owner, or inserts a new
// one; Saved is zero for a new one.
func (s *CheckpointStore) take(ctx context.Context, key, owner, runID string, createdAt, now time.Time) (domain.RunCheckpoint, error) {
	cp := domain.RunCheckpoint{Key: key, Owner: owner}
	err := s.db.inTx(ctx, func(ctx context.Context) error {
		var created, saved utcTime
		var recorded *utcTime
		err := s.db.queryRow(ctx, readCheckpoint, key).Scan(&cp.RunID, &created, &recorded, &saved)
		if errors.Is(err, sql.ErrNoRows) {
			cp.RunID, cp.CreatedAt, cp.Recorded, cp.Saved = runID, createdAt.UTC(), false, time.Time{}
			_, err := s.db.exec(ctx, newCheckpoint, key, runID, owner, ts(createdAt), ts(now))
			return err
		}
		if err != nil {
			return err
		}
		cp.CreatedAt, cp.Recorded, cp.Saved = created.time(), recorded != nil, saved.time()
		_, err = s.db.exec(ctx, takeCheckpoint, owner, ts(now), key)
		return err
	})
	return cp, err
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

// Hold refreshes key's checkpoint if owner still holds it, and returns
// domain.ErrRunTakenOver if not: a run checks it still holds its run
// before it does more than walk pages.
func (s *CheckpointStore) Hold(ctx context.Context, key, owner string, now time.Time) error {
	held, err := s.db.guarded(ctx, act{"hold reconciliation checkpoint", key}, holdCheckpoint, ts(now), key, owner)
	if err != nil {
		return fmt.Errorf("hold reconciliation checkpoint %s: %w", key, err)
	}
	if !held {
		return domain.ErrRunTakenOver
	}
	return nil
}

// Record marks key's run recorded, and deletes its pages, if owner still
// holds it; domain.ErrRunTakenOver if not. It joins the transaction that
// records the run, so exactly one process records it; asked again, the
// run answers what was recorded (Take's Recorded).
func (s *CheckpointStore) Record(ctx context.Context, key, owner string, now time.Time) error {
	err := s.db.inTx(ctx, func(ctx context.Context) error {
		held, err := s.db.guarded(ctx, act{"record reconciliation checkpoint", key}, recordCheckpoint, ts(now), ts(now), key, owner)
		if err != nil {
			return err
		}
		if !held {
			return domain.ErrRunTakenOver
		}
		_, err = s.db.exec(ctx, dropPages, key)
		return err
	})
	if err != nil {
		return fmt.Errorf("record reconciliation checkpoint %s: %w", key, err)
	}
	return nil
}

// Drop deletes key's checkpoint and its pages if owner holds it, and
// reports whether it did: a run too old to resume starts afresh.
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
	Matched int          `json:"matched"`
	Keys    []string     `json:"keys"`
	Recheck []chargeJSON `json:"recheck,omitempty"`
}

// chargeJSON is what deciding a charge reads of it.
type chargeJSON struct {
	ID             string              `json:"id"`
	IdempotencyKey string              `json:"idempotency_key,omitempty"`
	OrderID        string              `json:"order_id,omitempty"`
	Amount         decimal.Decimal     `json:"amount"`
	Currency       string              `json:"currency"`
	PaymentMethod  string              `json:"payment_method,omitempty"`
	Status         domain.ChargeStatus `json:"status"`
	FailureCode    string              `json:"failure_code,omitempty"`
	RefundedAmount decimal.Decimal     `json:"refunded_amount"`
	DisputedAmount decimal.Decimal     `json:"disputed_amount"`
	CreatedAt      time.Time           `json:"created_at"`
}

func encodePage(p domain.CheckpointPage) (string, error) {
	body := pageJSON{Matched: p.Matched, Keys: p.Keys}
	if body.Keys == nil {
		body.Keys = []string{}
	}
	for _, c := range p.Recheck {
		body.Recheck = append(body.Recheck, chargeJSON{ID: c.ID, IdempotencyKey: c.IdempotencyKey, OrderID: c.OrderID, Amount: c.Amount,
			Currency: c.Currency, PaymentMethod: c.PaymentMethod, Status: c.Status, FailureCode: c.FailureCode,
			RefundedAmount: c.RefundedAmount, DisputedAmount: c.DisputedAmount, CreatedAt: c.CreatedAt})
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
	for _, c := range body.Recheck {
		p.Recheck = append(p.Recheck, domain.Charge{ID: c.ID, IdempotencyKey: c.IdempotencyKey, OrderID: c.OrderID, Amount: c.Amount,
			Currency: c.Currency, PaymentMethod: c.PaymentMethod, Status: c.Status, FailureCode: c.FailureCode,
			RefundedAmount: c.RefundedAmount, DisputedAmount: c.DisputedAmount, CreatedAt: c.CreatedAt})
	}
	return nil
}
