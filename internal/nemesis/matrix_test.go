package nemesis

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestMatrixCountsAnswersByFaultAndLink(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	p := Plan{Duration: ms(1000), Faults: []Fault{
		{At: ms(100), For: ms(200), Kind: ResetPeer, Target: "provider-1", Stream: Downstream},
		{At: ms(150), For: ms(100), Kind: Latency, Target: "db-1", Stream: Upstream},
		{At: ms(600), For: ms(100), Kind: ResetPeer, Target: "provider-1", Stream: Upstream},
		{At: ms(500), For: ms(300), Kind: KillReplica, Target: "payd-2"},
	}}
	links := map[string]LinkKind{"provider-1": ProviderLink, "db-1": DBLink}
	ops := []Op{
		opAt(1, OpPay, "o1", "k1", 50, 120, 202, nil),     // reset_peer provider (its start)
		opAt(1, OpPay, "o1", "k1", 200, 220, 0, nil),      // reset_peer provider and latency db
		opAt(2, OpRead, "o1", "", 400, 450, 200, nil),     // no fault
		opAt(2, OpRefund, "o1", "r1", 650, 690, 500, nil), // second reset_peer provider and kill_replica
		opAt(3, OpPay, "o2", "k2", 290, 610, 402, nil),    // both reset_peer windows: counted once; and kill_replica
		opAt(3, OpPay, "o3", "k3", 900, 950, 409, nil),    // no fault
		opAt(3, OpRead, "o3", "", 1200, 1210, 200, nil),   // after the schedule: in no row
	}
	m := Matrix(p, histStart, ops, links)

	type want struct {
		kind    Kind
		link    LinkKind
		faults  int
		ops     int
		answers map[string]int
	}
	wants := []want{
		{Latency, DBLink, 1, 1, map[string]int{"none": 1}},
		{ResetPeer, ProviderLink, 2, 4, map[string]int{"202": 1, "none": 1, "other": 1, "402": 1}},
		{KillReplica, "", 1, 2, map[string]int{"other": 1, "402": 1}},
		{"", "", 0, 2, map[string]int{"200": 1, "409": 1}},
	}
	if len(m.Rows) != len(wants) {
		t.Fatalf("Matrix rows = %+v, want %d rows", m.Rows, len(wants))
	}
	for i, w := range wants {
		r := m.Rows[i]
		if r.Kind != w.kind || r.Link != w.link || r.Faults != w.faults || r.Ops != w.ops {
			t.Errorf("row %d = %s/%s faults=%d ops=%d, want %s/%s faults=%d ops=%d", i, r.Kind, r.Link, r.Faults, r.Ops, w.kind, w.link, w.faults, w.ops)
		}
		for _, o := range Outcomes {
			if r.Answers[o] != w.answers[o] {
				t.Errorf("row %d (%s/%s) answers[%s] = %d, want %d", i, r.Kind, r.Link, o, r.Answers[o], w.answers[o])
			}
		}
	}

	md := m.Markdown()
	for _, line := range []string{
		"| fault | link | faults | requests | 200 | 201 | 202 | 402 | 409 | 503 | none | other |",
		"| latency | db | 1 | 1 | 0 | 0 | 0 | 0 | 0 | 0 | 1 | 0 |",
		"| reset_peer | provider | 2 | 4 | 0 | 0 | 1 | 1 | 0 | 0 | 1 | 1 |",
		"| kill_replica | process | 1 | 2 | 0 | 0 | 0 | 1 | 0 | 0 | 0 | 1 |",
		"| no fault | — | — | 2 | 1 | 0 | 0 | 0 | 1 | 0 | 0 | 0 |",
	} {
		if !strings.Contains(md, line+"\n") {
			t.Errorf("Markdown() = \n%s\nwant the line %q", md, line)
		}
	}
}

// TestShopCountsArrivalsByMerchantFault: an arrival through a faulted
// merchant link is in that fault's row, one through another replica's
// link is not, and one payd sent again later counts as sent again.
func TestShopCountsArrivalsByMerchantFault(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	p := Plan{Duration: 20 * time.Second, Faults: []Fault{
		{At: 2 * time.Second, For: 3 * time.Second, Kind: ResetPeer, Target: "merchant-1", Stream: Downstream},
		{At: 2 * time.Second, For: 3 * time.Second, Kind: Latency, Target: "db-1", Stream: Upstream},
	}}
	arrivals := []Arrival{
		{WebhookID: "e1", Via: "payd-1", At: at(3)},  // under the reset, sent again at 9 s
		{WebhookID: "e2", Via: "payd-2", At: at(3)},  // another replica's link: no fault
		{WebhookID: "e1", Via: "payd-1", At: at(9)},  // the resend
		{WebhookID: "e3", Via: "payd-1", At: at(30)}, // after the schedule
	}
	got := Shop(p, start, arrivals, map[string]string{"payd-1": "merchant-1", "payd-2": "merchant-2"})
	want := ShopMatrix{Rows: []ShopRow{{Kind: ResetPeer, Faults: 1, Arrivals: 1, Resent: 1}, {Arrivals: 2}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Shop = %+v, want %+v", got, want)
	}
	if md := got.Markdown(); !strings.Contains(md, "| reset_peer | merchant | 1 | 1 | 1 |") || !strings.Contains(md, "| no fault | — | — | 2 | 0 |") {
		t.Errorf("Markdown =\n%s", md)
	}
}
