package sandbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/sandbox"
	"github.com/payd/payd/sandbox/sandboxtest"
)

// disputeSandbox is a sandbox on a settable clock with one pm_dispute
// charge (key "d", 12.30 USD) whose dispute is open.
func disputeSandbox(t *testing.T, dbURL string) (*sandboxtest.Sandbox, domain.Charge, domain.ProviderDispute) {
	t.Helper()
	ctx := context.Background()
	clk := &clock{}
	t0 := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	clk.Set(t0)
	cfg := fastConfig(dbURL)
	cfg.Clock = clk.Now
	sb := sandboxtest.New(t, cfg)
	ch, err := sb.Client.Charge(ctx, chargeReq("d", "pm_dispute"))
	if err != nil || ch.Status != domain.ChargeSucceeded {
		t.Fatalf("Charge(pm_dispute) = %+v, %v; want succeeded", ch, err)
	}
	clk.Set(t0.Add(cfg.AsyncDelay))
	if n, err := sb.OpenDisputes(ctx); err != nil || n != 1 {
		t.Fatalf("OpenDisputes = %d, %v; want 1", n, err)
	}
	ds, err := sb.Disputes(ctx)
	if err != nil || len(ds) != 1 {
		t.Fatalf("Disputes = %+v, %v; want one", ds, err)
	}
	return sb, ch, ds[0]
}

// eventData decodes the data of every outbox event of type typ.
func eventData(t *testing.T, sb *sandboxtest.Sandbox, typ string) []map[string]any {
	t.Helper()
	ds, err := sb.Deliveries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, d := range ds {
		if d.Type != typ {
			continue
		}
		var ev struct {
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(d.Payload, &ev); err != nil {
			t.Fatalf("outbox payload %s: %v", d.Payload, err)
		}
		out = append(out, ev.Data)
	}
	return out
}

// pm_dispute succeeds like pm_ok; once AsyncDelay has run out exactly one
// dispute opens for the full amount, with one dispute.created event, even
// when two sandbox processes on one database race to open it.
func TestDisputeOpensOnceAfterDelay(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		clk := &clock{}
		t0 := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
		clk.Set(t0)
		cfg := fastConfig(dbURL)
		cfg.Clock = clk.Now
		a := sandboxtest.New(t, cfg)
		b := sandboxtest.New(t, cfg)

		ch, err := a.Client.Charge(ctx, chargeReq("d", "pm_dispute"))
		if err != nil || ch.Status != domain.ChargeSucceeded || !ch.DisputedAmount.IsZero() {
			t.Fatalf("Charge(pm_dispute) = %+v, %v; want succeeded, nothing disputed", ch, err)
		}
		clk.Set(t0.Add(cfg.AsyncDelay - time.Microsecond))
		if n, err := a.OpenDisputes(ctx); err != nil || n != 0 {
			t.Fatalf("OpenDisputes before the delay = %d, %v; want 0", n, err)
		}

		clk.Set(t0.Add(cfg.AsyncDelay))
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			opened int
		)
		for i := range 8 {
			srv := a
			if i%2 == 1 {
				srv = b
			}
			wg.Go(func() {
				n, err := srv.OpenDisputes(ctx)
				if err != nil {
					t.Errorf("OpenDisputes = %v", err)
				}
				mu.Lock()
				opened += n
				mu.Unlock()
			})
		}
		wg.Wait()
		if opened != 1 {
			t.Fatalf("racing OpenDisputes opened %d disputes, want 1", opened)
		}

		ds, err := a.Disputes(ctx)
		if err != nil || len(ds) != 1 {
			t.Fatalf("Disputes = %+v, %v; want one", ds, err)
		}
		d := ds[0]
		if !strings.HasPrefix(d.ID, "dp_") || d.ChargeID != ch.ID || d.IdempotencyKey != "d" || d.OrderID != "ord-d" ||
			!d.Amount.Equal(dec("12.30")) || d.Currency != "USD" || d.Status != domain.DisputeOpen || d.Reason != "fraudulent" ||
			!d.CreatedAt.Equal(t0.Add(cfg.AsyncDelay)) || !d.ClosedAt.IsZero() {
			t.Errorf("dispute = %+v, want open, fraudulent, 12.30 USD of %s", d, ch.ID)
		}
		got, err := a.Client.GetCharge(ctx, domain.Attempt{ID: "d"})
		if err != nil || !got.DisputedAmount.Equal(dec("12.30")) || got.Status != domain.ChargeSucceeded {
			t.Errorf("GetCharge(d) = %+v, %v; want 12.30 disputed", got, err)
		}

		data := eventData(t, a, "dispute.created")
		want := map[string]any{
			"dispute_id": d.ID, "charge_id": ch.ID, "idempotency_key": "d", "order_id": "ord-d",
			"amount": "12.30", "currency": "USD", "status": "open", "reason": "fraudulent",
		}
		if len(data) != 1 || fmt.Sprint(data[0]) != fmt.Sprint(want) {
			t.Errorf("dispute.created data = %v, want exactly one %v", data, want)
		}
		// Nothing is due any more.
		clk.Set(t0.Add(time.Hour))
		if n, err := b.OpenDisputes(ctx); err != nil || n != 0 {
			t.Errorf("OpenDisputes later = %d, %v; want 0", n, err)
		}
		// pm_ok never disputes.
		if _, err := a.Client.Charge(ctx, chargeReq("ok", "pm_ok")); err != nil {
			t.Fatal(err)
		}
		clk.Set(t0.Add(2 * time.Hour))
		if n, _ := a.OpenDisputes(ctx); n != 0 {
			t.Errorf("OpenDisputes after a pm_ok charge = %d, want 0", n)
		}
	})
}

