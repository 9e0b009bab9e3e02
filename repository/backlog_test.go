package repository_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// TestReadBacklog: the backlog counts processing orders, open and resolving
// (not resolved) discrepancies, unapplied webhook events and open (not
// decided) disputes, and finds the
// oldest attempt whose outcome is unknown, on both databases.
func TestReadBacklog(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		ctx := t.Context()
		if b, err := repository.ReadBacklog(ctx, db); err != nil || b != (repository.Backlog{}) {
			t.Fatalf("ReadBacklog(empty) = %+v, %v, want zeros", b, err)
		}
		orders, attempts := repository.NewOrderStore(db), repository.NewAttemptStore(db)
		var unknownAt []time.Time
		for i := range 3 {
			o := newOrder(t, db)
			if ok, err := orders.Claim(ctx, o.ID, newID(), domain.AnyVersion, t0); err != nil || !ok {
				t.Fatalf("Claim = %v, %v", ok, err)
			}
			created := t0.Add(time.Duration(i) * time.Minute)
			a := newAttempt(t, attempts, o, newID(), created)
			if i < 2 { // two unknown, one still started
				if ok, err := attempts.MarkUnknown(ctx, a.ID, "", created); err != nil || !ok {
					t.Fatalf("MarkUnknown = %v, %v", ok, err)
				}
				unknownAt = append(unknownAt, created)
			}
		}
		newOrder(t, db) // pending: not counted
		discs := repository.NewDiscrepancyStore(db)
		record(t, discs, newDiscrepancy("ch_open", newID(), t0))
		resolved := newDiscrepancy("ch_resolved", newID(), t0)
		at := t0
		resolved.Status, resolved.Resolution, resolved.ResolvedAt = domain.DiscrepancyResolved, "ignore", &at
		record(t, discs, resolved)
		inbox := repository.NewInboxStore(db)
		for _, id := range []string{"msg_1", "msg_2"} {
			if _, _, err := inbox.Receive(ctx, domain.WebhookEvent{ID: id, Type: "payment.succeeded", Payload: []byte(`{}`), ReceivedAt: t0}); err != nil {
				t.Fatal(err)
			}
		}
		if err := inbox.MarkProcessed(ctx, "msg_1", "applied", t0); err != nil {
			t.Fatal(err)
		}

		// Disputes as the books' migration keeps them: two open, one lost.
		for i, status := range []domain.DisputeStatus{domain.DisputeOpen, domain.DisputeLost, domain.DisputeOpen} {
			stamp := t0.Format("2006-01-02 15:04:05.000000")
			if err := db.Gorm().Exec(`INSERT INTO disputes (id, provider_dispute_id, order_id, charge_id, status, currency, amount_minor, opened_at, updated_at)
				VALUES (?, ?, ?, ?, ?, 'USD', 500, ?, ?)`, newID(), fmt.Sprintf("dp_%d", i), newID(), "ch_disputed", string(status), stamp, stamp).Error; err != nil {
				t.Fatal(err)
			}
		}

		// Two holds: the one that lapses first was authorized last.
		lapses := t0.Add(time.Hour)
		for i, before := range []time.Time{lapses.Add(time.Hour), lapses} {
			o := heldMugs(t, db, 1, before)
			if err := db.Gorm().Exec(`INSERT INTO ledger_entries (id, order_id, kind, reference, charge_id, currency, amount_minor, source, created_at)
				VALUES (?, ?, 'hold', ?, 'ch_held', 'USD', 1200, 'pay_reply', ?)`, newID(), o.ID, newID(), t0.Add(time.Duration(i)*time.Minute).Format("2006-01-02 15:04:05.000000")).Error; err != nil {
				t.Fatal(err)
			}
		}

		want := repository.Backlog{OrdersProcessing: 3, DiscrepanciesOpen: 1, OldestUnknownAttempt: unknownAt[0], WebhookEventsPending: 1, DisputesOpen: 2,
			HoldsOpen: 2, NextHoldLapse: lapses, OldestHold: t0}
		if b, err := repository.ReadBacklog(ctx, db); err != nil || b != want {
			t.Errorf("ReadBacklog = %+v, %v, want %+v", b, err, want)
		}
	})
}

// TestBacklogUsesIndexes: the backlog is read on every scrape of every
// replica (at most once per cache TTL), so none of its four reads may scan
// a whole table: the plan names an index for each.
func TestBacklogUsesIndexes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		var plan []map[string]any
		q := "EXPLAIN QUERY PLAN " + repository.BacklogQuery
		if d == migrations.MySQL {
			q = "EXPLAIN " + repository.BacklogQuery
		}
		if err := db.Gorm().Raw(q, repository.BacklogArgs...).Scan(&plan).Error; err != nil {
			t.Fatal(err)
		}
		for _, row := range plan {
			s := fmt.Sprint(row)
			full := false
			if d == migrations.MySQL {
				full = fmt.Sprint(row["type"]) == "ALL" || (row["table"] != nil && row["key"] == nil)
			} else {
				detail := fmt.Sprint(row["detail"])
				full = strings.HasPrefix(detail, "SCAN ") && !strings.Contains(detail, "INDEX") && detail != "SCAN CONSTANT ROW"
			}
			if full {
				t.Errorf("backlog plan reads a whole table: %s\nplan: %v", s, plan)
			}
		}
		if len(plan) < 5 {
			t.Errorf("backlog plan = %v, want a step per read", plan)
		}
	})
}

// TestBacklogIndexNamedRight: ADR 0022 and the backlog query name the
// migration that indexes the webhook inbox by its number as merged.
func TestBacklogIndexNamedRight(t *testing.T) {
	files, err := filepath.Glob("../migrations/sqlite/*_webhook_pending_index.sql")
	if err != nil || len(files) != 1 {
		t.Fatalf("webhook pending index migrations = %v (%v), want one", files, err)
	}
	num := strings.SplitN(filepath.Base(files[0]), "_", 2)[0]
	for _, doc := range []string{"../docs/adr/0022-signals.md", "backlog.go"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?i)migration (\d{5})`).FindAllStringSubmatch(string(b), -1) {
			if m[1] != num {
				t.Errorf("%s names migration %s, want %s (%s)", doc, m[1], num, filepath.Base(files[0]))
			}
		}
		if !strings.Contains(strings.ToLower(string(b)), "migration "+num) {
			t.Errorf("%s does not name migration %s", doc, num)
		}
	}
}
