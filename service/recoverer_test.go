package service_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/payd/payd/domain"
)

// TestRecovererResolvesOnceConcurrently: payments whose replies were lost
// (the provider charged) are resolved by the recoverer once their lease
// ran out — each exactly once, with one lookup at the provider and no
// second charge, while two replicas run it at the same moment.
func TestRecovererResolvesOnceConcurrently(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		var ids []string
		var orders []domain.Order
		for range 3 {
			o := w.order(t, cust, "8.00")
			if got, err := w.pay(cust, o.ID, newKey(), "pm_timeout"); err != nil || got.Status != domain.StatusProcessing {
				t.Fatalf("Pay with the reply lost = %v, %v, want processing", got.Status, err)
			}
			orders = append(orders, o)
			ids = append(ids, w.attempts(t, cust, o.ID)[0].ID)
		}
		w.calls()

		if n, err := w.recoverer.Run(context.Background()); err != nil || n != 0 {
			t.Fatalf("Run within the lease = %d, %v, want 0: nobody's lease ran out yet", n, err)
		}
		if calls := w.calls(); len(calls) != 0 {
			t.Fatalf("provider calls within the lease = %v, want none", calls)
		}

		w.clock.Advance(lease + inFlightWindow)
		other := w.replica()
		var wg sync.WaitGroup
		counts := make([]int64, 2)
		start := make(chan struct{})
		for i, p := range []*world{w, other} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				n, err := p.recoverer.Run(context.Background())
				if err != nil {
					t.Errorf("Run on replica %d = %v", i, err)
				}
				counts[i] = n
			}()
		}
		close(start)
		wg.Wait()

		if counts[0]+counts[1] != int64(len(ids)) {
			t.Fatalf("attempts resolved = %v, want %d in all", counts, len(ids))
		}
		calls := w.calls()
		slices.Sort(calls)
		want := make([]string, len(ids))
		for i, id := range ids {
			want[i] = "get " + id
		}
		slices.Sort(want)
		if !slices.Equal(calls, want) {
			t.Fatalf("provider calls = %v, want one lookup per attempt and no charge: %v", calls, want)
		}
		for _, o := range orders {
			if st := w.get(t, cust, o.ID).Status; st != domain.StatusPaid {
				t.Errorf("order %s = %v, want paid", o.ID, st)
			}
			if n := len(w.charges(t, o.ID)); n != 1 {
				t.Errorf("order %s charges = %d, want 1", o.ID, n)
			}
		}
		if n := w.outcomes("paid"); n != len(ids) {
			t.Errorf("payments reported paid = %d, want %d (each once)", n, len(ids))
		}
		if n, err := w.recoverer.Run(context.Background()); err != nil || n != 0 {
			t.Fatalf("Run again = %d, %v, want 0", n, err)
		}
	})
}

// TestRecovererCompletesNeverReceived: a charge request that never reached
// the provider is not taken for "never charged" once its time in flight
// is over: a request delayed in transit can still land after any deadline
// (ADR 54). Asked about it, the provider's adapter replays the create
// under the attempt's own key, and that replay is the customer's one
// charge: it pays the order, and nothing is released to be paid again.
func TestRecovererCompletesNeverReceived(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		o := w.order(t, cust, "6.00")
		w.loseNextCharge()
		if got, err := w.pay(cust, o.ID, newKey(), "pm_ok"); err != nil || got.Status != domain.StatusProcessing {
			t.Fatalf("Pay with the request lost = %v, %v, want processing", got.Status, err)
		}
		id := w.attempts(t, cust, o.ID)[0].ID
		w.calls()

		w.clock.Advance(lease + inFlightWindow)
		if n, err := w.recoverer.Run(context.Background()); err != nil || n != 1 {
			t.Fatalf("Run = %d, %v, want 1", n, err)
		}
		if calls := w.calls(); !slices.Equal(calls, []string{"get " + id}) {
			t.Fatalf("provider calls = %v, want one question (the adapter's look-up and replay)", calls)
		}
		charges := w.charges(t, o.ID)
		if len(charges) != 1 {
			t.Fatalf("charges = %+v, want the replay's one", charges)
		}
		as := w.attempts(t, cust, o.ID)
		if len(as) != 1 || as[0].Status != domain.AttemptSucceeded {
			t.Fatalf("attempts = %+v, want one succeeded", as)
		}
		if got := w.get(t, cust, o.ID); got.Status != domain.StatusPaid {
			t.Fatalf("order = %s, want paid by the replay", got.Status)
		}
		if n, err := w.recoverer.Run(context.Background()); err != nil || n != 0 {
			t.Fatalf("Run again = %d, %v, want 0", n, err)
		}
	})
}

