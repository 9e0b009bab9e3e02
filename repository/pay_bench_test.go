package repository_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/repository"
)

// BenchmarkPayStatements runs the store calls of a new pay and of a replay,
// as the pay path makes them, without HTTP or a provider: what the
// repository costs per request (allocations show GORM's share).
//
//	go test -run '^$' -bench BenchmarkPayStatements -benchmem ./repository
func BenchmarkPayStatements(b *testing.B) {
	for _, d := range dbtest.Dialects() {
		db := dbtest.Open(b, d)
		customers, orders := repository.NewCustomerStore(db), repository.NewOrderStore(db)
		attempts, records := repository.NewAttemptStore(db), repository.NewRecordStore(db)
		tx := repository.NewTransactor(db)
		c := domain.Customer{ID: newID(), Email: "bench@example.com", Name: "Bench", TokenHash: "bench", CreatedAt: t0}
		if err := customers.Create(b.Context(), c); err != nil {
			b.Fatal(err)
		}
		scope := domain.CustomerScope(c.ID)
		body := []byte(`{"id":"o","status":"paid"}`)
		b.Run(fmt.Sprintf("new/%s", d), func(b *testing.B) {
			ids := make([]string, b.N)
			for i := range ids {
				o := pendingOrder(c.ID)
				if err := orders.Create(b.Context(), o); err != nil {
					b.Fatal(err)
				}
				ids[i] = o.ID
			}
			b.ReportAllocs()
			b.ResetTimer()
			defer reportCPU(b)()
			for i := range b.N {
				ctx, key := b.Context(), newID()
				must(b, ignore(firstErr(customers.FindByTokenHash(ctx, c.TokenHash)), nil))
				must(b, ignore(firstErr(records.Find(ctx, scope, key)), domain.ErrRecordNotFound))
				r := newRecord(key)
				r.Scope, r.OrderID = scope, ids[i]
				must(b, records.Insert(ctx, r))
				o, err := orders.FindByID(ctx, ids[i])
				must(b, err)
				a := domain.Attempt{ID: newID(), OrderID: o.ID, RequestID: key, Status: domain.AttemptStarted, PaymentMethod: "pm_ok",
					Amount: o.Amount, Currency: o.Currency, CreatedAt: t0, UpdatedAt: t0, LeasedUntil: t0.Add(time.Minute), InFlightUntil: t0.Add(time.Minute)}
				must(b, tx.InTx(ctx, func(ctx context.Context) error {
					if err := wantTrue(orders.Claim(ctx, o.ID, key, domain.AnyVersion, t0)); err != nil {
						return err
					}
					return attempts.Create(ctx, a)
				}))
				must(b, tx.InTx(ctx, func(ctx context.Context) error {
					if err := wantTrue(attempts.Succeed(ctx, a.ID, "ch_"+a.ID, t0)); err != nil {
						return err
					}
					return wantTrue(orders.MarkPaid(ctx, o.ID, key, testCause, t0))
				}))
				must(b, wantTrue(records.Complete(ctx, scope, key, domain.RecordSucceeded, 200, body, false, t0)))
			}
		})
		b.Run(fmt.Sprintf("replay/%s", d), func(b *testing.B) {
			key := newID()
			r := newRecord(key)
			r.Scope = scope
			must(b, records.Insert(b.Context(), r))
			must(b, wantTrue(records.Complete(b.Context(), scope, key, domain.RecordSucceeded, 200, body, false, t0)))
			b.ReportAllocs()
			b.ResetTimer()
			defer reportCPU(b)()
			for range b.N {
				ctx := b.Context()
				must(b, firstErr(customers.FindByTokenHash(ctx, c.TokenHash)))
				must(b, firstErr(records.Find(ctx, scope, key)))
			}
		})
	}
}

// reportCPU starts counting the process's CPU time (user and system, all
// threads: the driver's too, and SQLite's work for the in-process
// database); the function it returns reports it per operation.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(b.N), "cpu-µs/op")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

func firstErr[T any](_ T, err error) error { return err }

func wantTrue(ok bool, err error) error {
	if err == nil && !ok {
		err = fmt.Errorf("guard matched nothing")
	}
	return err
}
