package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/sandbox/sandboxtest"
)

func refundReq(key, chargeID, amount string) domain.ProviderRefundRequest {
	return domain.ProviderRefundRequest{IdempotencyKey: key, ChargeID: chargeID, Amount: dec(amount), Currency: "USD", Reason: "requested_by_customer"}
}

func TestRefunds(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		sb := sandboxtest.New(t, fastConfig(dbURL))
		ctx := context.Background()
		req := chargeReq("c1", "pm_ok")
		req.Amount = dec("10.00")
		ch, err := sb.Client.Charge(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		refunded := func(want string) {
			t.Helper()
			got, err := sb.Client.GetCharge(ctx, domain.Attempt{ID: "c1"})
			if err != nil || !got.RefundedAmount.Equal(dec(want)) {
				t.Fatalf("GetCharge(c1).RefundedAmount = %v (%v), want %s", got.RefundedAmount, err, want)
			}
		}

		r1, err := sb.Client.Refund(ctx, refundReq("r1", ch.ID, "4.00"))
		if err != nil || r1.Status != domain.ChargeSucceeded || !r1.Amount.Equal(dec("4.00")) || r1.ChargeID != ch.ID {
			t.Fatalf("Refund(r1) = %+v, %v; want 4.00 succeeded", r1, err)
		}
		replay, err := sb.Client.Refund(ctx, refundReq("r1", ch.ID, "4.00"))
		if err != nil || replay.ID != r1.ID {
			t.Fatalf("Refund(r1 again) = %+v, %v; want the same refund %s", replay, err, r1.ID)
		}
		refunded("4.00")

		if _, err := sb.Client.Refund(ctx, refundReq("r1", ch.ID, "5.00")); !domain.IsProviderRequestError(err, "idempotency_key_reused") {
			t.Errorf("Refund(r1, other amount) = %v, want idempotency_key_reused", err)
		}
		if _, err := sb.Client.Refund(ctx, refundReq("r2", ch.ID, "6.01")); !domain.IsProviderRequestError(err, "refund_exceeds_charge") {
			t.Errorf("Refund(6.01 of 6.00 left) = %v, want refund_exceeds_charge", err)
		}
		refunded("4.00")

		r3, err := sb.Client.Refund(ctx, refundReq("r3", ch.ID, "6.00"))
		if err != nil {
			t.Fatalf("Refund(r3, the rest) = %v", err)
		}
		refunded("10.00")
		// A replay still answers after the charge is used up.
		if again, err := sb.Client.Refund(ctx, refundReq("r3", ch.ID, "6.00")); err != nil || again.ID != r3.ID {
			t.Errorf("Refund(r3 again) = %+v, %v; want %s", again, err, r3.ID)
		}
		if _, err := sb.Client.Refund(ctx, refundReq("r4", ch.ID, "0.01")); !domain.IsProviderRequestError(err, "refund_exceeds_charge") {
			t.Errorf("Refund(fully refunded) = %v, want refund_exceeds_charge", err)
		}

		declined, _ := sb.Client.Charge(ctx, chargeReq("c2", "pm_declined"))
		if _, err := sb.Client.Refund(ctx, refundReq("r5", declined.ID, "1.00")); !domain.IsProviderRequestError(err, "charge_not_refundable") {
			t.Errorf("Refund(declined charge) = %v, want charge_not_refundable", err)
		}
		eur := refundReq("r6", ch.ID, "1.00")
		eur.Currency = "EUR"
		if _, err := sb.Client.Refund(ctx, eur); !domain.IsProviderRequestError(err, "currency_mismatch") {
			t.Errorf("Refund(EUR of USD) = %v, want currency_mismatch", err)
		}
		if _, err := sb.Client.Refund(ctx, refundReq("r7", "ch_nope", "1.00")); !errors.Is(err, domain.ErrChargeNotFound) {
			t.Errorf("Refund(unknown charge) = %v, want ErrChargeNotFound", err)
		}

		ds, _ := sb.Deliveries(ctx)
		var refundEvents int
		for _, d := range ds {
			if d.Type == "refund.succeeded" {
				refundEvents++
			}
		}
		if refundEvents != 2 {
			t.Errorf("refund.succeeded events = %d, want 2 (r1, r3)", refundEvents)
		}
	})
}

