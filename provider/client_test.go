package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/sandbox"
	"github.com/payd/payd/sandbox/sandboxtest"
	"github.com/payd/payd/service"
)

// The client is the provider's books for payd.
var (
	_ service.ChargeFinder  = (*provider.Client)(nil)
	_ service.RefundLister  = (*provider.Client)(nil)
	_ service.DisputeLister = (*provider.Client)(nil)
)

func chargeReq(key, method string) domain.ChargeRequest {
	return domain.ChargeRequest{
		IdempotencyKey: key, OrderID: "ord-" + key, Amount: decimal.RequireFromString("12.30"),
		Currency: "USD", PaymentMethod: method,
	}
}

// The client against a real sandbox, one magic payment method at a time.
func TestClientMagicMethods(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		sb := sandboxtest.New(t, sandbox.Config{DatabaseURL: dbURL, AsyncDelay: time.Millisecond})
		ctx := context.Background()
		resolve := func() {
			time.Sleep(5 * time.Millisecond)
			if _, err := sb.ResolvePending(ctx); err != nil {
				t.Fatal(err)
			}
		}
		tests := []struct {
			method      string
			reply       domain.ChargeStatus // "" means the call errs
			failureCode string
			final       domain.ChargeStatus // what GetCharge says afterwards; "" means ErrChargeNotFound
		}{
			{"pm_ok", domain.ChargeSucceeded, "", domain.ChargeSucceeded},
			{"pm_declined", domain.ChargeFailed, "card_declined", domain.ChargeFailed},
			{"pm_insufficient_funds", domain.ChargeFailed, "insufficient_funds", domain.ChargeFailed},
			{"pm_async", domain.ChargePending, "", domain.ChargeSucceeded},
			{"pm_async_fail", domain.ChargePending, "", domain.ChargeFailed},
			{"pm_timeout", "", "", domain.ChargeSucceeded},
			{"pm_error", "", "", domain.ChargeFailed},
		}
		for _, tt := range tests {
			key := "key-" + tt.method
			start := time.Now()
			ch, err := sb.Client.Charge(ctx, chargeReq(key, tt.method))
			if tt.reply == "" {
				if !errors.Is(err, domain.ErrProviderUnavailable) {
					t.Errorf("Charge(%s) = %+v, %v; want ErrProviderUnavailable", tt.method, ch, err)
				}
				if time.Since(start) > 2*time.Second {
					t.Errorf("Charge(%s) took %v: a lost reply must fail at once, not wait out the timeout", tt.method, time.Since(start))
				}
			} else if err != nil || ch.Status != tt.reply || ch.FailureCode != tt.failureCode ||
				ch.IdempotencyKey != key || ch.OrderID != "ord-"+key || !ch.Amount.Equal(decimal.RequireFromString("12.30")) ||
				ch.Currency != "USD" || !strings.HasPrefix(ch.ID, "ch_") || ch.CreatedAt.IsZero() || !ch.RefundedAmount.IsZero() {
				t.Errorf("Charge(%s) = %+v, %v; want %s %q", tt.method, ch, err, tt.reply, tt.failureCode)
			}

			resolve()
			got, err := sb.Client.GetCharge(ctx, domain.Attempt{ID: key})
			if tt.final == "" {
				if !errors.Is(err, domain.ErrChargeNotFound) {
					t.Errorf("GetCharge(%s) = %+v, %v; want ErrChargeNotFound", tt.method, got, err)
				}
				continue
			}
			if err != nil || got.Status != tt.final {
				t.Errorf("GetCharge(%s) = %v, %v; want %s", tt.method, got.Status, err, tt.final)
			}
		}

		// pm_error recorded its fault: a replay of the key answers the
		// failed charge, a processor fault payd calls not charged, and
		// charges nothing.
		ch, err := sb.Client.Charge(ctx, chargeReq("key-pm_error", "pm_error"))
		if err != nil || ch.Status != domain.ChargeFailed || ch.FailureCode != domain.NotCharged {
			t.Errorf("Charge(pm_error again) = %+v, %v; want failed %s", ch, err, domain.NotCharged)
		}
		if _, err := sb.Client.Charge(ctx, chargeReq("key-x", "pm_unknown")); !domain.IsProviderRequestError(err, "unknown_payment_method") || errors.Is(err, domain.ErrProviderUnavailable) {
			t.Errorf("Charge(pm_unknown) = %v, want a 400 unknown_payment_method ProviderRequestError", err)
		}
	})
}

