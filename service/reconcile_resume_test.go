package service_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/service"
)

// checkpoints counts the stored checkpoints and their pages.
func (w *world) checkpoints(t *testing.T) (runs, pages int64) {
	t.Helper()
	for _, q := range []struct {
		table string
		into  *int64
	}{{"reconciliation_checkpoints", &runs}, {"reconciliation_checkpoint_pages", &pages}} {
		if err := w.db.Gorm().Raw(`SELECT COUNT(*) FROM ` + q.table).Scan(q.into).Error; err != nil {
			t.Fatal(err)
		}
	}
	return runs, pages
}

// listedFrom is the cursors the provider's list was asked for since the
// log was last cleared.
func (w *world) listedFrom() []string {
	w.prov.mu.Lock()
	defer w.prov.mu.Unlock()
	var out []string
	for _, l := range w.prov.log {
		if after, ok := cutPrefix(l, "list "); ok {
			out = append(out, after)
		}
	}
	w.prov.log = nil
	return out
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):], true
	}
	return "", false
}

// resumeWorld is a window of seven charges, listed two a page: first a
// charge payd never made (a finding on page 1), then six of payd's paid
// orders. It returns the window and the provider's charges in list order.
func resumeWorld(t *testing.T, w *world) (from, to time.Time, charges []domain.Charge) {
	t.Helper()
	cust := w.customer(t)
	stray := w.order(t, cust, "9.00")
	w.chargeBehindPaydsBack(t, newKey(), stray.ID, "9.00")
	for range 6 {
		w.paidOrder(t, cust, "4.00")
	}
	from, to = w.clock.Now().Add(-time.Hour), w.clock.Now().Add(time.Hour)
	charges, err := provider.AllCharges(t.Context(), w.prov.inner, from, to)
	if err != nil || len(charges) != 7 {
		t.Fatalf("provider's charges = %d, %v; want 7", len(charges), err)
	}
	w.prov.mu.Lock()
	w.prov.listPage, w.prov.log = 2, nil
	w.prov.mu.Unlock()
	return from, to, charges
}

// TestReconcileResumesWhereItStopped: a run whose provider fails its third
// page keeps what the first two taught it; asked again under the same
// name it lists from the third page on, not from the first, and records
// one run with everything: the finding of page 1 (its charge decided
// again), the matches of both halves, and no order of the first half taken
// for missing. Asked a third time it answers the run it recorded, listing
// nothing; asked once the idempotency TTL has passed, it is a new run from
// the first page.
func TestReconcileResumesWhereItStopped(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		from, to, charges := resumeWorld(t, w)
		third := charges[3].ID // the cursor after page 2
		failed := false
		w.prov.mu.Lock()
		w.prov.onList = func(after string) error {
			if after == third && !failed {
				failed = true
				return domain.ErrProviderUnavailable
			}
			return nil
		}
		w.prov.mu.Unlock()
		req := service.ReconcileRequest{From: from, To: to, Resume: "request\nk1\nfp"}

		if _, err := w.reconciler.Run(t.Context(), req); !errors.Is(err, domain.ErrProviderUnavailable) {
			t.Fatalf("run with page 3 failing = %v, want ErrProviderUnavailable", err)
		}
		if got := w.listedFrom(); !slices.Equal(got, []string{"", charges[1].ID, third}) {
			t.Fatalf("first run listed after %q, want pages 1 to 3", got)
		}
		if runs, pages := w.checkpoints(t); runs != 1 || pages != 2 {
			t.Fatalf("after the failure: %d checkpoints with %d pages, want 1 with 2", runs, pages)
		}

		run, err := w.reconciler.Run(t.Context(), req)
		if err != nil {
			t.Fatalf("resumed run = %v", err)
		}
		if got := w.listedFrom(); !slices.Equal(got, []string{third, charges[5].ID}) {
			t.Errorf("resumed run listed after %q, want pages 3 and 4 only", got)
		}
		if run.Matched != 6 || run.Found != 1 || run.New != 1 {
			t.Errorf("resumed run = matched %d found %d new %d, want 6, 1, 1 (the stray of page 1)", run.Matched, run.Found, run.New)
		}
		if len(run.Discrepancies) != 1 || run.Discrepancies[0].Type != domain.MissingLocalPayment || run.Discrepancies[0].ChargeID != charges[0].ID {
			t.Errorf("resumed run's findings = %+v, want the missing local payment of %s", run.Discrepancies, charges[0].ID)
		}
		if runs, pages := w.checkpoints(t); runs != 1 || pages != 0 {
			t.Errorf("after the run: %d checkpoints with %d pages, want 1 (recorded) with none", runs, pages)
		}
		if stored, err := w.reconciler.FindRun(t.Context(), run.ID); err != nil || stored.Matched != 6 {
			t.Errorf("stored run = %+v, %v", stored, err)
		}

		again, err := w.reconciler.Run(t.Context(), req)
		if err != nil || again.ID != run.ID || again.Matched != 6 || again.Found != 1 || again.New != 1 {
			t.Errorf("asked again = %+v, %v; want the recorded run %s", again, err, run.ID)
		}
		if got := w.listedFrom(); len(got) != 0 {
			t.Errorf("asked again, the run listed after %q, want nothing", got)
		}

		w.clock.Advance(25 * time.Hour) // past the idempotency TTL: the request is a new one
		fresh, err := w.reconciler.Run(t.Context(), service.ReconcileRequest{From: from, To: to, Resume: req.Resume})
		if err != nil || fresh.ID == run.ID || fresh.Matched != 6 || fresh.Found != 1 || fresh.New != 0 {
			t.Errorf("asked after the TTL = %+v, %v; want a new run, matched 6, found 1, new 0", fresh, err)
		}
		if got := w.listedFrom(); len(got) != 4 || got[0] != "" {
			t.Errorf("asked after the TTL, the run listed after %q, want all four pages from the first", got)
		}
	})
}

