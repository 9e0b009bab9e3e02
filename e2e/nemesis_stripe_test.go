package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/internal/nemesis"
	"github.com/payd/payd/internal/stripefake"
)

// The nemesis in Stripe mode: payd charges through its Stripe adapter
// against internal/stripefake (stripe-mock is stateless: it cannot say
// what was charged, and the checker needs the provider's books), with
// the same links as on the sandbox:
//
//   - payd-i → Stripe's API ("provider-i", STRIPE_API_BASE);
//   - Stripe → payd-i ("webhook-i"): the fake records its events; a
//     sender here delivers each, signed afresh every time, as Stripe does:
//     in any order, many at once, each retried with a growing pause until
//     payd answers 2xx.
//
// The bank and the customer are played too: a PaymentIntent left
// processing, or waiting for 3-D Secure, is finished a moment later,
// most of the time successfully.

// nemStripeMethods are the sandbox's payment methods, as the clients draw
// them, in Stripe's test PaymentMethods: pm_async is a PaymentIntent the
// bank finishes later, pm_timeout one the customer must authenticate
// (3-D Secure) before the bank decides.
var nemStripeMethods = map[string]string{
	"pm_ok": stripefake.PMVisa, "pm_declined": stripefake.PMDeclined, "pm_insufficient_funds": stripefake.PMInsufficient,
	"pm_async": stripefake.PMProcessing, "pm_async_fail": stripefake.PMProcessing, "pm_timeout": stripefake.PM3DS,
}

const (
	nemStripeFinish  = 500 * time.Millisecond // how long the bank, or the customer, takes on a pending PaymentIntent
	nemStripeTimeout = time.Second            // one delivery's wait for payd's answer
	nemStripeSenders = 16                     // deliveries at once
)

// nemStripe is the fake Stripe of a setup, with its event sender and the
// bank that finishes what waits for it.
type nemStripe struct {
	fake *stripefake.Fake
	url  string // where the sender posts: the front's Stripe endpoint

	mu      sync.Mutex
	queued  int                  // events taken from the fake so far
	pending map[string]*nemEvent // event ID → not yet answered 2xx
	waiting map[string]time.Time // PaymentIntent → when it was first seen pending
	sent    int                  // deliveries tried
	failed  int                  // of them, not answered 2xx
}

type nemEvent struct {
	ev      stripefake.Event
	tries   int
	next    time.Time // not before
	sending bool
	last    string // the last try's outcome
}

// startNemStripe starts the fake, its sender (to front's Stripe endpoint)
// and the bank, all stopped by t's cleanup.
func startNemStripe(t *testing.T, front string, seed int64) *nemStripe {
	t.Helper()
	s := &nemStripe{fake: stripefake.New(t.Cleanup), url: front + "/v1/webhooks/stripe",
		pending: map[string]*nemEvent{}, waiting: map[string]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	hc := &http.Client{Timeout: nemStripeTimeout}
	t.Cleanup(hc.CloseIdleConnections)
	work := make(chan *nemEvent)
	for range nemStripeSenders {
		wg.Go(func() {
			for e := range work {
				s.deliver(ctx, hc, e)
			}
		})
	}
	wg.Go(func() {
		defer close(work)
		bank := rand.New(rand.NewPCG(uint64(seed), 0x62616e6b))
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			s.finish(bank)
			for _, e := range s.due() {
				select {
				case work <- e:
				case <-ctx.Done():
					return
				}
			}
		}
	})
	return s
}

// due takes the fake's new events into the queue and returns those due to
// be sent now, each marked as being sent.
func (s *nemStripe) due() []*nemEvent {
	evs := s.fake.Events()
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range evs[s.queued:] {
		s.pending[ev.ID] = &nemEvent{ev: ev, next: now}
	}
	s.queued = len(evs)
	var out []*nemEvent
	for _, e := range s.pending {
		if !e.sending && !now.Before(e.next) {
			e.sending = true
			out = append(out, e)
		}
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] }) // Stripe promises no order
	return out
}

// deliver posts e once, signed now; anything but a 2xx is tried again
// later, after a pause that doubles from 100 ms up to 2 s.
func (s *nemStripe) deliver(ctx context.Context, hc *http.Client, e *nemEvent) {
	outcome := ""
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(e.ev.Body))
	if err == nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Stripe-Signature", s.fake.Sign(e.ev.Body, time.Now()))
		var resp *http.Response
		if resp, err = hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				outcome = resp.Status
			}
		}
	}
	if err != nil {
		outcome = err.Error()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent++
	e.sending, e.tries, e.last = false, e.tries+1, outcome
	if outcome == "" {
		delete(s.pending, e.ev.ID)
		return
	}
	s.failed++
	e.next = time.Now().Add(min(100*time.Millisecond<<min(e.tries-1, 5), 2*time.Second))
}

// finish plays the bank and the customer: a PaymentIntent pending for
// nemStripeFinish is finished, three times in four successfully.
func (s *nemStripe) finish(r *rand.Rand) {
	now := time.Now()
	for _, pi := range s.fake.PaymentIntents() {
		if pi.Status != "processing" && pi.Status != "requires_action" {
			continue
		}
		s.mu.Lock()
		seen, ok := s.waiting[pi.ID]
		if !ok {
			s.waiting[pi.ID] = now
		}
		s.mu.Unlock()
		if ok && now.Sub(seen) >= nemStripeFinish {
			s.fake.Settle(pi.ID, r.IntN(4) != 0)
		}
	}
}

// busy says what at Stripe is not final yet: a PaymentIntent still
// pending, an event payd has not taken.
func (s *nemStripe) busy() string {
	var pending []string
	for _, pi := range s.fake.PaymentIntents() {
		if pi.Status == "processing" || pi.Status == "requires_action" {
			pending = append(pending, pi.ID)
		}
	}
	if len(pending) > 0 {
		return fmt.Sprintf("payment intents pending at Stripe: %v", pending)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.fake.Events()); n > s.queued {
		return fmt.Sprintf("%d Stripe events not yet queued", n-s.queued)
	}
	var undelivered []string
	for _, e := range s.pending {
		undelivered = append(undelivered, fmt.Sprintf("%s %s (tries %d, last %s)", e.ev.ID, e.ev.Type, e.tries, e.last))
	}
	slices.Sort(undelivered)
	if len(undelivered) > 0 {
		return fmt.Sprintf("Stripe events undelivered: %v", undelivered)
	}
	return ""
}

// books reads the fake's PaymentIntents as the checker's charges.
func (s *nemStripe) books(t *testing.T) []nemesis.Charge {
	var out []nemesis.Charge
	for _, pi := range s.fake.PaymentIntents() {
		if pi.Currency != "usd" {
			t.Fatalf("payment intent %s in %q: the nemesis pays in USD only", pi.ID, pi.Currency)
		}
		out = append(out, nemesis.Charge{ID: pi.ID, OrderID: pi.OrderID, Key: pi.Attempt,
			Amount: decimal.New(pi.Amount, -2), Succeeded: pi.Status == "succeeded",
			Refunded: decimal.New(pi.Refunded, -2), Created: pi.Created})
	}
	return out
}

// deliveries is how many deliveries the sender tried, and how many of
// them payd did not answer 2xx.
func (s *nemStripe) deliveries() (sent, failed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent, s.failed
}
