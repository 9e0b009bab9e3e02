package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
)

// cursorPages hands out charges a page at a time, as domain.ChargePages
// does, with where the walk would continue after each page: the
// provider's cursor, a settlement file's count of charges; "" after the
// provider's last page.
type cursorPages func(yield func(page []domain.Charge, next string) error) error

// fileCharges is a settlement file's charges from after on (the count of
// its charges a run decided before it stopped, "" for none), with the
// count after each page as its cursor. The file is checked whole before a
// run starts and read again page by page (ADR 0066): skipping what was
// decided costs a parse of those lines, not their reads.
func fileCharges(pages domain.ChargePages, after string) cursorPages {
	skip, _ := strconv.Atoi(after) // written by fileCharges: a count
	return func(yield func([]domain.Charge, string) error) error {
		handed := 0
		return pages(func(page []domain.Charge) error {
			handed += len(page)
			if skip >= len(page) {
				skip -= len(page)
				return nil
			}
			page, skip = page[skip:], 0
			return yield(page, strconv.Itoa(handed))
		})
	}
}

// checkpoint is a run's checkpoint while it runs (ADR 0068): what the
// store holds, and where the walk was when it last saved a page.
type checkpoint struct {
	store   CheckpointStore
	now     func() time.Time
	matched int // the walk's matches then
	domain.RunCheckpoint
}

// resume takes the checkpoint of req's run, if it has a resume key: run
// becomes the run the checkpoint holds (its ID and creation time), so
// that what a run booked before it stopped names the run recorded in the
// end. A checkpoint last written longer ago than s.ResumeWithin (the
// idempotency TTL: its request could not be retried any more) is not
// resumed: the run starts afresh. A dry run keeps none: it writes nothing.
func (s *Reconciler) resume(ctx context.Context, run *domain.ReconciliationRun, req ReconcileRequest) (*checkpoint, error) {
	if s.Checkpoints == nil || req.Resume == "" || run.DryRun {
		return nil, nil
	}
	key, owner := resumeKey(req.Resume, *run), uuid.NewString()
	cp, err := s.Checkpoints.Take(ctx, key, owner, run.ID, run.CreatedAt, s.Now())
	if err != nil {
		return nil, err
	}
	if stale := s.ResumeWithin > 0 && !cp.Saved.IsZero() && cp.Saved.Before(s.Now().Add(-s.ResumeWithin)); stale || cp.Check() != nil {
		if _, err := s.Checkpoints.Drop(ctx, key, owner); err != nil {
			return nil, err
		}
		if cp, err = s.Checkpoints.Take(ctx, key, owner, run.ID, run.CreatedAt, s.Now()); err != nil {
			return nil, err
		}
	}
	run.ID, run.CreatedAt = cp.RunID, cp.CreatedAt.UTC()
	return &checkpoint{store: s.Checkpoints, now: s.Now, RunCheckpoint: cp}, nil
}

// resumeKey is the checkpoint's key of a run asked for under name: a hash
// of the name, where the run's records come from and its window.
func resumeKey(name string, run domain.ReconciliationRun) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{name, run.Source,
		run.From.UTC().Format(time.RFC3339Nano), run.To.UTC().Format(time.RFC3339Nano)}, "\n")))
	return hex.EncodeToString(sum[:])
}

// recorded reports whether the run was recorded already: asked again, it
// answers the run as recorded.
func (c *checkpoint) recorded() bool { return c != nil && c.Recorded }

// restore puts what the checkpoint's pages say into w, and returns where
// the walk continues ("" from the start, or without a checkpoint) and the
// charges to decide again before it does.
func (c *checkpoint) restore(w *chargeWalk) (string, []domain.Charge) {
	if c == nil {
		return "", nil
	}
	w.keepDisagreed = true
	var recheck []domain.Charge
	for i, p := range c.Pages {
		w.matched += p.Matched
		recheck = append(recheck, p.Recheck...)
		for _, k := range p.Keys {
			w.listed.add(k)
		}
		c.Pages[i].Keys, c.Pages[i].Recheck = nil, nil // held in w now
	}
	c.matched = w.matched
	return c.After(), recheck
}

// done reports whether the run walked all the charges before it stopped.
func (c *checkpoint) done() bool { return c != nil && c.Done() }

// save records what w learned from page, which it has just decided, and
// where the walk goes on after it (next; "" after the last page). A page
// is saved as it comes (500 charges from the sandbox, 100 from Stripe):
// its two statements cost little beside the provider's call for it.
func (c *checkpoint) save(ctx context.Context, w *chargeWalk, page []domain.Charge, next string, last bool) error {
	if c == nil {
		return nil
	}
	var keys []string
	for _, ch := range page {
		if ch.Status == domain.ChargeSucceeded {
			keys = append(keys, ch.IdempotencyKey)
		}
	}
	p := domain.CheckpointPage{N: len(c.Pages) + 1, After: next, Last: last, Matched: w.matched - c.matched,
		Keys: keys, Recheck: slices.Clone(w.disagreed)}
	if err := c.store.Save(ctx, c.Key, c.Owner, p, c.now()); err != nil {
		return err
	}
	fault("reconcile_page_saved")
	c.Pages = append(c.Pages, domain.CheckpointPage{N: p.N, After: p.After, Last: p.Last})
	c.matched = w.matched
	w.disagreed = w.disagreed[:0] // saved: not held any longer
	return nil
}

// walked marks the walk complete once it is: a settlement file's end is
// known only when its last page has been handed out, so its final page
// is saved then, with no charges.
func (c *checkpoint) walked(ctx context.Context, w *chargeWalk) error {
	if c == nil || c.done() {
		return nil
	}
	return c.save(ctx, w, nil, c.After(), true)
}

// hold checks that this process still holds the run before it does more
// than walk pages (the refunds, the final transaction).
func (c *checkpoint) hold(ctx context.Context) error {
	if c == nil {
		return nil
	}
	return c.store.Hold(ctx, c.Key, c.Owner, c.now())
}

// record marks the run recorded, in the transaction that records it.
func (c *checkpoint) record(ctx context.Context) error {
	if c == nil {
		return nil
	}
	return c.store.Record(ctx, c.Key, c.Owner, c.now())
}