// TestReconcileTakenOverMidRun: a run whose checkpoint another process
// takes while it runs (its request retried once its lease lapsed) records
// nothing, whether it is taken while it walks the charges (it stops at its
// next page) or after its last page (its final transaction rolls back);
// the one that took it over records the run, once, from where the first
// had got to.
func TestReconcileTakenOverMidRun(t *testing.T) {
	for _, when := range []string{"walking", "after the walk"} {
		t.Run(when, func(t *testing.T) {
			eachDialect(t, func(t *testing.T, w *world) {
				from, to, charges := resumeWorld(t, w)
				req := service.ReconcileRequest{From: from, To: to, Resume: "request\nk2\nfp"}
				var (
					retried bool // the retry runs once; its own calls go on
					second  domain.ReconciliationRun
					secErr  error
				)
				retry := func() {
					if !retried {
						retried = true
						second, secErr = w.reconciler.Run(context.Background(), req)
					}
				}
				w.prov.mu.Lock()
				if when == "walking" {
					third := charges[3].ID
					w.prov.onList = func(after string) error {
						if after == third {
							retry() // while the first waits for page 3
						}
						return nil
					}
				} else {
					w.prov.onListRefunds = retry // the first has saved its last page
				}
				w.prov.mu.Unlock()

				_, err := w.reconciler.Run(t.Context(), req)
				if !errors.Is(err, domain.ErrRunTakenOver) || !errors.Is(err, domain.ErrKeyInUse) {
					t.Fatalf("the run taken over = %v, want ErrRunTakenOver", err)
				}
				if secErr != nil || second.Matched != 6 || second.Found != 1 {
					t.Fatalf("the run that took over = %+v, %v; want matched 6, found 1", second, secErr)
				}
				var runs []string
				if err := w.db.Gorm().Raw(`SELECT id FROM reconciliation_runs`).Scan(&runs).Error; err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(runs, []string{second.ID}) {
					t.Errorf("runs recorded = %q, want only %s", runs, second.ID)
				}
				// The loser's caller retries: it gets the run recorded.
				if again, err := w.reconciler.Run(t.Context(), req); err != nil || again.ID != second.ID {
					t.Errorf("the loser's retry = %+v, %v; want the recorded run %s", again, err, second.ID)
				}
			})
		})
	}
}

// TestReconcileDryRunKeepsNoCheckpoint: a dry run writes nothing, a
// checkpoint neither.
func TestReconcileDryRunKeepsNoCheckpoint(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		from, to, charges := resumeWorld(t, w)
		w.prov.mu.Lock()
		w.prov.onList = func(after string) error {
			if after == charges[3].ID {
				return domain.ErrProviderUnavailable
			}
			return nil
		}
		w.prov.mu.Unlock()
		_, err := w.reconciler.Run(t.Context(), service.ReconcileRequest{From: from, To: to, DryRun: true, Resume: "request\nk3\nfp"})
		if !errors.Is(err, domain.ErrProviderUnavailable) {
			t.Fatalf("dry run = %v, want ErrProviderUnavailable", err)
		}
		if runs, pages := w.checkpoints(t); runs != 0 || pages != 0 {
			t.Errorf("a dry run left %d checkpoints with %d pages, want none", runs, pages)
		}
	})
}

// TestReconcileFileResumes: a run of a settlement file that stops on its
// third page resumes after the charges it decided: asked again, it skips
// the first four of the file (here changed, so that deciding them again
// would find four more discrepancies) and decides the rest.
func TestReconcileFileResumes(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		from, to, charges := resumeWorld(t, w)
		broken := errors.New("the file's third page cannot be read")
		pages := func(charges []domain.Charge, failAt int) domain.ChargePages {
			return func(yield func([]domain.Charge) error) error {
				n := 0
				for page := range slices.Chunk(charges, 2) {
					if n++; n == failAt {
						return broken
					}
					if err := yield(page); err != nil {
						return err
					}
				}
				return nil
			}
		}
		req := service.ReconcileRequest{From: from, To: to, Resume: "request\nk4\nfp", File: &domain.Settlement{Charges: pages(charges, 3)}}
		if _, err := w.reconciler.Run(t.Context(), req); !errors.Is(err, broken) {
			t.Fatalf("file run failing on page 3 = %v, want %v", err, broken)
		}
		changed := slices.Clone(charges)
		for i := range 4 {
			changed[i].ID, changed[i].IdempotencyKey = "ch_changed_"+string(rune('a'+i)), newKey()
		}
		req.File = &domain.Settlement{Charges: pages(changed, 0)}
		run, err := w.reconciler.Run(t.Context(), req)
		if err != nil || run.Source != "csv" || run.Matched != 6 || run.Found != 1 {
			t.Fatalf("resumed file run = %+v, %v; want a csv run, matched 6, found 1", run, err)
		}
		if run.Discrepancies[0].ChargeID != charges[0].ID {
			t.Errorf("finding = %+v, want the first file's stray %s", run.Discrepancies[0], charges[0].ID)
		}
	})
}
