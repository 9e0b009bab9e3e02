package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/payd/payd/internal/nemesis"
)

// What a failed or long run prints beside the checker's report: the rows
// and logs of the orders a violation names, a soak's per-minute figures,
// the orders that did not settle.

// dump logs, for the orders the violations name (at most five), what the
// provider holds, what payd recorded and what the clients heard: what a
// reader of the failure needs beside the checker's slices.
func (w *nemWorkload) dump(rep nemesis.Report, wd nemesis.World) {
	named := map[string]bool{}
	var order []string
	note := func(id string) {
		if _, ok := wd.Orders[id]; ok && !named[id] && len(order) < 5 {
			named[id] = true
			order = append(order, id)
		}
	}
	// The orders a violation's detail names first: a slice may hold the
	// requests of many orders.
	for _, v := range rep.Violations {
		for id := range wd.Orders {
			if strings.Contains(v.Detail, id) {
				note(id)
			}
		}
	}
	for _, v := range rep.Violations {
		for _, op := range v.Slice {
			note(op.OrderID)
		}
	}
	for _, id := range order {
		var b strings.Builder
		st := wd.Orders[id]
		fmt.Fprintf(&b, "order %s: payd says %s, amount %s, refunded %s, paid by charge %q\n", id, st.Status, st.Amount, st.Refunded, st.ChargeID)
		for _, c := range wd.Charges {
			if c.OrderID == id {
				fmt.Fprintf(&b, "  provider charge %s (attempt %s): succeeded=%v amount %s refunded %s at %s\n", c.ID, c.Key, c.Succeeded, c.Amount, c.Refunded, c.Created.Format("15:04:05.000"))
			}
		}
		tl := w.s.reps[0].current().timeline(id)
		for _, a := range tl.Attempts {
			fmt.Fprintf(&b, "  payd attempt %s: request %s %s charge %s\n", a.Id, a.RequestId, a.Status, deref(a.ProviderChargeId))
		}
		var rows []struct{ ID, RequestID, Status, FailureCode, CreatedAt, UpdatedAt string }
		if err := w.s.db.Gorm().Raw(`SELECT id, request_id, status, COALESCE(failure_code, '') AS failure_code, created_at, updated_at
			FROM payment_attempts WHERE order_id = ? ORDER BY created_at`, id).Scan(&rows).Error; err != nil {
			fmt.Fprintf(&b, "  payd attempts: %v\n", err)
		}
		for _, a := range rows {
			fmt.Fprintf(&b, "  payd attempt row %+v\n", a)
		}
		var recs []struct {
			IdemKey, Status, CompletedBy, UpdatedAt string
			ResponseStatus                          int
		}
		if err := w.s.db.Gorm().Raw(`SELECT idem_key, status, COALESCE(completed_by, '') AS completed_by, response_status, updated_at
			FROM idempotency_records WHERE order_id = ?`, id).Scan(&recs).Error; err != nil {
			fmt.Fprintf(&b, "  payd records: %v\n", err)
		}
		for _, rc := range recs {
			fmt.Fprintf(&b, "  payd record %+v\n", rc)
		}
		for _, e := range tl.Ledger {
			fmt.Fprintf(&b, "  payd ledger %s %s %s %s source %s at %s\n", e.Kind, e.Reference, e.Amount, e.ChargeId, e.Source, e.CreatedAt.Format("15:04:05.000"))
		}
		// The ledger's entries of the order's charges, under whichever
		// order they were booked.
		for _, c := range wd.Charges {
			if c.OrderID != id {
				continue
			}
			var entries []struct{ OrderID, Kind, Reference, Source, CreatedAt string }
			if err := w.s.db.Gorm().Raw(`SELECT order_id, kind, reference, source, created_at FROM ledger_entries WHERE charge_id = ? ORDER BY created_at`,
				c.ID).Scan(&entries).Error; err != nil {
				fmt.Fprintf(&b, "  payd ledger of charge %s: %v\n", c.ID, err)
			}
			for _, e := range entries {
				fmt.Fprintf(&b, "  payd ledger row of charge %s: %+v\n", c.ID, e)
			}
		}
		for _, e := range tl.Audit {
			fmt.Fprintf(&b, "  payd audit %s by %s: %d at %s\n", e.Action, e.Actor, e.Result, e.CreatedAt.Format("15:04:05.000"))
		}
		for _, rf := range tl.Refunds {
			fmt.Fprintf(&b, "  payd refund %+v\n", rf)
		}
		for _, e := range st.Told {
			fmt.Fprintf(&b, "  payd event %s %s seq %d shows %s\n", e.ID, e.Type, e.Seq, e.Status)
		}
		var dels []struct {
			EventID, Status string
			Attempts        int
		}
		if err := w.s.db.Gorm().Raw(`SELECT event_id, status, attempts FROM notify_deliveries WHERE order_id = ?`, id).Scan(&dels).Error; err != nil {
			fmt.Fprintf(&b, "  payd deliveries: %v\n", err)
		}
		for _, d := range dels {
			fmt.Fprintf(&b, "  payd delivery %+v\n", d)
		}
		if wd.Merchant != nil {
			for _, a := range wd.Merchant.Arrivals {
				if a.OrderID == id {
					fmt.Fprintf(&b, "  the shop heard %s at %s via %s verified=%v body %.12s\n", a.WebhookID, a.At.Format("15:04:05.000"), a.Via, a.Verified, a.BodyHash)
				}
			}
		}
		for _, op := range wd.Ops {
			if op.OrderID == id {
				fmt.Fprintf(&b, "  %s–%s client %d %s %s key=%s settled=%v -> %d %s %s\n", op.Start.Format("15:04:05.000"), op.End.Format("15:04:05.000"),
					op.Client, op.Kind, op.Path, op.Key, op.Settled, op.Status, truncate(op.Body), op.Err)
			}
		}
		w.t.Log(b.String())
	}
	for _, line := range w.s.errorLines(30) {
		w.t.Log(line)
	}
}

