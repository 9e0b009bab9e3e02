package nemesis

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/payd/payd/domain"
)

func readOp(c int, order string, start, end int, status domain.OrderStatus) Op {
	return opAt(c, OpRead, order, "", start, end, 200, orderBody(order, string(status), "1.00", "", "0.00"))
}

func withIDs(ops []Op) []Op {
	for i := range ops {
		ops[i].ID = i + 1
	}
	return ops
}

func TestReachableFollowsTheMachine(t *testing.T) {
	tests := []struct {
		from domain.OrderStatus
		want statusSet
	}{
		{domain.StatusPending, setOf(domain.Statuses...)},
		{domain.StatusProcessing, setOf(domain.Statuses...)},
		{domain.StatusAuthorized, setOf(domain.StatusAuthorized, domain.StatusPaid, domain.StatusRefunded, domain.StatusCancelled, domain.StatusExpired)},
		{domain.StatusPaid, setOf(domain.StatusPaid, domain.StatusRefunded)},
		{domain.StatusRefunded, setOf(domain.StatusPaid, domain.StatusRefunded)},
		{domain.StatusCancelled, setOf(domain.StatusCancelled)},
		{domain.StatusExpired, setOf(domain.StatusExpired)},
	}
	for _, tt := range tests {
		if got := reach(setOf(tt.from)); got != tt.want {
			t.Errorf("reach(%s) = %s, want %s", tt.from, got, tt.want)
		}
	}
}

func TestLinearizablePaidThenPending(t *testing.T) {
	ops := withIDs([]Op{readOp(1, "o1", 0, 10, domain.StatusPaid), readOp(2, "o1", 20, 30, domain.StatusPending)})
	v := Linearizable(ops)
	if len(v) != 1 || v[0].Invariant != InvLinearizable || len(v[0].Slice) != 2 {
		t.Fatalf("Linearizable(paid, then pending) = %+v, want one violation over both reads", v)
	}
}

func TestLinearizableOverlappingReadsPass(t *testing.T) {
	// Processing is heard while pending is still being read, and paid after
	// both: pending, processing, paid is an order real time allows.
	ops := withIDs([]Op{
		readOp(1, "o1", 0, 50, domain.StatusProcessing),
		readOp(2, "o1", 10, 60, domain.StatusPending),
		readOp(3, "o1", 20, 40, domain.StatusProcessing),
		readOp(1, "o1", 70, 80, domain.StatusPaid),
		opAt(2, OpRefund, "o1", "r1", 75, 120, 200, []byte(`{"refund":{"id":"r"},"order":{"id":"o1","status":"refunded"}}`)),
		readOp(3, "o1", 90, 100, domain.StatusPaid), // the refund had not landed yet
		readOp(1, "o1", 130, 140, domain.StatusRefunded),
		readOp(1, "o2", 0, 10, domain.StatusCancelled),
	})
	if v := Linearizable(ops); len(v) != 0 {
		t.Fatalf("Linearizable(overlapping reads) = %+v, want none", v)
	}
	// The same pending read sent once paid was heard cannot be placed.
	ops[1].Start, ops[1].End = atMS(85), atMS(88)
	if v := Linearizable(ops); len(v) != 1 {
		t.Fatalf("Linearizable(pending after paid) = %+v, want one violation", v)
	}
}

func TestLinearizableStaleReplayPasses(t *testing.T) {
	// A replayed pay 200 says paid; by then the order may be refunded.
	ops := withIDs([]Op{
		readOp(1, "o1", 0, 10, domain.StatusRefunded),
		opAt(1, OpPay, "o1", "k1", 20, 30, 200, orderBody("o1", "paid", "1.00", "k1", "0.00")),
	})
	if v := Linearizable(ops); len(v) != 0 {
		t.Fatalf("Linearizable(refunded, then a replayed paid) = %+v, want none", v)
	}
}

func TestLinearizableCancelledThenPaid(t *testing.T) {
	ops := withIDs([]Op{
		opAt(1, OpCancel, "o1", "c1", 0, 10, 200, orderBody("o1", "cancelled", "1.00", "", "0.00")),
		opAt(2, OpPay, "o1", "k1", 20, 30, 200, orderBody("o1", "paid", "1.00", "k1", "0.00")),
	})
	if v := Linearizable(ops); len(v) != 1 {
		t.Fatalf("Linearizable(cancelled, then paid) = %+v, want one violation", v)
	}
}

