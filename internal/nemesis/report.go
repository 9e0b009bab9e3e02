package nemesis

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Report is what Check found: the invariants it proved and those that
// broke, with the seed that replays the run.
type Report struct {
	Setup      string // the TestNemesis subtest, for the replay command
	Seed       int64
	MySQLDSN   string    // the mysql setup's MariaDB, for the replay command
	Start      time.Time // the history's first request: slices show times from it
	Checked    []string
	Violations []Violation
	// Delivered is what InvDelivered counted; nil when the world had no
	// merchant.
	Delivered *Delivered
	// Stock is what InvStock counted, by product.
	Stock []StockCount
}

// Err is nil when nothing broke. Otherwise it says the seed, the command
// that replays it, and each violation with the part of the history that
// shows it, one request per line.
func (r Report) Err() error {
	if len(r.Violations) == 0 {
		return nil
	}
	run, env := "^TestNemesis$", "PAYD_TEST_NEMESIS=1"
	if r.Setup != "" {
		run += "/" + r.Setup
	}
	switch {
	case r.Setup == "galera":
		env += " PAYD_TEST_GALERA=1" // scripts/galera.sh's cluster, started if need be
	case r.MySQLDSN != "":
		env += " PAYD_TEST_MYSQL_DSN='" + redactDSN(r.MySQLDSN) + "'"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "nemesis seed=%d: %d of %d invariants broken (%d violations)\n", r.Seed, len(r.broken()), len(r.Checked), len(r.Violations))
	fmt.Fprintf(&b, "replay: %s go test -race -count=1 -v -run '%s' ./e2e -payd.nemesis.seed=%d\n", env, run, r.Seed)
	for i, v := range r.Violations {
		if i == maxViolations {
			fmt.Fprintf(&b, "… and %d more violations\n", len(r.Violations)-i)
			break
		}
		fmt.Fprintf(&b, "%d. %s: %s\n", i+1, v.Invariant, v.Detail)
		start := r.Start
		if start.IsZero() && len(v.Slice) > 0 {
			start = v.Slice[0].Start
		}
		for j, op := range v.Slice {
			if j == maxSliceOps {
				fmt.Fprintf(&b, "   … and %d more requests\n", len(v.Slice)-j)
				break
			}
			fmt.Fprintf(&b, "   %s\n", renderOp(op, start))
		}
	}
	return errors.New(strings.TrimRight(b.String(), "\n"))
}

// redactDSN is a database URL without its password: the replay command
// is printed to a CI log.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(a MariaDB URL)"
	}
	return u.Redacted()
}

// An error stays readable: it shows this many violations, and this many
// requests of each slice (a slice keeps them all).
const (
	maxViolations = 30
	maxSliceOps   = 60
)

// broken lists the invariants with at least one violation.
func (r Report) broken() []string {
	var out []string
	for _, v := range r.Violations {
		if !slices.Contains(out, v.Invariant) {
			out = append(out, v.Invariant)
		}
	}
	return out
}

// renderOp is one request on one line: when it was sent and how long it
// took (ms from start), who sent what under which key, and what came back.
func renderOp(op Op, start time.Time) string {
	at := op.Start.Sub(start).Milliseconds()
	var took int64
	if !op.End.IsZero() {
		took = op.End.Sub(op.Start).Milliseconds()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "+%6dms %5dms #%-4d c%-2d %-7s", at, took, op.ID, op.Client, op.Kind)
	if op.Key != "" {
		fmt.Fprintf(&b, " key=%s", op.Key)
	}
	if op.OrderID != "" {
		fmt.Fprintf(&b, " order=%s", op.OrderID)
	}
	if op.Amount != "" {
		fmt.Fprintf(&b, " amount=%s", op.Amount)
	}
	if op.Settled {
		b.WriteString(" (sweep)")
	}
	if op.Status == 0 {
		fmt.Fprintf(&b, " → no answer: %s", op.Err)
		return b.String()
	}
	fmt.Fprintf(&b, " → %d", op.Status)
	if op.RetryAfter != "" {
		fmt.Fprintf(&b, " Retry-After=%s", op.RetryAfter)
	}
	fmt.Fprintf(&b, " %s", brief(op.Body))
	return b.String()
}

