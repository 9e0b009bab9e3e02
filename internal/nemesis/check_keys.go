package nemesis

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/payd/payd/domain"
)

// The answer invariants: under a key, one final answer byte for byte and
// nothing pending after it (GET /v1/requests included); no 5xx but 503
// with Retry-After.

func (c *checker) no5xx() []Violation {
	var out []Violation
	for _, op := range c.ops {
		if op.Status >= 500 && (op.Status != http.StatusServiceUnavailable || op.RetryAfter == "") {
			out = append(out, Violation{Invariant: InvNo5xx, Slice: []Op{op},
				Detail: fmt.Sprintf("%s #%d answered %d %s (Retry-After %q)", op.Kind, op.ID, op.Status, codeOf(op.Body), op.RetryAfter)})
		}
	}
	return out
}

// keys checks each key's answers: the final ones agree (InvSameFinal) and
// nothing pending follows them (InvPendingFirst). Keys are told apart by
// kind as well: payd scopes keys per caller, and the clients never use one
// key for two kinds of request.
func (c *checker) keys() []Violation {
	type kk struct {
		kind OpKind
		key  string
	}
	byKey := map[kk][]Op{}
	var order []kk
	for _, op := range c.ops {
		if !keyed(op) {
			continue
		}
		k := kk{op.Kind, op.Key}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], op)
	}
	var out []Violation
	for _, k := range order {
		out = append(out, checkKey(byKey[k])...)
	}
	for _, op := range c.ops {
		if cl := classOf(op); op.Settled && !keyed(op) && !cl.final() {
			out = append(out, Violation{Invariant: InvPendingFirst, Slice: []Op{op},
				Detail: fmt.Sprintf("%s #%d of the final sweep answered %s (%d)", op.Kind, op.ID, cl, op.Status)})
		}
	}
	out = append(out, c.lookups(func(key string) []Op {
		for _, kind := range []OpKind{OpPay, OpCancel, OpRefund, OpShip} {
			if ops, ok := byKey[kk{kind, key}]; ok {
				return ops
			}
		}
		return nil
	})...)
	return out
}

// checkKey judges the answers under one key (ops by start). A violation's
// slice is the smallest part of the key's history that shows it: the
// answers that break the rule, after the key's first final answer when the
// rule is about that answer.
func checkKey(ops []Op) (out []Violation) {
	// One violation per invariant the key breaks, saying every way it does.
	var broken []string
	why := map[string][]string{}
	shown := map[string][]Op{}
	first := -1 // the first binding answer heard under the key: from then on the key has its one answer
	// bad records that the answers shown break inv, and how.
	bad := func(inv string, show []Op, format string, args ...any) {
		if why[inv] == nil {
			broken = append(broken, inv)
		}
		why[inv] = append(why[inv], fmt.Sprintf(format, args...))
		for _, op := range show {
			if !slices.ContainsFunc(shown[inv], func(o Op) bool { return o.ID == op.ID }) {
				shown[inv] = append(shown[inv], op)
			}
		}
	}
	defer func() {
		for _, inv := range broken {
			slices.SortStableFunc(shown[inv], func(a, b Op) int { return a.Start.Compare(b.Start) })
			out = append(out, Violation{Invariant: inv, Slice: shown[inv], Detail: fmt.Sprintf("key %s: %s", ops[0].Key, strings.Join(why[inv], "; "))})
		}
	}()
	for i, op := range ops {
		if classOf(op) == ansBinding && (first < 0 || op.End.Before(ops[first].End)) {
			first = i
		}
	}
	for _, op := range ops {
		cl := classOf(op)
		switch {
		case op.Settled && !cl.final():
			bad(InvPendingFirst, []Op{op}, "%s #%d of the final sweep answered %s (%d)", op.Kind, op.ID, cl, op.Status)
		case op.Status == http.StatusConflict && codeOf(op.Body) == "idempotency_key_in_use" && op.RetryAfter == "":
			bad(InvPendingFirst, []Op{op}, "%s #%d answered 409 idempotency_key_in_use without Retry-After", op.Kind, op.ID)
		case op.Status == http.StatusAccepted && op.RetryAfter == "":
			bad(InvPendingFirst, []Op{op}, "%s #%d answered 202 without Retry-After", op.Kind, op.ID)
		}
	}
	if first < 0 {
		return nil
	}
	f := ops[first]
	for i, op := range ops {
		cl := classOf(op)
		after := op.Start.After(f.End) // sent once the key's answer was known
		sameRequest := op.Method == f.Method && op.Path == f.Path && sameJSON(op.ReqBody, f.ReqBody)
		switch {
		case i == first || cl == ansNone || cl == ansTransient:
		case !sameRequest:
			if after && op.Status != http.StatusUnprocessableEntity {
				bad(InvSameFinal, []Op{f, op}, "%s #%d sent another request under the key after its answer and got %d, not 422", op.Kind, op.ID, op.Status)
			}
		case cl == ansBinding || cl.final() && after:
			if op.Status != f.Status || !bytes.Equal(op.Body, f.Body) {
				bad(InvSameFinal, []Op{f, op}, "%s #%d answered %d %s, but the key's first final answer (#%d) is %d %s",
					op.Kind, op.ID, op.Status, brief(op.Body), f.ID, f.Status, brief(f.Body))
			}
		case cl == ansPending && after:
			bad(InvPendingFirst, []Op{f, op}, "%s #%d, sent after #%d's final answer %d, answered %d (not final)", op.Kind, op.ID, f.ID, f.Status, op.Status)
		}
	}
	return nil
}

// lookups checks GET /v1/requests/{key}: a record that says it succeeded
// stores the key's final answer, byte for byte.
func (c *checker) lookups(ofKey func(string) []Op) []Violation {
	var out []Violation
	for _, op := range c.ops {
		if op.Kind != OpRequest || op.Status != http.StatusOK {
			continue
		}
		var rec struct {
			Status   string `json:"status"`
			Response *struct {
				Status int             `json:"status"`
				Body   json.RawMessage `json:"body"`
			} `json:"response"`
		}
		if json.Unmarshal(op.Body, &rec) != nil || rec.Status != string(domain.RecordSucceeded) || rec.Response == nil {
			continue
		}
		keyOps := ofKey(op.Key)
		var f *Op
		for i, k := range keyOps {
			if classOf(k) == ansBinding && (f == nil || k.End.Before(f.End)) {
				f = &keyOps[i]
			}
		}
		if f == nil {
			continue // the key's answer was never heard: nothing to compare
		}
		if rec.Response.Status != f.Status || !sameJSON(rec.Response.Body, f.Body) {
			out = append(out, Violation{Invariant: InvSameFinal, Slice: []Op{*f, op},
				Detail: fmt.Sprintf("key %s: GET /v1/requests #%d stores %d %s, but the key answered %d %s (#%d)",
					op.Key, op.ID, rec.Response.Status, brief(rec.Response.Body), f.Status, brief(f.Body), f.ID)})
		}
	}
	return out
}

// sameJSON compares two JSON documents byte for byte once compacted: the
// lookup embeds the stored body in its own JSON.
func sameJSON(a, b []byte) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