// Racing refunds can never give back more than was charged, and racing
// replays of one key refund once.
func TestRefundsConcurrent(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		sb := sandboxtest.New(t, fastConfig(dbURL))
		ctx := context.Background()
		req := chargeReq("c1", "pm_ok")
		req.Amount = dec("10.00")
		ch, err := sb.Client.Charge(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var (
			wg               sync.WaitGroup
			mu               sync.Mutex
			ok, exceeded     int
			sameKeyIDs       = map[string]bool{}
			unexpected       []error
			sameKeyRequested = 10
		)
		for i := range 20 {
			wg.Go(func() {
				_, err := sb.Client.Refund(ctx, refundReq(fmt.Sprintf("r%d", i), ch.ID, "1.00"))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case domain.IsProviderRequestError(err, "refund_exceeds_charge"):
					exceeded++
				default:
					unexpected = append(unexpected, err)
				}
			})
		}
		wg.Wait()
		if len(unexpected) > 0 || ok != 10 || exceeded != 10 {
			t.Fatalf("20 refunds of 1.00 on 10.00: %d ok, %d exceeded, errors %v; want 10 and 10", ok, exceeded, unexpected)
		}

		req = chargeReq("c2", "pm_ok")
		req.Amount = dec("5.00")
		ch2, _ := sb.Client.Charge(ctx, req)
		for range sameKeyRequested {
			wg.Go(func() {
				r, err := sb.Client.Refund(ctx, refundReq("same", ch2.ID, "3.00"))
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					unexpected = append(unexpected, err)
				}
				sameKeyIDs[r.ID] = true
			})
		}
		wg.Wait()
		if len(unexpected) > 0 || len(sameKeyIDs) != 1 {
			t.Fatalf("10 replays of one refund: ids %v, errors %v; want one id", sameKeyIDs, unexpected)
		}
		if got, _ := sb.Client.GetCharge(ctx, domain.Attempt{ID: "c2"}); !got.RefundedAmount.Equal(dec("3.00")) {
			t.Fatalf("RefundedAmount = %v, want 3.00", got.RefundedAmount)
		}
	})
}

func TestListRefundsWindow(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		sb, clk := clockedSandbox(t, dbURL)
		ctx := context.Background()
		t0 := time.Date(2024, 5, 1, 10, 0, 0, 123456000, time.UTC)
		clk.Set(t0.Add(-time.Hour))
		ch, err := sb.Client.Charge(ctx, chargeReq("c1", "pm_ok"))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			clk.Set(t0.Add(time.Duration(i) * time.Second))
			if _, err := sb.Client.Refund(ctx, refundReq(fmt.Sprintf("r%d", i), ch.ID, "1.00")); err != nil {
				t.Fatal(err)
			}
		}
		tests := []struct {
			from, to time.Time
			want     []string
		}{
			{t0, t0.Add(4 * time.Second), []string{"r0", "r1", "r2", "r3"}},
			{t0.Add(time.Second), t0.Add(3 * time.Second), []string{"r1", "r2"}}, // [from, to)
			{t0.Add(time.Microsecond), t0.Add(time.Second + time.Microsecond), []string{"r1"}},
			{t0.Add(-2 * time.Hour), t0, nil},
		}
		for _, tt := range tests {
			status, body := get(t, fmt.Sprintf("%s/v1/refunds?from=%s&to=%s", sb.URL, tt.from.Format(time.RFC3339Nano), tt.to.Format(time.RFC3339Nano)))
			var out struct {
				Data []map[string]any `json:"data"`
			}
			if err := json.Unmarshal([]byte(body), &out); status != http.StatusOK || err != nil {
				t.Fatalf("GET /v1/refunds = %d %s", status, body)
			}
			var keys []string
			for _, r := range out.Data {
				keys = append(keys, r["idempotency_key"].(string))
				if r["order_id"] != "ord-c1" || r["charge_id"] != ch.ID || r["amount"] != "1.00" || r["status"] != "succeeded" {
					t.Errorf("refund = %v, want 1.00 of %s for ord-c1", r, ch.ID)
				}
			}
			if fmt.Sprint(keys) != fmt.Sprint(tt.want) {
				t.Errorf("refunds in [%v, %v) = %v, want %v", tt.from, tt.to, keys, tt.want)
			}
		}
		// In pages of limit, each after the refund starting_after names,
		// with has_more on all but the last; a cursor that names no refund
		// is refused.
		window := fmt.Sprintf("from=%s&to=%s", t0.Format(time.RFC3339Nano), t0.Add(time.Hour).Format(time.RFC3339Nano))
		var paged []string
		for after, pages := "", 1; ; pages++ {
			status, body := get(t, sb.URL+"/v1/refunds?"+window+"&limit=3&starting_after="+after)
			var out struct {
				Data []struct {
					ID  string `json:"id"`
					Key string `json:"idempotency_key"`
				} `json:"data"`
				HasMore bool `json:"has_more"`
			}
			if err := json.Unmarshal([]byte(body), &out); status != http.StatusOK || err != nil || pages > 2 {
				t.Fatalf("page %d of 3 refunds = %d %s", pages, status, body)
			}
			for _, r := range out.Data {
				paged = append(paged, r.Key)
			}
			if !out.HasMore {
				break
			}
			after = out.Data[len(out.Data)-1].ID
		}
		if fmt.Sprint(paged) != "[r0 r1 r2 r3]" {
			t.Errorf("refunds in pages of 3 = %v, want [r0 r1 r2 r3]", paged)
		}
		for _, q := range []string{"", "?from=x&to=y", "?from=" + t0.Format(time.RFC3339) + "&to=" + t0.Format(time.RFC3339),
			"?" + window + "&starting_after=re_nobody", "?" + window + "&limit=1001"} {
			if status, body := get(t, sb.URL+"/v1/refunds"+q); status != http.StatusBadRequest || !strings.Contains(body, `"code":"validation_failed"`) {
				t.Errorf("GET /v1/refunds%s = %d %s, want 400 validation_failed", q, status, body)
			}
		}
		rs, err := sb.Refunds(ctx)
		if err != nil || len(rs) != 4 || rs[0].IdempotencyKey != "r0" || rs[0].OrderID != "ord-c1" || rs[0].ChargeID != ch.ID ||
			!rs[0].Amount.Equal(dec("1.00")) || rs[0].Currency != "USD" || rs[0].Status != domain.ChargeSucceeded || !rs[0].CreatedAt.Equal(t0) {
			t.Errorf("Refunds = %+v, %v; want r0..r3 of ord-c1", rs, err)
		}
	})
}