func TestClientRefundAndList(t *testing.T) {
	sb := sandboxtest.New(t, sandbox.Config{DatabaseURL: sandboxtest.SQLiteURL(t)})
	ctx := context.Background()
	before := time.Now().Add(-time.Second)
	ch, err := sb.Client.Charge(ctx, chargeReq("k", "pm_ok"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := sb.Client.Refund(ctx, domain.ProviderRefundRequest{IdempotencyKey: "r", ChargeID: ch.ID, Amount: decimal.RequireFromString("2.3"), Currency: "USD"})
	if err != nil || r.ChargeID != ch.ID || !r.Amount.Equal(decimal.RequireFromString("2.30")) || r.Status != domain.ChargeSucceeded || r.IdempotencyKey != "r" {
		t.Fatalf("Refund = %+v, %v", r, err)
	}
	list, err := provider.AllCharges(ctx, sb.Client, before, time.Now().Add(time.Second))
	if err != nil || len(list) != 1 || list[0].ID != ch.ID || !list[0].RefundedAmount.Equal(decimal.RequireFromString("2.30")) {
		t.Fatalf("ListCharges = %+v, %v; want the one charge with 2.30 refunded", list, err)
	}
}

// fake answers every request with h and counts them.
func fake(t *testing.T, h http.HandlerFunc) (*provider.Client, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(ts.Close)
	return provider.NewClient(ts.URL, provider.WithTimeout(100*time.Millisecond)), &n
}

func status(code int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

func TestClientErrorMapping(t *testing.T) {
	const okCharge = `{"id":"ch_1","idempotency_key":"k","order_id":"o","amount":"12.30","currency":"USD","payment_method":"pm_ok","status":"succeeded","failure_code":"","refunded_amount":"0.00","created_at":"2024-05-01T10:00:00.5Z"}`
	hang := func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server notice the client hanging up.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}
	drop := func(w http.ResponseWriter, _ *http.Request) {
		conn, _, _ := http.NewResponseController(w).Hijack()
		conn.Close()
	}
	tests := []struct {
		name            string
		h               http.HandlerFunc
		wantUnavailable bool
		wantNotFound    bool
		wantCode        string
	}{
		{"timeout", hang, true, false, ""},
		{"connection dropped", drop, true, false, ""},
		{"500", status(500, `{"error":{"code":"processing_error"}}`), true, false, ""},
		{"503 no body", status(503, ``), true, false, ""},
		{"429", status(429, ``), true, false, ""},
		{"408", status(408, ``), true, false, ""},
		{"garbled 200", status(200, `{"id":`), true, false, ""},
		{"unknown status", status(200, strings.Replace(okCharge, `"succeeded"`, `"weird"`, 1)), true, false, ""},
		{"bad amount", status(200, strings.Replace(okCharge, `"12.30"`, `"12,30"`, 1)), true, false, ""},
		{"404", status(404, `{"error":{"code":"charge_not_found","message":"no"}}`), false, true, "charge_not_found"},
		{"422", status(422, `{"error":{"code":"idempotency_key_reused","message":"no"}}`), false, false, "idempotency_key_reused"},
		{"400 without body", status(400, ``), false, false, ""},
		{"bare 404 (not the provider)", status(404, `<html>not found</html>`), true, false, ""},
	}
	for _, tt := range tests {
		c, _ := fake(t, tt.h)
		_, err := c.Charge(context.Background(), chargeReq("k", "pm_ok"))
		if err == nil {
			t.Errorf("%s: Charge = nil error", tt.name)
			continue
		}
		if got := errors.Is(err, domain.ErrProviderUnavailable); got != tt.wantUnavailable {
			t.Errorf("%s: errors.Is(%v, ErrProviderUnavailable) = %v, want %v", tt.name, err, got, tt.wantUnavailable)
		}
		if got := errors.Is(err, domain.ErrChargeNotFound); got != tt.wantNotFound {
			t.Errorf("%s: errors.Is(%v, ErrChargeNotFound) = %v, want %v", tt.name, err, got, tt.wantNotFound)
		}
		if errors.Is(err, domain.ErrProviderUnreachable) {
			t.Errorf("%s: %v is ErrProviderUnreachable, but the provider answered", tt.name, err)
		}
		if !tt.wantUnavailable && !domain.IsProviderRequestError(err, tt.wantCode) {
			t.Errorf("%s: %v is not a ProviderRequestError with code %q", tt.name, err, tt.wantCode)
		}
	}

	t.Run("timeout keeps the cause", func(t *testing.T) {
		c, _ := fake(t, hang)
		_, err := c.GetCharge(context.Background(), domain.Attempt{ID: "k"})
		if !errors.Is(err, domain.ErrProviderUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("GetCharge(hanging) = %v, want ErrProviderUnavailable and DeadlineExceeded", err)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		_, err = provider.NewClient("http://"+addr).Charge(context.Background(), chargeReq("k", "pm_ok"))
		if !errors.Is(err, domain.ErrProviderUnavailable) || !errors.Is(err, domain.ErrProviderUnreachable) {
			t.Errorf("Charge(nobody listening) = %v, want ErrProviderUnavailable and ErrProviderUnreachable", err)
		}
	})
}

// The request on the wire: decimal-string amount at the currency's scale,
// the key in the Idempotency-Key header, JSON in.
func TestClientWireFormat(t *testing.T) {
	var got map[string]any
	var header http.Header
	c, n := fake(t, func(w http.ResponseWriter, r *http.Request) {
		header = r.Header.Clone()
		_ = json.NewDecoder(r.Body).Decode(&got)
		status(500, ``)(w, r)
	})
	req := chargeReq("key-1", "pm_ok")
	req.Amount = decimal.RequireFromString("12.3")
	_, _ = c.Charge(context.Background(), req)
	want := map[string]any{"order_id": "ord-key-1", "amount": "12.30", "currency": "USD", "payment_method": "pm_ok"}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) || header.Get("Idempotency-Key") != "key-1" || header.Get("Content-Type") != "application/json" {
		t.Errorf("request = %s %v, want %s with Idempotency-Key key-1", gotJSON, header, wantJSON)
	}

	// An amount finer than the currency is refused, not rounded, and nothing is sent.
	before := n.Load()
	req.Amount = decimal.RequireFromString("12.305")
	if _, err := c.Charge(context.Background(), req); err == nil || errors.Is(err, domain.ErrProviderUnavailable) {
		t.Errorf("Charge(12.305 USD) = %v, want a validation error", err)
	}
	if n.Load() != before {
		t.Error("Charge(12.305 USD) reached the provider")
	}

	bad := provider.NewClient("not a url")
	if bad.Err() == nil {
		t.Error("NewClient(not a url).Err() = nil")
	}
	if _, err := bad.Charge(context.Background(), chargeReq("k", "pm_ok")); err == nil || errors.Is(err, domain.ErrProviderUnavailable) {
		t.Errorf("Charge on a bad base URL = %v, want a plain configuration error", err)
	}
}

// TestClientReusesConnections: concurrent charges reuse the connections
// of earlier ones instead of dialling a new one each time (net/http keeps
// only 2 idle per host by default; with 16 in flight, nearly every charge
// then paid for a new connection, and over TLS a handshake).
func TestClientReusesConnections(t *testing.T) {
	var dials atomic.Int64
	const okCharge = `{"id":"ch_1","idempotency_key":"k","order_id":"o","amount":"12.30","currency":"USD","payment_method":"pm_ok","status":"succeeded","failure_code":"","refunded_amount":"0.00","created_at":"2024-05-01T10:00:00.5Z"}`
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(time.Millisecond) // the charges overlap
		status(200, okCharge)(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := provider.NewClient(srv.URL)
	const clients, rounds = 16, 20
	for r := range rounds {
		done := make(chan error, clients)
		for i := range clients {
			go func() {
				_, err := c.Charge(context.Background(), chargeReq(fmt.Sprintf("k-%d-%d", r, i), "pm_ok"))
				done <- err
			}()
		}
		for range clients {
			if err := <-done; err != nil {
				t.Fatalf("Charge = %v", err)
			}
		}
	}
	if n := dials.Load(); n > 2*clients {
		t.Errorf("%d charges, %d at a time, opened %d connections, want at most %d (reused)", clients*rounds, clients, n, 2*clients)
	}
}

// The provider's books through the client, against a real sandbox: a
// charge by its id with what disputes hold, refunds (whoever made them)
// with their order, disputes open and closed.
func TestClientBooks(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		sb := sandboxtest.New(t, sandbox.Config{DatabaseURL: dbURL, AsyncDelay: time.Millisecond})
		before := time.Now().Add(-time.Second)
		ok, err := sb.Client.Charge(ctx, chargeReq("ok", "pm_ok"))
		if err != nil {
			t.Fatal(err)
		}
		disputed, err := sb.Client.Charge(ctx, chargeReq("d", "pm_dispute"))
		if err != nil {
			t.Fatal(err)
		}
		lost, err := sb.Client.Charge(ctx, chargeReq("l", "pm_dispute"))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		if n, err := sb.OpenDisputes(ctx); err != nil || n != 2 {
			t.Fatalf("OpenDisputes = %d, %v; want 2", n, err)
		}
		ds, _ := sb.Disputes(ctx)
		var lostID string
		for _, d := range ds {
			if d.ChargeID == lost.ID {
				lostID = d.ID
			}
		}
		if _, err := sb.CloseDispute(ctx, lostID, domain.DisputeLost); err != nil {
			t.Fatal(err)
		}
		r, err := sb.Client.Refund(ctx, domain.ProviderRefundRequest{IdempotencyKey: "r", ChargeID: ok.ID, Amount: decimal.RequireFromString("2.30"), Currency: "USD"})
		if err != nil || r.OrderID != "ord-ok" {
			t.Fatalf("Refund = %+v, %v; want one for ord-ok", r, err)
		}
		after := time.Now().Add(time.Second)

		got, err := sb.Client.FindCharge(ctx, ok.ID)
		if err != nil || got.ID != ok.ID || got.IdempotencyKey != "ok" || got.OrderID != "ord-ok" ||
			!got.RefundedAmount.Equal(decimal.RequireFromString("2.30")) || !got.DisputedAmount.IsZero() || got.Status != domain.ChargeSucceeded {
			t.Errorf("FindCharge(ok) = %+v, %v; want ord-ok with 2.30 refunded", got, err)
		}
		for _, c := range []domain.Charge{disputed, lost} {
			got, err := sb.Client.FindCharge(ctx, c.ID)
			if err != nil || got.ID != c.ID || !got.DisputedAmount.Equal(decimal.RequireFromString("12.30")) {
				t.Errorf("FindCharge(%s) = %+v, %v; want 12.30 disputed", c.IdempotencyKey, got, err)
			}
		}
		if _, err := sb.Client.FindCharge(ctx, "ch_nope"); !errors.Is(err, domain.ErrChargeNotFound) {
			t.Errorf("FindCharge(unknown) = %v, want ErrChargeNotFound", err)
		}
		if _, err := sb.Client.FindCharge(ctx, "ok"); !errors.Is(err, domain.ErrChargeNotFound) {
			t.Errorf("FindCharge(a key) = %v, want ErrChargeNotFound", err)
		}

		refunds, err := sb.Client.ListRefunds(ctx, before, after)
		if err != nil || len(refunds) != 1 {
			t.Fatalf("ListRefunds = %+v, %v; want one", refunds, err)
		}
		if g := refunds[0]; g.ID != r.ID || g.IdempotencyKey != "r" || g.ChargeID != ok.ID || g.OrderID != "ord-ok" ||
			!g.Amount.Equal(decimal.RequireFromString("2.30")) || g.Currency != "USD" || g.Status != domain.ChargeSucceeded || !g.CreatedAt.Equal(r.CreatedAt) {
			t.Errorf("ListRefunds[0] = %+v, want %+v", g, r)
		}
		if none, err := sb.Client.ListRefunds(ctx, before.Add(-time.Hour), before); err != nil || len(none) != 0 {
			t.Errorf("ListRefunds(earlier) = %+v, %v; want none", none, err)
		}
		if _, err := sb.Client.ListRefunds(ctx, after, before); !domain.IsProviderRequestError(err, "validation_failed") {
			t.Errorf("ListRefunds(to before from) = %v, want validation_failed", err)
		}

		list, err := sb.Client.ListDisputes(ctx, before, after)
		if err != nil || len(list) != 2 {
			t.Fatalf("ListDisputes = %+v, %v; want two", list, err)
		}
		for i, want := range ds {
			g := list[i]
			wantStatus, closed := domain.DisputeOpen, false
			if want.ID == lostID {
				wantStatus, closed = domain.DisputeLost, true
			}
			if g.ID != want.ID || g.ChargeID != want.ChargeID || g.IdempotencyKey != want.IdempotencyKey || g.OrderID != want.OrderID ||
				!g.Amount.Equal(decimal.RequireFromString("12.30")) || g.Currency != "USD" || g.Status != wantStatus ||
				g.Reason != "fraudulent" || !g.CreatedAt.Equal(want.CreatedAt) || g.ClosedAt.IsZero() == closed {
				t.Errorf("ListDisputes[%d] = %+v, want %+v as %s", i, g, want, wantStatus)
			}
		}
		if _, err := sb.Client.ListDisputes(ctx, after, after); !domain.IsProviderRequestError(err, "validation_failed") {
			t.Errorf("ListDisputes(empty window) = %v, want validation_failed", err)
		}

		// One dispute by its id is what the list says of it, open or lost.
		for _, want := range list {
			got, err := sb.Client.FindDispute(ctx, want.ID)
			if err != nil || got.ID != want.ID || got.ChargeID != want.ChargeID || got.IdempotencyKey != want.IdempotencyKey ||
				got.OrderID != want.OrderID || !got.Amount.Equal(want.Amount) || got.Currency != want.Currency ||
				got.Status != want.Status || got.Reason != want.Reason || !got.CreatedAt.Equal(want.CreatedAt) || !got.ClosedAt.Equal(want.ClosedAt) {
				t.Errorf("FindDispute(%s) = %+v, %v; want %+v", want.ID, got, err, want)
			}
		}
		for _, id := range []string{"dp_nope", disputed.ID, "dp/../" + lostID} {
			if _, err := sb.Client.FindDispute(ctx, id); !errors.Is(err, domain.ErrDisputeNotFound) || errors.Is(err, domain.ErrChargeNotFound) {
				t.Errorf("FindDispute(%s) = %v, want ErrDisputeNotFound", id, err)
			}
		}
	})
}

// FindDispute maps the provider's answers as the other calls do; only the
// provider's own dispute_not_found says there is no such dispute.
func TestClientFindDisputeErrorMapping(t *testing.T) {
	const dispute = `{"id":"dp_1","charge_id":"ch_1","idempotency_key":"k","order_id":"o","amount":"12.30","currency":"USD","status":"won","reason":"fraudulent","created_at":"2024-05-01T10:00:00Z","closed_at":"2024-05-01T11:00:00Z"}`
	tests := []struct {
		name            string
		h               http.HandlerFunc
		wantUnavailable bool
		wantNotFound    bool
		wantCode        string
	}{
		{"500", status(500, `{"error":{"code":"internal_error"}}`), true, false, ""},
		{"503 no body", status(503, ``), true, false, ""},
		{"garbled 200", status(200, `{"id":`), true, false, ""},
		{"unknown status", status(200, strings.Replace(dispute, `"won"`, `"pending"`, 1)), true, false, ""},
		{"bad amount", status(200, strings.Replace(dispute, `"12.30"`, `"lots"`, 1)), true, false, ""},
		{"400", status(400, `{"error":{"code":"validation_failed","message":"no"}}`), false, false, "validation_failed"},
		{"404", status(404, `{"error":{"code":"dispute_not_found","message":"no"}}`), false, true, "dispute_not_found"},
		{"bare 404", status(404, `not found`), true, false, ""},
	}
	for _, tt := range tests {
		c, _ := fake(t, tt.h)
		_, err := c.FindDispute(context.Background(), "dp_1")
		if err == nil {
			t.Errorf("%s: FindDispute = nil error", tt.name)
			continue
		}
		if got := errors.Is(err, domain.ErrProviderUnavailable); got != tt.wantUnavailable {
			t.Errorf("%s: errors.Is(%v, ErrProviderUnavailable) = %v, want %v", tt.name, err, got, tt.wantUnavailable)
		}
		if got := errors.Is(err, domain.ErrDisputeNotFound); got != tt.wantNotFound {
			t.Errorf("%s: errors.Is(%v, ErrDisputeNotFound) = %v, want %v", tt.name, err, got, tt.wantNotFound)
		}
		if errors.Is(err, domain.ErrChargeNotFound) {
			t.Errorf("%s: %v is ErrChargeNotFound", tt.name, err)
		}
		if !tt.wantUnavailable && !domain.IsProviderRequestError(err, tt.wantCode) {
			t.Errorf("%s: %v is not a ProviderRequestError with code %q", tt.name, err, tt.wantCode)
		}
	}

	var gotPath string
	c, _ := fake(t, func(w http.ResponseWriter, r *http.Request) {
		gotPath = r.URL.RequestURI()
		status(200, dispute)(w, r)
	})
	d, err := c.FindDispute(context.Background(), "dp/1?x")
	if err != nil || gotPath != "/v1/disputes/dp%2F1%3Fx" || d.ID != "dp_1" || d.Status != domain.DisputeWon ||
		!d.Amount.Equal(decimal.RequireFromString("12.30")) || !d.ClosedAt.Equal(time.Date(2024, 5, 1, 11, 0, 0, 0, time.UTC)) {
		t.Errorf("FindDispute(dp/1?x) = %+v, %v via %s; want dp_1 won via an escaped path", d, err, gotPath)
	}
}

// The new calls map the provider's answers as Charge does.
func TestClientBooksErrorMapping(t *testing.T) {
	const dispute = `{"id":"dp_1","charge_id":"ch_1","idempotency_key":"k","order_id":"o","amount":"12.30","currency":"USD","status":"open","reason":"fraudulent","created_at":"2024-05-01T10:00:00Z","closed_at":null}`
	const refund = `{"id":"re_1","idempotency_key":"r","charge_id":"ch_1","order_id":"o","amount":"1.00","currency":"USD","status":"succeeded","created_at":"2024-05-01T10:00:00Z"}`
	const charge = `{"id":"ch_1","idempotency_key":"k","order_id":"o","amount":"12.30","currency":"USD","payment_method":"pm_ok","status":"succeeded","failure_code":"","refunded_amount":"0.00","disputed_amount":"12.30","created_at":"2024-05-01T10:00:00.5Z"}`
	from, to := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC), time.Date(2024, 5, 2, 0, 0, 0, 0, time.UTC)
	calls := map[string]func(*provider.Client) error{
		"FindCharge": func(c *provider.Client) error {
			_, err := c.FindCharge(context.Background(), "ch_1")
			return err
		},
		"ListRefunds": func(c *provider.Client) error {
			_, err := c.ListRefunds(context.Background(), from, to)
			return err
		},
		"ListDisputes": func(c *provider.Client) error {
			_, err := c.ListDisputes(context.Background(), from, to)
			return err
		},
	}
	tests := []struct {
		name            string
		h               http.HandlerFunc
		wantUnavailable bool
		wantNotFound    bool
		wantCode        string
	}{
		{"500", status(500, `{"error":{"code":"internal_error"}}`), true, false, ""},
		{"garbled 200", status(200, `{"data":`), true, false, ""},
		{"400", status(400, `{"error":{"code":"validation_failed","message":"no"}}`), false, false, "validation_failed"},
		{"404", status(404, `{"error":{"code":"charge_not_found","message":"no"}}`), false, true, "charge_not_found"},
		{"bare 404", status(404, `not found`), true, false, ""},
	}
	for name, call := range calls {
		for _, tt := range tests {
			c, _ := fake(t, tt.h)
			err := call(c)
			if err == nil {
				t.Errorf("%s %s: nil error", name, tt.name)
				continue
			}
			if got := errors.Is(err, domain.ErrProviderUnavailable); got != tt.wantUnavailable {
				t.Errorf("%s %s: errors.Is(%v, ErrProviderUnavailable) = %v, want %v", name, tt.name, err, got, tt.wantUnavailable)
			}
			if got := errors.Is(err, domain.ErrChargeNotFound); got != tt.wantNotFound {
				t.Errorf("%s %s: errors.Is(%v, ErrChargeNotFound) = %v, want %v", name, tt.name, err, got, tt.wantNotFound)
			}
			if !tt.wantUnavailable && !domain.IsProviderRequestError(err, tt.wantCode) {
				t.Errorf("%s %s: %v is not a ProviderRequestError with code %q", name, tt.name, err, tt.wantCode)
			}
		}
	}

	// What the client reads, and what it refuses to guess at.
	var gotPath string
	c, _ := fake(t, func(w http.ResponseWriter, r *http.Request) {
		gotPath = r.URL.RequestURI()
		switch {
		case strings.HasPrefix(r.URL.Path, "/v1/charges/by-id/"):
			status(200, charge)(w, r)
		case r.URL.Path == "/v1/refunds":
			status(200, `{"data":[`+refund+`]}`)(w, r)
		default:
			status(200, `{"data":[`+dispute+`,`+strings.NewReplacer(`"open"`, `"lost"`, `null`, `"2024-05-01T11:00:00Z"`, "dp_1", "dp_2").Replace(dispute)+`]}`)(w, r)
		}
	})
	ch, err := c.FindCharge(context.Background(), "ch/1")
	if err != nil || gotPath != "/v1/charges/by-id/ch%2F1" || !ch.DisputedAmount.Equal(decimal.RequireFromString("12.30")) {
		t.Errorf("FindCharge(ch/1) = %+v, %v via %s; want 12.30 disputed via an escaped path", ch, err, gotPath)
	}
	rs, err := c.ListRefunds(context.Background(), from, to)
	if err != nil || len(rs) != 1 || rs[0].OrderID != "o" || gotPath != "/v1/refunds?from=2024-05-01T00%3A00%3A00Z&to=2024-05-02T00%3A00%3A00Z&limit=500" {
		t.Errorf("ListRefunds = %+v, %v via %s", rs, err, gotPath)
	}
	ds, err := c.ListDisputes(context.Background(), from, to)
	if err != nil || len(ds) != 2 || ds[0].Status != domain.DisputeOpen || !ds[0].ClosedAt.IsZero() ||
		ds[1].Status != domain.DisputeLost || !ds[1].ClosedAt.Equal(time.Date(2024, 5, 1, 11, 0, 0, 0, time.UTC)) ||
		gotPath != "/v1/disputes?from=2024-05-01T00%3A00%3A00Z&to=2024-05-02T00%3A00%3A00Z" {
		t.Errorf("ListDisputes = %+v, %v via %s", ds, err, gotPath)
	}
	for name, body := range map[string]string{
		"unknown dispute status": `{"data":[` + strings.Replace(dispute, `"open"`, `"pending"`, 1) + `]}`,
		"bad dispute amount":     `{"data":[` + strings.Replace(dispute, `"12.30"`, `"lots"`, 1) + `]}`,
		"bad closed_at":          `{"data":[` + strings.Replace(dispute, `null`, `"yesterday"`, 1) + `]}`,
	} {
		c, _ := fake(t, status(200, body))
		if _, err := c.ListDisputes(context.Background(), from, to); !errors.Is(err, domain.ErrProviderUnavailable) {
			t.Errorf("ListDisputes(%s) = %v, want ErrProviderUnavailable", name, err)
		}
	}
	c, _ = fake(t, status(200, strings.Replace(charge, `"12.30","created_at"`, `"x","created_at"`, 1)))
	if _, err := c.FindCharge(context.Background(), "ch_1"); !errors.Is(err, domain.ErrProviderUnavailable) {
		t.Errorf("FindCharge(bad disputed_amount) = %v, want ErrProviderUnavailable", err)
	}
}