// A dispute due while the sandbox is down opens after the restart, once,
// and reaches the receiver as dispute.created; a further restart neither
// loses nor repeats it.
func TestDisputeSurvivesRestart(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		secret := sandboxtest.Secret(t)
		cfg := fastConfig(dbURL)
		cfg.WebhookSecret = secret
		cfg.AsyncDelay = 100 * time.Millisecond

		first := sandboxtest.New(t, cfg)
		ch, err := first.Client.Charge(ctx, chargeReq("d", "pm_dispute"))
		if err != nil {
			t.Fatal(err)
		}
		first.Shutdown() // before the delay runs out

		rcv := newReceiver(t, secret, 0)
		cfg.WebhookURL = rcv.URL
		second := sandboxtest.Start(t, cfg)
		evs := rcv.waitAccepted(t, 2)
		var created []domain.ProviderEvent
		for _, r := range evs {
			if r.event.Type == domain.EventDisputeCreated {
				created = append(created, r.event)
			}
		}
		if len(created) != 1 {
			t.Fatalf("after restart %d dispute.created events, want 1", len(created))
		}
		e := created[0]
		if e.ChargeID != ch.ID || e.IdempotencyKey != "d" || e.OrderID != "ord-d" || !e.Amount.Equal(dec("12.30")) ||
			e.Currency != "USD" || e.DisputeStatus != domain.DisputeOpen || e.Reason != "fraudulent" || !strings.HasPrefix(e.DisputeID, "dp_") {
			t.Errorf("dispute.created parsed = %+v", e)
		}
		second.Shutdown()

		third := sandboxtest.New(t, cfg)
		if n, err := third.OpenDisputes(ctx); err != nil || n != 0 {
			t.Errorf("OpenDisputes after a second restart = %d, %v; want 0", n, err)
		}
		ds, err := third.Disputes(ctx)
		if err != nil || len(ds) != 1 || ds[0].ID != e.DisputeID || ds[0].Status != domain.DisputeOpen {
			t.Errorf("Disputes after a second restart = %+v, %v; want the one open dispute %s", ds, err, e.DisputeID)
		}
		if data := eventData(t, third, "dispute.created"); len(data) != 1 {
			t.Errorf("dispute.created in the outbox = %d, want 1", len(data))
		}
	})
}

// closeDispute POSTs /v1/disputes/{id}/close.
func closeDispute(t *testing.T, sb *sandboxtest.Sandbox, id, body string) (int, string) {
	t.Helper()
	return post(t, sb.URL+"/v1/disputes/"+id+"/close", "", "application/json", body)
}