// A refund made straight at the sandbox (a dashboard refund, nothing to do
// with payd) is announced like any other: refund.succeeded with the order.
func TestDashboardRefundWebhook(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		secret := sandboxtest.Secret(t)
		rcv := newReceiver(t, secret, 0)
		cfg := fastConfig(dbURL)
		cfg.WebhookURL, cfg.WebhookSecret = rcv.URL, secret
		sb := sandboxtest.Start(t, cfg)
		ch, err := sb.Client.Charge(context.Background(), chargeReq("c1", "pm_ok"))
		if err != nil {
			t.Fatal(err)
		}
		status, body := post(t, sb.URL+"/v1/refunds", "dash-1", "application/json",
			`{"charge_id":"`+ch.ID+`","amount":"2.50","currency":"USD","reason":"dashboard"}`)
		var reply map[string]any
		_ = json.Unmarshal([]byte(body), &reply)
		if status != http.StatusOK || reply["order_id"] != "ord-c1" || reply["charge_id"] != ch.ID || reply["amount"] != "2.50" {
			t.Fatalf("POST /v1/refunds = %d %s, want 200 with order_id ord-c1", status, body)
		}
		evs := byKey(rcv.waitAccepted(t, 2), "dash-1")
		if len(evs) != 1 {
			t.Fatalf("events for the dashboard refund = %d, want 1", len(evs))
		}
		e := evs[0]
		if e.Type != domain.EventRefundSucceeded || e.RefundID != reply["id"] || e.ChargeID != ch.ID || e.OrderID != "ord-c1" ||
			!e.Amount.Equal(dec("2.50")) || e.Currency != "USD" {
			t.Errorf("refund.succeeded = %+v, want refund %v of %s for ord-c1", e, reply["id"], ch.ID)
		}
		data := eventData(t, sb, "refund.succeeded")
		want := map[string]any{"refund_id": reply["id"], "charge_id": ch.ID, "idempotency_key": "dash-1", "order_id": "ord-c1", "amount": "2.50", "currency": "USD"}
		if len(data) != 1 || fmt.Sprint(data[0]) != fmt.Sprint(want) {
			t.Errorf("refund.succeeded data = %v, want %v", data, want)
		}
	})
}
