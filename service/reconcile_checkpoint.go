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
	store          CheckpointStore
	found, matched int // the walk's findings and matches then
	domain.RunCheckpoint
}

// resume takes the checkpoint of req's run, if it has a resume key: run
// becomes the run the checkpoint holds (its ID and creation time), so
// that what a run booked before it stopped names the run recorded in the
// end. A dry run keeps none: it writes nothing.
func (s *Reconciler) resume(ctx context.Context, run *domain.ReconciliationRun, req ReconcileRequest) (*checkpoint, error) {
	if s.Checkpoints == nil || req.Resume == "" || run.DryRun {
		return nil, nil
	}
	key := resumeKey(req.Resume, *run)
	cp, err := s.Checkpoints.Take(ctx, key, uuid.NewString(), run.ID, run.CreatedAt, s.Now())
	if err != nil {
		return nil, err
	}
	if err := cp.Check(); err != nil {
		return nil, err
	}
	run.ID, run.CreatedAt = cp.RunID, cp.CreatedAt.UTC()
	return &checkpoint{store: s.Checkpoints, RunCheckpoint: cp}, nil
}

// resumeKey is the checkpoint's key of a run asked for under name: a hash
// of the name, where the run's records come from and its window.
func resumeKey(name string, run domain.ReconciliationRun) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{name, run.Source,
		run.From.UTC().Format(time.RFC3339Nano), run.To.UTC().Format(time.RFC3339Nano)}, "\n")))
	return hex.EncodeToString(sum[:])
}

// restore puts what the checkpoint's pages say into w and returns where
// the walk continues ("" from the start, or without a checkpoint).
func (c *checkpoint) restore(w *chargeWalk) string {
	if c == nil {
		return ""
	}
	for i, p := range c.Pages {
		w.matched += p.Matched
		w.found = append(w.found, p.Found...)
		for _, k := range p.Keys {
			w.listed.add(k)
		}
		c.Pages[i].Keys, c.Pages[i].Found = nil, nil // held in w now
	}
	c.found, c.matched = len(w.found), w.matched
	return c.After()
}

// done reports whether the run walked all the provider's charges before
// it stopped.
func (c *checkpoint) done() bool { return c != nil && c.Done() }

// save records what w learned from page, which it has just decided, and
// where the walk goes on after it (next). A page is saved as it comes (500
// charges from the sandbox, 100 from Stripe): its two statements cost
// little beside the provider's call for it.
func (c *checkpoint) save(ctx context.Context, w *chargeWalk, page []domain.Charge, next string, now time.Time) error {
	if c == nil {
		return nil
	}
	var keys []string
	for _, ch := range page {
		if ch.Status == domain.ChargeSucceeded {
			keys = append(keys, ch.IdempotencyKey)
		}
	}
	p := domain.CheckpointPage{N: len(c.Pages) + 1, After: next, Last: next == "", Matched: w.matched - c.matched,
		Keys: keys, Found: slices.Clone(w.found[c.found:])}
	if err := c.store.Save(ctx, c.Key, c.Owner, p, now); err != nil {
		return err
	}
	fault("reconcile_page_saved")
	c.Pages = append(c.Pages, domain.CheckpointPage{N: p.N, After: p.After, Last: p.Last})
	c.found, c.matched = len(w.found), w.matched
	return nil
}