// soakChartPath is where a soak's chart goes: the file v names
// (PAYD_NEMESIS_SVG), a relative one from the repository's root, where
// the documented command runs (go test runs ./e2e in its own folder), or
// else one under the system's temporary directory. A folder that does
// not exist is an error, said before the soak rather than after it.
func soakChartPath(v, setup string) (string, error) {
	if v == "" {
		return filepath.Join(os.TempDir(), "payd-nemesis-"+setup+".svg"), nil
	}
	if !filepath.IsAbs(v) {
		v = filepath.Join("..", v)
	}
	v, err := filepath.Abs(v)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(filepath.Dir(v)); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("PAYD_NEMESIS_SVG: the folder of %s does not exist", v)
	}
	return v, nil
}

// soakReport prints a soak's per-minute figures, charts them (to the
// file soakChartPath said) and fails on growth: a reading taken once the
// load stopped and drained, against the first minute after warm-up.
func (w *nemWorkload) soakReport(sampler *nemesis.Sampler) {
	t := w.t
	w.http.CloseIdleConnections() // each idle keep-alive holds a goroutine and a socket of payd's
	time.Sleep(5 * time.Second)
	after := sampler.Sample(context.Background())
	minutes := sampler.Minutes()
	for _, m := range minutes {
		line := fmt.Sprintf("minute %3d: ops %6d p99 %8v", m.Minute, m.Ops, m.P99.Round(time.Millisecond))
		for _, r := range w.s.reps {
			line += fmt.Sprintf(" | %s rss %.1fMiB goroutines %d files %d pools %v", r.name, float64(m.RSS[r.name])/(1<<20), m.Goroutines[r.name], m.OpenFiles[r.name], m.Pools[r.name])
		}
		t.Log(line)
		fmt.Println(line)
	}
	path, err := soakChartPath(os.Getenv("PAYD_NEMESIS_SVG"), w.s.name)
	if err != nil {
		t.Fatal(err) // checked before the soak began
	}
	var svg bytes.Buffer
	if err := nemesis.WriteSVG(&svg, minutes[:len(minutes)-1]); err != nil {
		t.Errorf("soak chart: %v", err)
	} else if err := os.WriteFile(path, svg.Bytes(), 0o644); err != nil {
		t.Errorf("soak chart: %v", err)
	} else {
		t.Logf("soak chart: %s", path)
	}
	if len(minutes) < 3 {
		t.Errorf("soak: %d readings, too few to compare", len(minutes))
		return
	}
	for _, g := range nemesis.Growth(minutes[1], after) {
		t.Errorf("soak %s: grew and did not come back: %s", w.s.name, g)
	}
}

// stuck logs, for the orders still processing (at most five), payd's
// attempts as stored, what the provider was asked about each and holds,
// and what payd logged about them: what a reader of a run that did not
// settle needs.
func (w *nemWorkload) stuck() {
	var ids []string
	// The setup's database is its own: every order in it is the clients'.
	if err := w.s.db.Gorm().Raw(`SELECT id FROM orders WHERE status = 'processing' LIMIT 5`).Scan(&ids).Error; err != nil {
		w.t.Logf("stuck orders: %v", err)
		return
	}
	for _, id := range ids {
		var b strings.Builder
		fmt.Fprintf(&b, "order %s still processing\n", id)
		var rows []map[string]any
		if err := w.s.db.Gorm().Raw(`SELECT * FROM payment_attempts WHERE order_id = ? ORDER BY created_at`, id).Scan(&rows).Error; err != nil {
			fmt.Fprintf(&b, "  attempts: %v\n", err)
		}
		for _, a := range rows {
			fmt.Fprintf(&b, "  attempt %v\n", a)
			aid, _ := a["id"].(string)
			if w.s.stripe != nil {
				fmt.Fprintf(&b, "    asked at Stripe: %v\n", w.s.stripe.fake.CallsFor(aid))
			}
			for _, r := range w.s.reps {
				r.mu.Lock()
				procs := append([]*paydProc(nil), r.procs...)
				r.mu.Unlock()
				for _, p := range procs {
					for line := range strings.SplitSeq(p.logs.String(), "\n") {
						if strings.Contains(line, aid) {
							fmt.Fprintf(&b, "    %s: %s\n", r.name, truncate([]byte(line)))
						}
					}
				}
			}
		}
		if w.s.stripe != nil {
			for _, pi := range w.s.stripe.fake.PaymentIntents() {
				if pi.OrderID == id {
					fmt.Fprintf(&b, "  stripe %+v\n", pi)
				}
			}
		}
		w.t.Log(b.String())
	}
}
