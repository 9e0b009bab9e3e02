package e2e

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/payd/payd/internal/nemesis"
)

// After the schedule: waiting for the world to settle (the shop told of
// every event), sending every key again until none runs anew, and the
// final sweep whose answers must be final.

// settle waits until every replica is ready and nothing is left in
// flight (the property test's busy: no order processing, no attempt
// started or unknown, no refund pending, no charge pending at the
// provider, every webhook delivered), twice in a row. It returns "" then,
// else what was still busy.
func (w *nemWorkload) settle() string {
	ids := w.orderIDs()
	if len(ids) == 0 {
		return ""
	}
	busy := func(ctx context.Context, ids []string) string {
		if why := busyPayd(ctx, w.s.db, ids); why != "" {
			return why
		}
		return w.s.stripe.busy()
	}
	if w.s.prov != nil {
		busy = (&propRun{t: w.t, s: &stack{db: w.s.db, sandbox: w.s.prov.sb}}).busy
	}
	began, said := time.Now(), time.Now()
	return untilQuiet(nemSettle, func() string {
		if !w.s.ready() {
			return "a replica is not ready"
		}
		why := busy(context.Background(), ids)
		if why != "" && time.Since(said) > 5*time.Second {
			w.t.Logf("settling for %v: %s", time.Since(began).Round(time.Second), tail(why, 1))
			said = time.Now()
		}
		return why
	})
}

// drainNotify waits until payd has fanned out every event of the
// clients' orders and no delivery is pending, twice in a row, for at most
// nemNotifyDrain: "" then, else what was still pending.
func (w *nemWorkload) drainNotify() string {
	ids := w.orderIDs()
	if len(ids) == 0 {
		return ""
	}
	return untilQuiet(nemNotifyDrain, func() string { return busyNotify(w.s.db, ids) })
}

func (w *nemWorkload) orderIDs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]string, len(w.orders))
	for i, o := range w.orders {
		ids[i] = o.id
	}
	return ids
}

// drain is what a client does once the world is quiet: it sends every
// key again, and again after the world settled, until a round in which no
// key could run anew the next time (nemDrainUnsettled; four rounds at
// most): a key that ran anew may start a payment that turns another key's
// answer (409, in progress) into a run of its own the next time, even in
// the same round. A key whose payment was released unpaid (the
// recoverer found the charge never reached the provider) or whose request
// failed without completing runs again when sent again, so only after
// this may the sweep expect every answer to be final. These are ordinary
// requests of the history: the checker holds them to every invariant.
func (w *nemWorkload) drain() {
	w.mu.Lock()
	keys := append([]*nemKey(nil), w.keys...)
	w.mu.Unlock()
	for round := range 4 {
		answers := make([]nemesis.Op, len(keys))
		forEach(2*nemClients, len(keys), func(i int) {
			rr := rand.New(rand.NewPCG(uint64(i), uint64(round)+2))
			k := keys[i]
			answers[i] = w.do(nemClients, rr, nemesis.Op{Kind: k.kind, OrderID: k.order.id, Key: k.key, Amount: k.amount, Method: k.method, Path: k.path, ReqBody: k.body}, k.token, false)
		})
		pending := 0
		for _, op := range answers {
			if nemDrainUnsettled(op) {
				pending++
			}
		}
		if pending == 0 {
			return // nothing started anew: sent again, every key replays
		}
		if why := w.settle(); why != "" {
			w.t.Logf("drain round %d: not settled: %s", round+1, why)
		}
	}
}

// nemDrainUnsettled says whether a drain round's answer leaves its key to
// run anew the next time it is sent: no answer, an answer that asks to
// retry, a request still running, or another request holding the order
// meanwhile (its own round's, perhaps: the drain sends keys at once).
func nemDrainUnsettled(op nemesis.Op) bool {
	return op.Status == 0 || op.Status == http.StatusAccepted || op.RetryAfter != "" ||
		op.Status == http.StatusConflict && problemCode(op.Body) == "order_payment_in_progress"
}

// problemCode is a problem answer's code, "" for any other body.
func problemCode(body []byte) string {
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(body, &p)
	return p.Code
}

// sweep sends every key once more and reads every order, now that the
// world is quiet and every key has been drained: these answers must be
// final.
func (w *nemWorkload) sweep() {
	w.mu.Lock()
	keys, orders := append([]*nemKey(nil), w.keys...), append([]*nemOrder(nil), w.orders...)
	w.mu.Unlock()
	r := nemRand(w.seed, nemClients)
	forEach(2*nemClients, len(keys), func(i int) {
		rr := rand.New(rand.NewPCG(uint64(i), 1))
		w.sendSettled(nemClients, rr, keys[i], true)
		w.lookup(nemClients, rr, keys[i], true)
	})
	for _, o := range orders {
		w.read(nemClients, r, o, true)
	}
}