func TestCloseDispute(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		sb, ch, d := disputeSandbox(t, dbURL)

		status, body := closeDispute(t, sb, d.ID, `{"status":"won"}`)
		var got map[string]any
		_ = json.Unmarshal([]byte(body), &got)
		if status != http.StatusOK || got["id"] != d.ID || got["status"] != "won" || got["closed_at"] == nil ||
			got["charge_id"] != ch.ID || got["idempotency_key"] != "d" || got["order_id"] != "ord-d" ||
			got["amount"] != "12.30" || got["currency"] != "USD" || got["reason"] != "fraudulent" || got["created_at"] == nil {
			t.Fatalf("close won = %d %s, want 200 the dispute won", status, body)
		}
		again, body2 := closeDispute(t, sb, d.ID, `{"status":"won"}`)
		if again != http.StatusOK || body2 != body {
			t.Errorf("close won again = %d %s, want 200 %s", again, body2, body)
		}
		if status, body := closeDispute(t, sb, d.ID, `{"status":"lost"}`); status != http.StatusConflict || !strings.Contains(body, `"code":"dispute_closed"`) {
			t.Errorf("close lost after won = %d %s, want 409 dispute_closed", status, body)
		}
		if c, _ := sb.Client.GetCharge(ctx, domain.Attempt{ID: "d"}); !c.DisputedAmount.IsZero() {
			t.Errorf("won dispute: DisputedAmount = %v, want 0", c.DisputedAmount)
		}
		closed := eventData(t, sb, "dispute.closed")
		want := map[string]any{
			"dispute_id": d.ID, "charge_id": ch.ID, "idempotency_key": "d", "order_id": "ord-d",
			"amount": "12.30", "currency": "USD", "status": "won", "reason": "fraudulent",
		}
		if len(closed) != 1 || fmt.Sprint(closed[0]) != fmt.Sprint(want) {
			t.Errorf("dispute.closed data = %v, want exactly one %v", closed, want)
		}
		ds, _ := sb.Disputes(ctx)
		if len(ds) != 1 || ds[0].Status != domain.DisputeWon || ds[0].ClosedAt.IsZero() {
			t.Errorf("Disputes = %+v, want one won and closed", ds)
		}

		for name, tt := range map[string]struct {
			id, body string
			status   int
			code     string
		}{
			"open":       {d.ID, `{"status":"open"}`, 400, "validation_failed"},
			"unknown":    {d.ID, `{"status":"maybe"}`, 400, "validation_failed"},
			"no status":  {d.ID, `{}`, 400, "validation_failed"},
			"extra":      {d.ID, `{"status":"won","x":1}`, 400, "invalid_json"},
			"no dispute": {"dp_nope", `{"status":"won"}`, 404, "dispute_not_found"},
		} {
			if status, body := closeDispute(t, sb, tt.id, tt.body); status != tt.status || !strings.Contains(body, `"code":"`+tt.code+`"`) {
				t.Errorf("%s: close = %d %s, want %d %s", name, status, body, tt.status, tt.code)
			}
		}
		if n := len(eventData(t, sb, "dispute.closed")); n != 1 {
			t.Errorf("dispute.closed events = %d, want still 1", n)
		}
	})
}

// A lost dispute keeps the money: the charge shows it disputed, and what is
// left to refund is the amount less refunds and lost disputes.
func TestDisputeLostAndRefunds(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		sb, ch, d := disputeSandbox(t, dbURL)

		// Under an open dispute no refund goes through, and none is recorded.
		if _, err := sb.Client.Refund(ctx, refundReq("r1", ch.ID, "1.00")); !domain.IsProviderRequestError(err, "charge_disputed") {
			t.Fatalf("Refund(open dispute) = %v, want 422 charge_disputed", err)
		}
		status, body := post(t, sb.URL+"/v1/refunds", "r1b", "application/json",
			`{"charge_id":"`+ch.ID+`","amount":"1.00","currency":"USD","reason":""}`)
		if status != http.StatusUnprocessableEntity || !strings.Contains(body, `"code":"charge_disputed"`) {
			t.Errorf("POST /v1/refunds (open dispute) = %d %s, want 422 charge_disputed", status, body)
		}

		closed, err := sb.CloseDispute(ctx, d.ID, domain.DisputeLost)
		if err != nil || closed.Status != domain.DisputeLost || closed.ClosedAt.IsZero() {
			t.Fatalf("CloseDispute(lost) = %+v, %v", closed, err)
		}
		if _, err := sb.CloseDispute(ctx, d.ID, domain.DisputeWon); err == nil {
			t.Errorf("CloseDispute(won after lost) = nil error, want dispute_closed")
		}
		c, err := sb.Client.GetCharge(ctx, domain.Attempt{ID: "d"})
		if err != nil || !c.DisputedAmount.Equal(dec("12.30")) || !c.RefundedAmount.IsZero() {
			t.Errorf("GetCharge after lost = %+v, %v; want 12.30 disputed, nothing refunded", c, err)
		}
		if _, err := sb.Client.Refund(ctx, refundReq("r2", ch.ID, "0.01")); !domain.IsProviderRequestError(err, "refund_exceeds_charge") {
			t.Errorf("Refund(lost in full) = %v, want refund_exceeds_charge", err)
		}
		if rs, _ := sb.Refunds(ctx); len(rs) != 0 {
			t.Errorf("refunds recorded = %+v, want none", rs)
		}
	})
}

