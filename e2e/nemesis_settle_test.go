package e2e

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
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
// key could run anew the next time (nemDrainUnsettled; six rounds at
// most): a key that ran anew may start a payment that turns another key's
// answer (409, in progress) into a run of its own the next time. A key
// whose payment was released unpaid (the recoverer found the charge never
// reached the provider) or whose request failed without completing runs
// again when sent again, so only after this may the sweep expect every
// answer to be final. The keys of one order go one after another
// (nemDrainGroups), orders at once. These are ordinary requests of the
// history: the checker holds them to every invariant.
func (w *nemWorkload) drain() {
	w.mu.Lock()
	groups := nemDrainGroups(w.keys)
	w.mu.Unlock()
	for round := range 6 {
		answers := make([][]nemesis.Op, len(groups))
		forEach(2*nemClients, len(groups), func(g int) {
			for j, k := range groups[g] {
				rr := rand.New(rand.NewPCG(uint64(g)<<16|uint64(j), uint64(round)+2))
				answers[g] = append(answers[g], w.do(nemClients, rr, nemesis.Op{Kind: k.kind, OrderID: k.order.id, Key: k.key, Amount: k.amount,
					Method: k.method, Path: k.path, ReqBody: k.body}, k.token, false))
			}
		})
		pending := 0
		for _, ops := range answers {
			for _, op := range ops {
				if nemDrainUnsettled(op) {
					pending++
				}
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

// nemFailing are the payment methods whose payment fails. A key that pays
// with one runs anew each time it is sent while its order can be paid
// (docs/guarantees.md: a declined request is executed again).
var nemFailing = []string{"pm_declined", "pm_insufficient_funds", "pm_async_fail"}

// nemDrainGroups groups keys by order, each group in the order a client
// settling up sends them, one after another: the keys that can pay the
// order first, those whose payment fails last. Sent at once, a failing
// key could take the order's claim round after round, each time running
// anew and declining, while the keys that would pay it wait on it (409,
// in progress) and never run before the sweep.
func nemDrainGroups(keys []*nemKey) [][]*nemKey {
	at := map[*nemOrder]int{}
	var groups [][]*nemKey
	for _, k := range keys {
		g, ok := at[k.order]
		if !ok {
			g = len(groups)
			at[k.order] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], k)
	}
	failing := func(k *nemKey) bool {
		var body struct {
			PaymentMethod string `json:"payment_method"`
		}
		_ = json.Unmarshal(k.body, &body) // a body that names no method pays nothing
		return k.kind == nemesis.OpPay && slices.Contains(nemFailing, body.PaymentMethod)
	}
	for _, g := range groups {
		slices.SortStableFunc(g, func(a, b *nemKey) int {
			switch fa, fb := failing(a), failing(b); {
			case fa == fb:
				return 0
			case fa:
				return 1
			default:
				return -1
			}
		})
	}
	return groups
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
// final. The keys of one order go one after another, as in the drain.
func (w *nemWorkload) sweep() {
	w.mu.Lock()
	groups, orders := nemDrainGroups(w.keys), append([]*nemOrder(nil), w.orders...)
	w.mu.Unlock()
	r := nemRand(w.seed, nemClients)
	forEach(2*nemClients, len(groups), func(g int) {
		for j, k := range groups[g] {
			rr := rand.New(rand.NewPCG(uint64(g)<<16|uint64(j), 1))
			w.sendSettled(nemClients, rr, k, true)
			w.lookup(nemClients, rr, k, true)
		}
	})
	for _, o := range orders {
		w.read(nemClients, r, o, true)
	}
}

// TestNemDrainGroups: the drain sends an order's keys one after another,
// a key whose payment fails after those that can pay, and keeps the rest
// in the order they were made.
func TestNemDrainGroups(t *testing.T) {
	o1, o2 := &nemOrder{id: "o1"}, &nemOrder{id: "o2"}
	pay := func(o *nemOrder, key, method string) *nemKey {
		return &nemKey{kind: nemesis.OpPay, order: o, key: key, body: []byte(`{"payment_method":"` + method + `"}`)}
	}
	keys := []*nemKey{
		pay(o1, "declined", "pm_declined"),
		{kind: nemesis.OpRefund, order: o2, key: "refund"},
		pay(o1, "ok", "pm_ok"),
		pay(o1, "async-fail", "pm_async_fail"),
		{kind: nemesis.OpCancel, order: o1, key: "cancel"},
		pay(o2, "timeout", "pm_timeout"),
	}
	var got [][]string
	for _, g := range nemDrainGroups(keys) {
		var names []string
		for _, k := range g {
			names = append(names, k.key)
		}
		got = append(got, names)
	}
	want := [][]string{{"ok", "cancel", "declined", "async-fail"}, {"refund", "timeout"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("nemDrainGroups = %v, want %v", got, want)
	}
}
