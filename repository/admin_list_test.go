package repository_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// walkPages follows a list's cursor to its end with pages of limit, failing on
// a page over the limit or an ID seen twice, and returns the IDs in order.
func walkPages(t *testing.T, limit int, page func(cursor string) ([]string, string)) []string {
	t.Helper()
	var all []string
	seen := map[string]bool{}
	cursor := ""
	for range 100 {
		ids, next := page(cursor)
		if len(ids) > limit {
			t.Fatalf("page of %d with limit %d", len(ids), limit)
		}
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("%s listed twice", id)
			}
			seen[id] = true
		}
		all = append(all, ids...)
		if next == "" {
			return all
		}
		cursor = next
	}
	t.Fatal("more than 100 pages")
	return nil
}

// newestFirst is ids sorted as the lists sort them (UUIDv7: by creation).
func newestFirst(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	slices.Reverse(out)
	return out
}

// TestRunList: the runs list walks every run once, newest first, whatever
// the page size, and carries no findings.
func TestRunList(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRunStore(dbtest.Open(t, d))
		var ids []string
		for i := range 7 {
			r := newRun([]string{"provider", "csv", "schedule"}[i%3])
			if err := s.Create(t.Context(), r); err != nil {
				t.Fatalf("Create(run) = %v", err)
			}
			ids = append(ids, r.ID)
		}
		for _, limit := range []int{1, 3, 7, 100} {
			got := walkPages(t, limit, func(cursor string) ([]string, string) {
				p, err := s.List(t.Context(), domain.RunFilter{Cursor: cursor, Limit: limit})
				if err != nil {
					t.Fatalf("List = %v", err)
				}
				var out []string
				for _, r := range p.Runs {
					if r.Discrepancies != nil {
						t.Errorf("run %s listed with findings", r.ID)
					}
					out = append(out, r.ID)
				}
				return out, p.NextCursor
			})
			if !slices.Equal(got, newestFirst(ids)) {
				t.Errorf("limit %d: walked %v, want %v", limit, got, newestFirst(ids))
			}
		}
	})
}

// TestDiscrepancyList: every filter (status, type, order) selects exactly
// its discrepancies, open, resolving and resolved, from runs and from
// elsewhere, and the cursor walks them newest first.
func TestDiscrepancyList(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewDiscrepancyStore(dbtest.Open(t, d))
		orderA, orderB := newID(), newID()
		type made struct {
			id, status, order string
			typ               domain.DiscrepancyType
		}
		var all []made
		for i := range 9 {
			in := newDiscrepancy(fmt.Sprintf("ch_list_%d", i), orderA, t0)
			if i%2 == 1 {
				in.OrderID = orderB
			}
			if i%3 == 0 {
				in.Type = domain.PaidAfterClose
				in.RunID = newID()
			}
			got := record(t, s, in)
			status := domain.DiscrepancyOpen
			switch i % 4 {
			case 1:
				mustGuard(t, "Claim", func() (bool, error) { return s.Claim(t.Context(), got.ID, "refund", t0) })
				status = domain.DiscrepancyResolving
			case 2:
				mustGuard(t, "Resolve", func() (bool, error) { return s.Resolve(t.Context(), got.ID, "ignore", "", t0) })
				status = domain.DiscrepancyResolved
			}
			all = append(all, made{got.ID, string(status), in.OrderID, in.Type})
		}
		want := func(keep func(made) bool) []string {
			var ids []string
			for _, m := range all {
				if keep(m) {
					ids = append(ids, m.id)
				}
			}
			return newestFirst(ids)
		}
		tests := []struct {
			name string
			f    domain.DiscrepancyFilter
			want []string
		}{
			{"all", domain.DiscrepancyFilter{}, want(func(made) bool { return true })},
			{"open", domain.DiscrepancyFilter{Status: "open"}, want(func(m made) bool { return m.status == "open" })},
			{"resolving", domain.DiscrepancyFilter{Status: "resolving"}, want(func(m made) bool { return m.status == "resolving" })},
			{"resolved", domain.DiscrepancyFilter{Status: "resolved"}, want(func(m made) bool { return m.status == "resolved" })},
			{"type", domain.DiscrepancyFilter{Type: domain.PaidAfterClose}, want(func(m made) bool { return m.typ == domain.PaidAfterClose })},
			{"order B open", domain.DiscrepancyFilter{OrderID: orderB, Status: "open"},
				want(func(m made) bool { return m.order == orderB && m.status == "open" })},
			{"nobody's order", domain.DiscrepancyFilter{OrderID: newID()}, nil},
		}
		for _, tt := range tests {
			for _, limit := range []int{2, 100} {
				got := walkPages(t, limit, func(cursor string) ([]string, string) {
					f := tt.f
					f.Cursor, f.Limit = cursor, limit
					p, err := s.List(t.Context(), f)
					if err != nil {
						t.Fatalf("List(%+v) = %v", f, err)
					}
					var out []string
					for _, d := range p.Discrepancies {
						out = append(out, d.ID)
					}
					return out, p.NextCursor
				})
				if !slices.Equal(got, tt.want) {
					t.Errorf("%s (limit %d): walked %v, want %v", tt.name, limit, got, tt.want)
				}
			}
		}
	})
}

func mustGuard(t *testing.T, what string, fn func() (bool, error)) {
	t.Helper()
	if ok, err := fn(); !ok || err != nil {
		t.Fatalf("%s = %v, %v, want true", what, ok, err)
	}
}

// TestCustomerList: customers list newest first; an email selects its one
// customer and an unknown email none.
func TestCustomerList(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewCustomerStore(db)
		var ids []string
		var last domain.Customer
		for range 5 {
			last = newCustomer(t, db)
			ids = append(ids, last.ID)
		}
		got := walkPages(t, 2, func(cursor string) ([]string, string) {
			p, err := s.List(t.Context(), domain.CustomerFilter{Cursor: cursor, Limit: 2})
			if err != nil {
				t.Fatalf("List = %v", err)
			}
			var out []string
			for _, c := range p.Customers {
				out = append(out, c.ID)
			}
			return out, p.NextCursor
		})
		if !slices.Equal(got, newestFirst(ids)) {
			t.Errorf("walked %v, want %v", got, newestFirst(ids))
		}
		p, err := s.List(t.Context(), domain.CustomerFilter{Email: last.Email})
		if err != nil || len(p.Customers) != 1 || p.Customers[0].ID != last.ID || p.NextCursor != "" {
			t.Errorf("List(email %s) = %+v, %v, want only %s", last.Email, p, err, last.ID)
		}
		if p, err := s.List(t.Context(), domain.CustomerFilter{Email: "nobody@example.com"}); err != nil || len(p.Customers) != 0 {
			t.Errorf("List(unknown email) = %+v, %v, want none", p, err)
		}
	})
}