// TestRecovererLeasesFromWhenItTakes: a recoverer pass goes through its
// batch one attempt at a time, and a slow provider lookup can take longer
// than the lease. Each attempt's lease must run from when the pass takes
// it, not from when the pass began: otherwise the pass takes its second
// attempt under a lease already over, another replica's pass takes the
// same attempt too, and both ask the provider and settle it (seen in the
// jobs-once harness under -race: 41 attempts settled of 40, two lookups
// for one attempt).
func TestRecovererLeasesFromWhenItTakes(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		var ids []string
		for range 2 {
			o := w.order(t, cust, "7.00")
			if got, err := w.pay(cust, o.ID, newKey(), "pm_timeout"); err != nil || got.Status != domain.StatusProcessing {
				t.Fatalf("Pay with the reply lost = %v, %v, want processing", got.Status, err)
			}
			ids = append(ids, w.attempts(t, cust, o.ID)[0].ID)
		}
		w.calls()
		w.clock.Advance(lease + inFlightWindow)

		other := w.replica()
		otherN := int64(-1)
		lookups := 0
		slow := &slowLookups{spyProvider: w.prov, before: func() {
			lookups++
			switch lookups {
			case 1: // the first lookup outlasts a lease
				w.clock.Advance(lease + time.Second)
			case 2: // meanwhile, another replica's pass begins
				var err error
				if otherN, err = other.recoverer.Run(context.Background()); err != nil {
					t.Errorf("Run on the other replica = %v", err)
				}
			}
		}}
		r := *w.recoverer
		r.Provider = slow
		n, err := r.Run(context.Background())
		if err != nil || n != 2 || otherN != 0 {
			t.Errorf("Run = %d, %v and, during it, the other replica's Run = %d; want 2 and 0: each attempt settled once, by the pass that leased it", n, err, otherN)
		}
		calls := w.calls()
		slices.Sort(calls)
		want := []string{"get " + ids[0], "get " + ids[1]}
		slices.Sort(want)
		if !slices.Equal(calls, want) {
			t.Errorf("provider calls = %v, want one lookup per attempt: %v", calls, want)
		}
	})
}

// slowLookups is the test's provider with a hook before every lookup.
type slowLookups struct {
	*spyProvider
	before func()
}

func (p *slowLookups) GetCharge(ctx context.Context, a domain.Attempt) (domain.Charge, error) {
	p.before()
	return p.spyProvider.GetCharge(ctx, a)
}

// TestRecovererStoresPendingChargeID: a payment whose reply was lost and
// whose charge the provider still has pending when the recoverer asks is
// not settled yet, but the charge's ID the answer names is stored on the
// attempt, so every later ask (the recoverer's next pass, a retry, a
// webhook's check) reads that charge by its ID. At Stripe an ask without
// the ID replays the create, whose stored first response never changes
// (ADR 0020, 0052): without the ID the attempt would never settle.
func TestRecovererStoresPendingChargeID(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		o := w.order(t, cust, "8.00")
		w.delayNextCharge()
		if got, err := w.pay(cust, o.ID, newKey(), "pm_async"); err != nil || got.Status != domain.StatusProcessing {
			t.Fatalf("Pay with the reply lost = %v, %v, want processing", got.Status, err)
		}
		cs := w.charges(t, o.ID)
		if len(cs) != 1 {
			t.Fatalf("charges = %+v, want the late one", cs)
		}
		if a := w.attempts(t, cust, o.ID)[0]; a.Status != domain.AttemptUnknown || a.ProviderChargeID != "" {
			t.Fatalf("attempt after the lost reply = %s %q, want unknown without a charge ID", a.Status, a.ProviderChargeID)
		}
		w.clock.Advance(lease + inFlightWindow) // the charge itself is still pending (AsyncDelay)
		if n, err := w.recoverer.Run(context.Background()); err != nil || n != 0 {
			t.Fatalf("Run while the charge is pending = %d, %v, want 0 settled", n, err)
		}
		if a := w.attempts(t, cust, o.ID)[0]; a.Status != domain.AttemptUnknown || a.ProviderChargeID != cs[0].ID {
			t.Fatalf("attempt after the recoverer asked = %s %q, want unknown with the pending charge %s stored", a.Status, a.ProviderChargeID, cs[0].ID)
		}
	})
}