// brief describes a body in a few words: a problem's code, an order's
// status, a record's status, or its first bytes.
func brief(body []byte) string {
	if code := codeOf(body); code != "" {
		return code
	}
	if o, ok := orderOf(body); ok {
		s := "order " + o.Status
		if r := refundOf(body); r != "" {
			s = "refund " + r + ", " + s
		}
		if o.PayRequestID != nil {
			s += " by " + *o.PayRequestID
		}
		return s
	}
	const limit = 60
	s := strings.Join(strings.Fields(string(body)), " ")
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return strconv.Quote(s)
}

// refundOf is the status of the refund a refund's answer carries, "" for
// any other body.
func refundOf(body []byte) string {
	var b struct {
		Refund *struct {
			Status string `json:"status"`
			Amount string `json:"amount"`
		} `json:"refund"`
	}
	if json.Unmarshal(body, &b) != nil || b.Refund == nil {
		return ""
	}
	return strings.TrimSpace(b.Refund.Status + " " + b.Refund.Amount)
}

// faultOrder is the order in which a summary lists fault kinds: wire
// faults, then process faults, as the nemesis names them. Kinds it does
// not list follow, sorted.
var faultOrder = []string{"latency", "timeout", "reset_peer", "slow_close", "bandwidth", "limit_data",
	"kill_replica", "kill_galera_node", "redis_failover", "db_restart"}

func faultNames(faults map[string]int) []string {
	var out []string
	for _, k := range faultOrder {
		if _, ok := faults[k]; ok {
			out = append(out, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(faults)) {
		if !slices.Contains(faultOrder, k) {
			out = append(out, k)
		}
	}
	return out
}

// Summary is the one line each run prints: faults injected by kind,
// operations by kind, answers by status, and the invariants checked and
// broken.
func Summary(setup string, seed int64, faults map[string]int, ops []Op, r Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "nemesis %s seed=%d: faults", setup, seed)
	if len(faults) == 0 {
		b.WriteString(" none")
	}
	for _, k := range faultNames(faults) {
		fmt.Fprintf(&b, " %s=%d", k, faults[k])
	}
	kinds := map[OpKind]int{}
	answers := map[int]int{}
	for _, op := range ops {
		kinds[op.Kind]++
		answers[op.Status]++
	}
	var per []string
	for _, k := range opKinds {
		if kinds[k] > 0 {
			per = append(per, fmt.Sprintf("%s %d", k, kinds[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		if !slices.Contains(opKinds, k) {
			per = append(per, fmt.Sprintf("%s %d", k, kinds[k]))
		}
	}
	fmt.Fprintf(&b, "; ops %d (%s); answers", len(ops), strings.Join(per, ", "))
	for _, st := range slices.Sorted(maps.Keys(answers)) {
		if st != 0 {
			fmt.Fprintf(&b, " %d=%d", st, answers[st])
		}
	}
	if answers[0] > 0 {
		fmt.Fprintf(&b, " none=%d", answers[0])
	}
	if d := r.Delivered; d != nil {
		fmt.Fprintf(&b, "; events %d (arrived %d, pending %d, failed %d), arrivals %d (%d again", d.Events, d.Arrived, d.Pending, d.Failed, d.Arrivals, d.Again)
		if d.Late > 0 {
			fmt.Fprintf(&b, ", %d after payd was read", d.Late)
		}
		b.WriteString(")")
	}
	for _, s := range r.Stock {
		fmt.Fprintf(&b, "; stock %s received %d, left %d, sold %d (%d orders), given back %d (%d orders)", s.SKU, s.Received, s.Left, s.Sold, s.Holding, s.Back, s.Closed)
	}
	fmt.Fprintf(&b, "; invariants %d checked, %d broken", len(r.Checked), len(r.broken()))
	return b.String()
}