// A charge refunded in part before its dispute opens; the dispute is lost
// and what is left is what neither took; a won dispute frees the charge.
func TestDisputeRefundLimits(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		clk := &clock{}
		t0 := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
		clk.Set(t0)
		cfg := fastConfig(dbURL)
		cfg.Clock = clk.Now
		sb := sandboxtest.New(t, cfg)

		won := chargeReq("won", "pm_dispute")
		won.Amount = dec("10.00")
		chWon, err := sb.Client.Charge(ctx, won)
		if err != nil {
			t.Fatal(err)
		}
		// Before the dispute opens a refund goes through.
		if _, err := sb.Client.Refund(ctx, refundReq("early", chWon.ID, "4.00")); err != nil {
			t.Fatalf("Refund before the dispute = %v", err)
		}
		clk.Set(t0.Add(cfg.AsyncDelay))
		if n, err := sb.OpenDisputes(ctx); err != nil || n != 1 {
			t.Fatalf("OpenDisputes = %d, %v", n, err)
		}
		ds, _ := sb.Disputes(ctx)
		if len(ds) != 1 || !ds[0].Amount.Equal(dec("10.00")) {
			t.Fatalf("Disputes = %+v, want one of the full 10.00", ds)
		}
		if _, err := sb.CloseDispute(ctx, ds[0].ID, domain.DisputeWon); err != nil {
			t.Fatal(err)
		}
		if _, err := sb.Client.Refund(ctx, refundReq("late", chWon.ID, "6.01")); !domain.IsProviderRequestError(err, "refund_exceeds_charge") {
			t.Errorf("Refund(6.01 of 6.00 left) = %v, want refund_exceeds_charge", err)
		}
		if _, err := sb.Client.Refund(ctx, refundReq("late", chWon.ID, "6.00")); err != nil {
			t.Errorf("Refund(the rest after a won dispute) = %v", err)
		}
		if c, _ := sb.Client.GetCharge(ctx, domain.Attempt{ID: "won"}); !c.RefundedAmount.Equal(dec("10.00")) || !c.DisputedAmount.IsZero() {
			t.Errorf("GetCharge(won) = %+v, want 10.00 refunded, nothing disputed", c)
		}
	})
}

func TestListDisputesWindow(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		clk := &clock{}
		t0 := time.Date(2024, 5, 1, 10, 0, 0, 123456000, time.UTC)
		cfg := fastConfig(dbURL)
		cfg.Clock = clk.Now
		sb := sandboxtest.New(t, cfg)
		var ids []string
		for i := range 3 {
			clk.Set(t0.Add(time.Duration(i)*time.Second - cfg.AsyncDelay))
			if _, err := sb.Client.Charge(ctx, chargeReq(fmt.Sprintf("d%d", i), "pm_dispute")); err != nil {
				t.Fatal(err)
			}
			clk.Set(t0.Add(time.Duration(i) * time.Second))
			if n, err := sb.OpenDisputes(ctx); err != nil || n != 1 {
				t.Fatalf("OpenDisputes = %d, %v", n, err)
			}
			ds, _ := sb.Disputes(ctx)
			ids = append(ids, ds[len(ds)-1].ID)
		}
		if _, err := sb.CloseDispute(ctx, ids[1], domain.DisputeLost); err != nil {
			t.Fatal(err)
		}
		list := func(from, to time.Time) (int, []map[string]any) {
			t.Helper()
			status, body := get(t, fmt.Sprintf("%s/v1/disputes?from=%s&to=%s", sb.URL, from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano)))
			var out struct {
				Data []map[string]any `json:"data"`
			}
			if status == http.StatusOK {
				if err := json.Unmarshal([]byte(body), &out); err != nil {
					t.Fatalf("GET /v1/disputes = %s: %v", body, err)
				}
			}
			return status, out.Data
		}
		_, all := list(t0, t0.Add(3*time.Second))
		if len(all) != 3 || all[0]["id"] != ids[0] || all[2]["id"] != ids[2] {
			t.Fatalf("disputes in [t0, t0+3s) = %v, want %v oldest first", all, ids)
		}
		if all[0]["created_at"] != t0.Format(time.RFC3339Nano) || all[0]["closed_at"] != nil || all[0]["status"] != "open" ||
			all[0]["idempotency_key"] != "d0" || all[0]["order_id"] != "ord-d0" || all[0]["amount"] != "12.30" {
			t.Errorf("first dispute = %v", all[0])
		}
		if all[1]["status"] != "lost" || all[1]["closed_at"] == nil {
			t.Errorf("second dispute = %v, want lost and closed", all[1])
		}
		if _, mid := list(t0.Add(time.Microsecond), t0.Add(time.Second+time.Microsecond)); len(mid) != 1 || mid[0]["id"] != ids[1] {
			t.Errorf("disputes in (t0, t0+1s] = %v, want %s", mid, ids[1])
		}
		if _, none := list(t0.Add(-time.Hour), t0); len(none) != 0 {
			t.Errorf("disputes before t0 = %v, want none", none)
		}
		for _, q := range []string{"", "?from=x&to=y", "?from=" + t0.Format(time.RFC3339) + "&to=" + t0.Format(time.RFC3339)} {
			if status, body := get(t, sb.URL+"/v1/disputes"+q); status != http.StatusBadRequest || !strings.Contains(body, `"code":"validation_failed"`) {
				t.Errorf("GET /v1/disputes%s = %d %s, want 400 validation_failed", q, status, body)
			}
		}
	})
}

