package nemesis

import (
	"fmt"
	"math/bits"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/payd/payd/domain"
)

// statusSet is a set of order statuses, one bit per status of
// domain.OrderMachine, in the machine's order.
type statusSet uint32

var machineStatuses = domain.OrderMachine.Statuses()

func setOf(ss ...domain.OrderStatus) statusSet {
	var s statusSet
	for _, st := range ss {
		if i := slices.Index(machineStatuses, st); i >= 0 {
			s |= 1 << i
		}
	}
	return s
}

func (s statusSet) String() string {
	var names []string
	for i, st := range machineStatuses {
		if s&(1<<i) != 0 {
			names = append(names, string(st))
		}
	}
	return strings.Join(names, "|")
}

// reachable[i] is every status the order machine can take status i to by
// any number of events (none included): what payd's unseen work — the
// recoverer, webhooks, expiry, requests nobody observed — may do to an
// order between two observations. It is computed from the machine's table,
// so it cannot drift from it.
var reachable = func() []statusSet {
	m := domain.OrderMachine
	out := make([]statusSet, len(machineStatuses))
	for i, st := range machineStatuses {
		seen := setOf(st)
		for queue := []domain.OrderStatus{st}; len(queue) > 0; queue = queue[1:] {
			for _, e := range m.Events() {
				if to, ok := m.Next(queue[0], e); ok && seen&setOf(to) == 0 {
					seen |= setOf(to)
					queue = append(queue, to)
				}
			}
		}
		out[i] = seen
	}
	return out
}()

// reach is every status reachable from some status of s.
func reach(s statusSet) statusSet {
	var out statusSet
	for i := range machineStatuses {
		if s&(1<<i) != 0 {
			out |= reachable[i]
		}
	}
	return out
}

// observation is what one answer says of its order's status at some
// moment within the request: one of Allowed.
type observation struct {
	Order   string
	Allowed statusSet
	Op      int // index into the ops given to Linearizable
}

// observe returns what op says of its order's status, if anything. A read
// answers the status as it was at one moment. An answer payd may replay
// from its store (pay, cancel, refund) may be older than the request:
// it says the order was in that status once, so by the end of the request
// it is in a status reachable from it.
func observe(op Op) (domain.OrderStatus, statusSet, bool) {
	if op.Status != http.StatusOK || op.OrderID == "" {
		return "", 0, false
	}
	switch op.Kind {
	case OpRead, OpPay, OpCancel, OpRefund:
	default:
		return "", 0, false
	}
	o, ok := orderOf(op.Body)
	st := domain.OrderStatus(o.Status)
	if !ok || !domain.OrderMachine.Valid(st) || (o.ID != "" && o.ID != op.OrderID) {
		return "", 0, false
	}
	if op.Kind == OpRead {
		return st, setOf(st), true
	}
	return st, reach(setOf(st)), true
}

// orderModel is the order machine as porcupine's sequential specification.
// The state is the set of statuses the order may be in, given what was
// observed so far (the machine is deterministic, but the unseen
// transitions between observations are not): each observation narrows it to
// the statuses reachable from it that the answer allows.
var orderModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byOrder := map[string][]porcupine.Operation{}
		var orders []string
		for _, op := range history {
			id := op.Input.(observation).Order
			if _, ok := byOrder[id]; !ok {
				orders = append(orders, id)
			}
			byOrder[id] = append(byOrder[id], op)
		}
		out := make([][]porcupine.Operation, 0, len(orders))
		for _, id := range orders {
			out = append(out, byOrder[id])
		}
		return out
	},
	Init: func() any { return setOf(domain.OrderMachine.Initial()...) },
	Step: func(state, input, _ any) (bool, any) {
		next := reach(state.(statusSet)) & input.(observation).Allowed
		return next != 0, next
	},
	Hash:              func(state any) uint64 { return uint64(state.(statusSet)) },
	DescribeOperation: func(input, _ any) string { return input.(observation).Allowed.String() },
	DescribeState:     func(state any) string { return state.(statusSet).String() },
}

// linearTimeout bounds one porcupine run; per-order histories of this
// model are small and decide in milliseconds.
const linearTimeout = 30 * time.Second

// Linearizable checks, per order, that the statuses payd's answers
// observed can be placed in one order consistent with real time (an answer
// heard before another request was sent comes first) in which each
// follows from the one before through domain.OrderMachine. Each violation
// carries a minimal set of the order's operations that cannot be ordered
// so.
func Linearizable(ops []Op) []Violation {
	var all []porcupine.Operation
	for i, op := range ops {
		if _, allowed, ok := observe(op); ok {
			all = append(all, toPorcupine(op, observation{Order: op.OrderID, Allowed: allowed, Op: i}))
		}
	}
	if len(all) == 0 || porcupine.CheckOperationsTimeout(orderModel, all, linearTimeout) == porcupine.Ok {
		return nil
	}
	var out []Violation
	for _, part := range orderModel.Partition(all) {
		res := porcupine.CheckOperationsTimeout(orderModel, part, linearTimeout)
		if res == porcupine.Ok {
			continue
		}
		order := part[0].Input.(observation).Order
		if res == porcupine.Unknown {
			out = append(out, Violation{Invariant: InvLinearizable, Slice: opsOf(ops, part),
				Detail: fmt.Sprintf("order %s: undecided within %v over %d observations", order, linearTimeout, len(part))})
			continue
		}
		least := shrink(part)
		slice := opsOf(ops, least)
		out = append(out, Violation{Invariant: InvLinearizable, Slice: slice,
			Detail: fmt.Sprintf("order %s: no order of these observations follows the order machine: %s", order, describeObservations(slice))})
	}
	return out
}

func toPorcupine(op Op, ob observation) porcupine.Operation {
	end := op.End
	if end.Before(op.Start) {
		end = op.Start
	}
	return porcupine.Operation{ClientId: op.Client, Input: ob, Call: op.Start.UnixNano(), Return: end.UnixNano()}
}

// shrink removes operations from a failing history while it still fails:
// first in chunks, then one at a time, so that what is left is a minimal
// failing set (taking out any one of its operations makes it pass).
func shrink(part []porcupine.Operation) []porcupine.Operation {
	fails := func(h []porcupine.Operation) bool {
		return porcupine.CheckOperationsTimeout(orderModel, h, linearTimeout) == porcupine.Illegal
	}
	cur := slices.Clone(part)
	for size := len(cur) / 2; size >= 1; size /= 2 {
		for i := 0; i < len(cur); {
			end := min(i+size, len(cur))
			try := slices.Concat(cur[:i], cur[end:])
			if len(try) > 0 && fails(try) {
				cur = try
				continue
			}
			i = end
		}
	}
	return cur
}

// opsOf returns the recorded operations behind porcupine's, by start.
func opsOf(ops []Op, part []porcupine.Operation) []Op {
	out := make([]Op, 0, len(part))
	for _, p := range part {
		out = append(out, ops[p.Input.(observation).Op])
	}
	sortOps(out)
	return out
}

func describeObservations(slice []Op) string {
	parts := make([]string, 0, len(slice))
	for _, op := range slice {
		st, allowed, _ := observe(op)
		what := string(st)
		if bits.OnesCount32(uint32(allowed)) > 1 {
			what += " or later"
		}
		parts = append(parts, fmt.Sprintf("%s#%d says %s", op.Kind, op.ID, what))
	}
	return strings.Join(parts, ", ")
}