// TestMarkUnreachable: a connection to the provider refused, reset or
// broken is marked unreachable (payd answers 503); anything else passes
// unchanged, its cause kept.
func TestMarkUnreachable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tests := []struct {
		err         error
		unreachable bool
	}{
		{fmt.Errorf("%w: %w", domain.ErrProviderUnavailable, refused), true},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{fmt.Errorf("%w: %w", domain.ErrProviderUnavailable, context.DeadlineExceeded), false},
		{fmt.Errorf("%w: status 503", domain.ErrProviderUnavailable), false},
		{errors.New("boom"), false},
	}
	for _, tt := range tests {
		got := provider.MarkUnreachable(tt.err)
		if errors.Is(got, domain.ErrProviderUnreachable) != tt.unreachable {
			t.Errorf("MarkUnreachable(%v) = %v, want unreachable %v", tt.err, got, tt.unreachable)
		}
		if !errors.Is(got, tt.err) {
			t.Errorf("MarkUnreachable(%v) = %v, lost the cause", tt.err, got)
		}
	}
	if provider.MarkUnreachable(nil) != nil {
		t.Error("MarkUnreachable(nil) != nil")
	}
}

// TestListRefundsPages: ListRefunds follows has_more page after page,
// each after the last refund of the one before, and returns them all in
// order; a provider whose next page does not move on fails the walk
// (ErrProviderUnavailable) instead of looping or ending early, and so does
// one whose pages go round.
func TestListRefundsPages(t *testing.T) {
	refund := func(id string) string {
		return `{"id":"` + id + `","idempotency_key":"k` + id + `","charge_id":"ch_1","order_id":"o","amount":"1.00","currency":"USD","status":"succeeded","created_at":"2024-05-01T10:00:00Z"}`
	}
	ids := []string{"re_1", "re_2", "re_3", "re_4", "re_5"}
	var afters []string
	c, _ := fake(t, func(w http.ResponseWriter, r *http.Request) {
		after := r.URL.Query().Get("starting_after")
		afters = append(afters, after)
		i := slices.Index(ids, after) + 1 // pages of two
		end := min(i+2, len(ids))
		var data []string
		for _, id := range ids[i:end] {
			data = append(data, refund(id))
		}
		status(200, `{"data":[`+strings.Join(data, ",")+`],"has_more":`+strconv.FormatBool(end < len(ids))+`}`)(w, r)
	})
	from := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	rs, err := c.ListRefunds(context.Background(), from, from.Add(24*time.Hour))
	var got []string
	for _, r := range rs {
		got = append(got, r.ID)
	}
	if err != nil || !slices.Equal(got, ids) || !slices.Equal(afters, []string{"", "re_2", "re_4"}) {
		t.Errorf("ListRefunds = %v, %v after %q; want %v in pages after \"\", re_2, re_4", got, err, afters, ids)
	}

	stuck, _ := fake(t, status(200, `{"data":[`+refund("re_1")+`],"has_more":true}`))
	if _, err := stuck.ListRefunds(context.Background(), from, from.Add(24*time.Hour)); !errors.Is(err, domain.ErrProviderUnavailable) {
		t.Errorf("ListRefunds(a stuck cursor) = %v, want ErrProviderUnavailable", err)
	}
	// A provider whose pages go round (re_1, re_2, re_1 again).
	cycling, _ := fake(t, func(w http.ResponseWriter, r *http.Request) {
		next := map[string]string{"": "re_1", "re_1": "re_2", "re_2": "re_1"}[r.URL.Query().Get("starting_after")]
		status(200, `{"data":[`+refund(next)+`],"has_more":true}`)(w, r)
	})
	if _, err := cycling.ListRefunds(context.Background(), from, from.Add(24*time.Hour)); !errors.Is(err, domain.ErrProviderUnavailable) {
		t.Errorf("ListRefunds(pages that go round) = %v, want ErrProviderUnavailable", err)
	}
	empty, _ := fake(t, status(200, `{"data":[],"has_more":true}`))
	if _, err := empty.ListRefunds(context.Background(), from, from.Add(24*time.Hour)); !errors.Is(err, domain.ErrProviderUnavailable) {
		t.Errorf("ListRefunds(an empty page with more) = %v, want ErrProviderUnavailable", err)
	}
}