// The closing status is validated before the dispute is looked up, and
// the Go API refuses as the HTTP one does.
func TestCloseDisputeGoAPI(t *testing.T) {
	sb := sandboxtest.New(t, fastConfig(sandboxtest.SQLiteURL(t)))
	var _ interface {
		CloseDispute(context.Context, string, domain.DisputeStatus) (domain.ProviderDispute, error)
	} = (*sandbox.Server)(nil)
	if _, err := sb.CloseDispute(context.Background(), "dp_nope", domain.DisputeOpen); err == nil || !strings.Contains(err.Error(), "validation_failed") {
		t.Errorf("CloseDispute(open) = %v, want validation_failed", err)
	}
	if _, err := sb.CloseDispute(context.Background(), "dp_nope", domain.DisputeWon); err == nil || !strings.Contains(err.Error(), "dispute_not_found") {
		t.Errorf("CloseDispute(unknown) = %v, want dispute_not_found", err)
	}
}

// GET /v1/disputes/{id} answers one dispute exactly as GET /v1/disputes
// lists it, open and closed; an unknown id is 404 dispute_not_found.
func TestGetDispute(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		sb, _, d := disputeSandbox(t, dbURL)
		listed := func() string {
			t.Helper()
			from := d.CreatedAt.Add(-time.Hour).Format(time.RFC3339)
			to := d.CreatedAt.Add(time.Hour).Format(time.RFC3339)
			status, body := get(t, sb.URL+"/v1/disputes?from="+from+"&to="+to)
			var out struct {
				Data []json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal([]byte(body), &out); status != http.StatusOK || err != nil || len(out.Data) != 1 {
				t.Fatalf("GET /v1/disputes = %d %s, want 200 one dispute", status, body)
			}
			return string(out.Data[0])
		}
		status, body := get(t, sb.URL+"/v1/disputes/"+d.ID)
		if want := listed(); status != http.StatusOK || strings.TrimSpace(body) != want {
			t.Errorf("GET /v1/disputes/%s (open) = %d %s, want 200 %s", d.ID, status, body, want)
		}
		var got map[string]any
		_ = json.Unmarshal([]byte(body), &got)
		if got["id"] != d.ID || got["status"] != "open" || got["closed_at"] != nil || got["amount"] != "12.30" {
			t.Errorf("open dispute = %v", got)
		}

		if _, err := sb.CloseDispute(ctx, d.ID, domain.DisputeLost); err != nil {
			t.Fatal(err)
		}
		status, body = get(t, sb.URL+"/v1/disputes/"+d.ID)
		if want := listed(); status != http.StatusOK || strings.TrimSpace(body) != want {
			t.Errorf("GET /v1/disputes/%s (lost) = %d %s, want 200 %s", d.ID, status, body, want)
		}
		if !strings.Contains(body, `"status":"lost"`) || strings.Contains(body, `"closed_at":null`) {
			t.Errorf("lost dispute = %s, want status lost and a closed_at", body)
		}

		for _, id := range []string{"dp_nope", d.ChargeID} {
			status, body := get(t, sb.URL+"/v1/disputes/"+id)
			if status != http.StatusNotFound || !strings.Contains(body, `{"error":{"code":"dispute_not_found"`) {
				t.Errorf("GET /v1/disputes/%s = %d %s, want 404 dispute_not_found", id, status, body)
			}
		}
	})
}