func TestLinearizableShrinksToAMinimalSlice(t *testing.T) {
	// Many reads of two orders; o1 is heard pending once after paid.
	var ops []Op
	for i := range 20 {
		ops = append(ops, readOp(i%4, "o1", i*10, i*10+15, domain.StatusPending))
		ops = append(ops, readOp(i%4, "o2", i*10, i*10+5, domain.StatusPending))
	}
	ops = append(ops, readOp(1, "o1", 300, 310, domain.StatusProcessing), readOp(2, "o1", 320, 330, domain.StatusPaid))
	for i := range 10 {
		ops = append(ops, readOp(i%4, "o1", 340+i*10, 345+i*10, domain.StatusPaid))
	}
	ops = append(ops, readOp(3, "o1", 500, 510, domain.StatusPending))
	ops = withIDs(ops)
	v := Linearizable(ops)
	if len(v) != 1 {
		t.Fatalf("Linearizable = %d violations (%+v), want 1 (o1 only)", len(v), v)
	}
	if got := len(v[0].Slice); got >= 33 || got != 2 {
		t.Fatalf("shrunk slice has %d ops, want 2 of o1's 33: %+v", got, v[0].Slice)
	}
	last := v[0].Slice[1]
	if last.ID != len(ops) {
		t.Errorf("shrunk slice ends with #%d, want the late pending read #%d", last.ID, len(ops))
	}
	for _, op := range v[0].Slice {
		if op.OrderID != "o1" {
			t.Errorf("slice holds an op of %s: %s", op.OrderID, fmt.Sprint(op.ID))
		}
	}
}

func TestLinearizableIgnoresNonObservations(t *testing.T) {
	// No answer, a 202 and a problem say nothing the model checks.
	ops := withIDs([]Op{
		readOp(1, "o1", 0, 10, domain.StatusPaid),
		opAt(1, OpRead, "o1", "", 20, 30, 0, nil),
		opAt(1, OpPay, "o1", "k", 20, 30, 202, orderBody("o1", "processing", "1.00", "k", "0.00")),
		opAt(1, OpPay, "o1", "k2", 20, 30, 409, problemBody(409, "order_already_paid", "r")),
	})
	if v := Linearizable(ops); len(v) != 0 {
		t.Fatalf("Linearizable = %+v, want none", v)
	}
}

// TestLinearizableAcceptsTrueHistories runs the order machine for real —
// random events at random times — and has concurrent clients read each
// order, every read seeing the status at one moment inside its request.
// Such a history is linearizable by construction: the checker must agree.
func TestLinearizableAcceptsTrueHistories(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 1))
	var ops []Op
	for n := range 30 {
		order := fmt.Sprintf("o%d", n)
		// The order's life: a status from each change's time on.
		type change struct {
			at     int
			status domain.OrderStatus
		}
		life := []change{{0, domain.StatusPending}}
		at := 0
		for range 8 {
			at += 1 + r.IntN(40)
			cur := life[len(life)-1].status
			var next []domain.OrderStatus
			for _, e := range domain.OrderMachine.Events() {
				if to, ok := domain.OrderMachine.Next(cur, e); ok {
					next = append(next, to)
				}
			}
			if len(next) == 0 {
				break
			}
			life = append(life, change{at, next[r.IntN(len(next))]})
		}
		statusAt := func(ms int) domain.OrderStatus {
			s := life[0].status
			for _, c := range life {
				if c.at <= ms {
					s = c.status
				}
			}
			return s
		}
		for c := range 4 {
			for start := r.IntN(10); start < at+20; start += 1 + r.IntN(30) {
				end := start + r.IntN(25)
				seen := start + r.IntN(end-start+1)
				ops = append(ops, readOp(c, order, start, end, statusAt(seen)))
			}
		}
	}
	ops = withIDs(ops)
	if v := Linearizable(ops); len(v) != 0 {
		t.Fatalf("Linearizable(a true history of %d reads) = %d violations, first: %s", len(ops), len(v), v[0].Detail)
	}
}
