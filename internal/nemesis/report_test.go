package nemesis

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payd/payd/domain"
)

func TestErrNamesSeedReplayAndSlice(t *testing.T) {
	w := cleanWorld()
	w.Setup, w.Seed = "galera", 42
	addOp(&w, opAt(7, OpRead, "o1", "", 400, 410, 200, orderBody("o1", "pending", "12.30", "", "0.00")))
	err := Check(w).Err()
	if err == nil {
		t.Fatal("Err() = nil, want the linearizability violation")
	}
	msg := err.Error()
	for _, want := range []string{
		"seed=42",
		"PAYD_TEST_NEMESIS=1 PAYD_TEST_GALERA=1 go test -race -count=1 -v -run '^TestNemesis$/galera' ./e2e -payd.nemesis.seed=42",
		InvLinearizable + ": order o1",
		"+   400ms    10ms #27   c7  read    order=o1 → 200 order pending",
		"→ 200 order paid by k1",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("Err() = %s\nwant it to contain %q", msg, want)
		}
	}
}

// TestErrReplaysTheMySQLSetup: the mysql setup runs only where a MariaDB
// is named, so its replay command names the one the run used, without
// its password.
func TestErrReplaysTheMySQLSetup(t *testing.T) {
	w := cleanWorld()
	w.Setup, w.Seed, w.MySQLDSN = "mysql", 9, "mysql://payd:s3cret@db.internal:3306/test"
	addOp(&w, opAt(7, OpRead, "o1", "", 400, 410, 200, orderBody("o1", "pending", "12.30", "", "0.00")))
	msg := Check(w).Err().Error()
	want := "replay: PAYD_TEST_NEMESIS=1 PAYD_TEST_MYSQL_DSN='mysql://payd:xxxxx@db.internal:3306/test' go test -race -count=1 -v -run '^TestNemesis$/mysql' ./e2e -payd.nemesis.seed=9"
	if !strings.Contains(msg, want) || strings.Contains(msg, "s3cret") {
		t.Errorf("Err() = %s\nwant it to contain %q and no password", msg, want)
	}
}

func TestRenderOpNoAnswer(t *testing.T) {
	op := opAt(2, OpPay, "o1", "k1", 30, 80, 0, nil)
	op.ID, op.Err = 5, "context deadline exceeded"
	got := renderOp(op, histStart)
	want := "+    30ms    50ms #5    c2  pay     key=k1 order=o1 → no answer: context deadline exceeded"
	if got != want {
		t.Errorf("renderOp = %q, want %q", got, want)
	}
}

func TestSummary(t *testing.T) {
	ops := []Op{
		{Kind: OpPay, Status: 200}, {Kind: OpPay, Status: 202}, {Kind: OpPay},
		{Kind: OpRead, Status: 200}, {Kind: OpRefund, Status: 503}, {Kind: OpCancel, Status: 409},
	}
	r := Report{Checked: Invariants, Violations: []Violation{{Invariant: InvBooks}, {Invariant: InvBooks}, {Invariant: InvNo5xx}}}
	got := Summary("mysql", 7, map[string]int{"timeout": 2, "latency": 4, "kill_replica": 1, "other": 3}, ops, r)
	want := "nemesis mysql seed=7: faults latency=4 timeout=2 kill_replica=1 other=3; ops 6 (pay 3, cancel 1, refund 1, read 1); " +
		"answers 200=2 202=1 409=1 503=1 none=1; invariants 14 checked, 2 broken"
	if got != want {
		t.Errorf("Summary =\n%s\nwant\n%s", got, want)
	}
	r.Delivered = &Delivered{Events: 9, Arrived: 7, Pending: 1, Failed: 1, Arrivals: 12, Again: 5}
	got = Summary("mysql", 7, nil, nil, r)
	want = "nemesis mysql seed=7: faults none; ops 0 (); answers; events 9 (arrived 7, pending 1, failed 1), arrivals 12 (5 again); invariants 14 checked, 2 broken"
	if got != want {
		t.Errorf("Summary with a merchant =\n%s\nwant\n%s", got, want)
	}
	r.Delivered = nil
	r.Stock = []StockCount{{SKU: "mug", Received: 300, Left: 12, Sold: 280, Holding: 140, Back: 31, Closed: 17}}
	got = Summary("sqlite", 1, nil, []Op{{Kind: OpCreate, Status: 201}, {Kind: OpCreate, Status: 409}}, r)
	want = "nemesis sqlite seed=1: faults none; ops 2 (create 2); answers 201=1 409=1; stock mug received 300, left 12, sold 280 (140 orders), given back 31 (17 orders); invariants 14 checked, 2 broken"
	if got != want {
		t.Errorf("Summary with stock =\n%s\nwant\n%s", got, want)
	}
}

func TestHistoryConcurrentAdd(t *testing.T) {
	var h History
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				h.Add(Op{Client: c, Kind: OpRead, Start: histStart.Add(time.Duration((50-i)*8+c) * time.Millisecond)})
			}
		}()
	}
	wg.Wait()
	ops := h.Ops()
	if len(ops) != 400 {
		t.Fatalf("Ops() = %d ops, want 400", len(ops))
	}
	seen := map[int]bool{}
	for i, op := range ops {
		if op.ID < 1 || op.ID > 400 || seen[op.ID] {
			t.Fatalf("op %d has ID %d: IDs must be 1..400, each once", i, op.ID)
		}
		seen[op.ID] = true
		if i > 0 && op.Start.Before(ops[i-1].Start) {
			t.Fatalf("Ops() not by start at %d", i)
		}
	}
}

func TestOrderOfReadsEveryShape(t *testing.T) {
	for _, tt := range []struct {
		body string
		want domain.OrderStatus
		ok   bool
	}{
		{`{"id":"o","status":"paid"}`, domain.StatusPaid, true},
		{`{"refund":{"id":"r","status":"succeeded"},"order":{"id":"o","status":"refunded"}}`, domain.StatusRefunded, true},
		{`{"order":{"id":"o","status":"pending"},"attempts":[]}`, domain.StatusPending, true},
		{`{"type":"/problems/card_declined","status":402,"code":"card_declined"}`, "", false},
		{`not json`, "", false},
	} {
		o, ok := orderOf([]byte(tt.body))
		if ok != tt.ok || domain.OrderStatus(o.Status) != tt.want {
			t.Errorf("orderOf(%s) = %q, %v, want %q, %v", tt.body, o.Status, ok, tt.want, tt.ok)
		}
	}
}
