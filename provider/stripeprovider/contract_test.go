package stripeprovider_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/testdeps"
	"github.com/payd/payd/provider/stripeprovider"
)

// stripeMockVersion is the stripe-mock the contract is checked against: it
// validates every request against Stripe's OpenAPI and answers fixtures.
const stripeMockVersion = "v0.203.0"

// stripeMock returns the base URL of a stripe-mock started for this test.
// It uses $STRIPE_MOCK_BIN, stripe-mock on PATH, or one installed earlier
// in the user cache; with PAYD_TEST_REQUIRE_STRIPE_MOCK=1 (CI) it installs
// it there with `go install` when missing, and a failure fails the test.
// Otherwise the test skips without it.
func stripeMock(t *testing.T) string {
	t.Helper()
	required := os.Getenv("PAYD_TEST_REQUIRE_STRIPE_MOCK") == "1"
	bin := findStripeMock(t, required)
	if bin == "" {
		testdeps.Skip(t, testdeps.StripeMock, "stripe-mock not found (set STRIPE_MOCK_BIN, or PAYD_TEST_REQUIRE_STRIPE_MOCK=1 to install it)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "-http-addr", addr)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start stripe-mock: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return "http://" + addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("stripe-mock did not listen on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func findStripeMock(t *testing.T, install bool) string {
	if p := os.Getenv("STRIPE_MOCK_BIN"); p != "" {
		return p
	}
	if p, err := exec.LookPath("stripe-mock"); err == nil {
		return p
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "payd", "stripe-mock-"+stripeMockVersion)
	bin := filepath.Join(dir, "stripe-mock")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if !install {
		return ""
	}
	cmd := exec.Command("go", "install", "github.com/stripe/stripe-mock@"+stripeMockVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install stripe-mock: %v\n%s", err, out)
	}
	return bin
}

// reporter is the part of *testing.T the contract check uses, so a test
// can check the check itself against a stripe-mock that is down.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Fatal(args ...any)
}

// accepted fails the test unless stripe-mock answered the request with
// success. A refusal (it did not match Stripe's OpenAPI), a 404, a 5xx or
// no answer at all fails it: the contract is proven only by a request
// stripe-mock accepted.
func accepted(t reporter, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: not accepted by stripe-mock: %v", what, err)
	}
}

// TestStripeMockContract sends every request the adapter makes to
// stripe-mock, which checks each against Stripe's OpenAPI specification.
func TestStripeMockContract(t *testing.T) {
	checkContract(t, stripeMock(t))
}

// recorder is a reporter that only counts failures.
type recorder struct{ failed int }

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed++ }
func (r *recorder) Fatal(...any)          { r.failed++ }

// The contract check fails when stripe-mock is not there or answers 5xx:
// no request that never got an answer counts as accepted.
func TestStripeMockContractFailsWithoutStripeMock(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":{"type":"api_error","message":"down"}}`))
	}))
	t.Cleanup(srv.Close)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for name, base := range map[string]string{"5xx": srv.URL, "down": closed.URL} {
		rec := &recorder{}
		checkContract(rec, base)
		if rec.failed < 27 {
			t.Errorf("stripe-mock %s: the contract check reported %d failures, want every call (27)", name, rec.failed)
		}
	}
}

func checkContract(t reporter, base string) {
	now := time.Now().UTC()
	store := &attempts{m: map[string]domain.Attempt{}}
	c, err := stripeprovider.New(stripeprovider.Config{SecretKey: "sk_test_123", APIBase: base, Timeout: 10 * time.Second,
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
		return
	}
	ctx := context.Background()
	req := domain.ChargeRequest{IdempotencyKey: "att-contract", OrderID: "ord-contract", Amount: decimal.RequireFromString("19.90"),
		Currency: "USD", PaymentMethod: "pm_card_visa"}

	_, err = c.Charge(ctx, req)
	accepted(t, "create and confirm a PaymentIntent", err)

	store.put(domain.Attempt{ID: "att-replay", OrderID: "ord", Status: domain.AttemptStarted, PaymentMethod: "pm_card_visa", Amount: req.Amount, Currency: "USD", CreatedAt: now})
	_, err = c.GetCharge(ctx, store.record("att-replay"))
	accepted(t, "replay the create", err)

	a := domain.Attempt{ID: "att-stored", Status: domain.AttemptUnknown, ProviderChargeID: "pi_123", Amount: req.Amount, Currency: "USD", CreatedAt: now}
	store.put(a)
	_, err = c.GetCharge(ctx, store.record("att-stored"))
	accepted(t, "retrieve a PaymentIntent", err)

	_, err = c.CancelCharge(ctx, a, "pi_123")
	accepted(t, "cancel a PaymentIntent", err)

	// A hold: stripe-mock answers canned PaymentIntents, so only that each
	// request is accepted and its answer reads is checked.
	manual := req
	manual.IdempotencyKey, manual.OrderID, manual.CaptureMethod = "att-contract-hold", "ord-contract-hold", domain.CaptureManual
	_, err = c.Charge(ctx, manual)
	accepted(t, "create and confirm a manual-capture PaymentIntent", err)

	_, err = c.Capture(ctx, domain.CaptureRequest{IdempotencyKey: "cap-contract", ChargeID: "pi_123", Amount: decimal.RequireFromString("10.00"), Currency: "USD"})
	accepted(t, "capture a PaymentIntent", err)

	_, err = c.Void(ctx, domain.VoidRequest{IdempotencyKey: "void-contract", ChargeID: "pi_123"})
	accepted(t, "cancel a manual-capture PaymentIntent (void)", err)

	store.put(domain.Attempt{ID: "att-old", Status: domain.AttemptFailed, Amount: req.Amount, Currency: "USD", CreatedAt: now.Add(-48 * time.Hour)})
	_, err = c.GetCharge(ctx, store.record("att-old"))
	accepted(t, "search PaymentIntents by metadata", err)

	_, err = c.Refund(ctx, domain.ProviderRefundRequest{IdempotencyKey: "rf-contract", ChargeID: "pi_123", Amount: decimal.RequireFromString("5.00"), Currency: "USD", Reason: "asked"})
	accepted(t, "create a refund", err)

	_, err = c.GetRefund(ctx, "re_123")
	accepted(t, "retrieve a refund", err)

	_, err = c.ListCharges(ctx, now.Add(-time.Hour), now, "")
	accepted(t, "list PaymentIntents", err)

	_, err = c.FindCharge(ctx, "pi_123")
	accepted(t, "find a charge by its PaymentIntent", err)

	_, err = c.FindCharge(ctx, "ch_123")
	accepted(t, "find a charge by its Charge", err)

	_, err = c.ListRefunds(ctx, now.Add(-time.Hour), now)
	accepted(t, "list refunds", err)

	_, err = c.ListDisputes(ctx, now.Add(-time.Hour), now)
	accepted(t, "list disputes", err)

	_, err = c.FindDispute(ctx, "dp_123")
	accepted(t, "retrieve a dispute", err)

	// The events payd fetches fresh: one of another API version for each
	// object type it reads.
	secret := "whsec_contract"
	w, err := c.Webhooks(secret)
	if err != nil {
		t.Fatal(err)
		return
	}
	pi, ch, re, dp := map[string]any{"id": "pi_123"}, map[string]any{"id": "ch_123"}, map[string]any{"id": "re_123"}, map[string]any{"id": "dp_123"}
	for typ, obj := range map[string]map[string]any{"payment_intent.succeeded": pi, "charge.refunded": ch,
		"refund.updated": re, "charge.dispute.created": dp, "charge.dispute.updated": dp,
		"charge.dispute.closed": dp, "charge.dispute.funds_withdrawn": dp, "charge.dispute.funds_reinstated": dp,
		"payment_intent.amount_capturable_updated": pi, "payment_intent.canceled": {"id": "pi_123", "capture_method": "manual"},
		"charge.captured": {"id": "ch_123", "payment_intent": "pi_123"}} {
		body, _ := json.Marshal(map[string]any{"id": "evt_" + typ, "object": "event", "api_version": "2019-01-01", "type": typ,
			"created": now.Unix(), "data": map[string]any{"object": obj}})
		sig := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: time.Now()}).Header
		_, _, err := w.Parse(ctx, body, sig)
		accepted(t, fmt.Sprintf("fetch the object of %s fresh", typ), err)
	}
}

// fixture returns stripe-mock's object at path, as Stripe's OpenAPI
// fixtures render it at the API version stripe-go pins.
func fixture(t *testing.T, base, path string) map[string]any {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("sk_test_123", "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var obj map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&obj); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d, %v", path, resp.StatusCode, err)
	}
	return obj
}

// Every dispute event payd reads, built around stripe-mock's dispute
// fixture at the pinned API version (read as sent, not fetched), maps to
// payd's event with the dispute's status in payd's terms; a Dashboard
// refund (stripe-mock's refund fixture: no payd metadata) is a
// refund.succeeded payd tells from its own by its empty key.
func TestStripeMockEventFixtures(t *testing.T) {
	base := stripeMock(t)
	c, err := stripeprovider.New(stripeprovider.Config{SecretKey: "sk_test_123", APIBase: base, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	secret := "whsec_fixture"
	w, err := c.Webhooks(secret)
	if err != nil {
		t.Fatal(err)
	}
	parse := func(typ string, obj map[string]any) domain.ProviderEvent {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"id": "evt_fixture", "object": "event", "api_version": stripe.APIVersion, "type": typ,
			"created": time.Now().Unix(), "livemode": false, "data": map[string]any{"object": obj}})
		sig := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: time.Now()}).Header
		_, pe, err := w.Parse(context.Background(), body, sig)
		if err != nil {
			t.Fatalf("Parse(%s) = %v", typ, err)
		}
		return pe
	}

	dp := fixture(t, base, "/v1/disputes/dp_123")
	if dp["status"] != "warning_needs_response" || dp["payment_intent"] != nil {
		t.Fatalf("stripe-mock's dispute fixture changed: %v", dp)
	}
	amount := fmt.Sprint(dp["amount"])
	for _, tt := range []struct {
		typ    string
		status string
		want   domain.ProviderEventType
		ds     domain.DisputeStatus
	}{
		{"charge.dispute.created", "warning_needs_response", domain.EventDisputeCreated, domain.DisputeOpen},
		{"charge.dispute.updated", "under_review", domain.EventDisputeUpdated, domain.DisputeOpen},
		{"charge.dispute.funds_withdrawn", "needs_response", domain.EventDisputeFundsWithdrawn, domain.DisputeOpen},
		{"charge.dispute.closed", "won", domain.EventDisputeClosed, domain.DisputeWon},
		{"charge.dispute.closed", "lost", domain.EventDisputeClosed, domain.DisputeLost},
		{"charge.dispute.closed", "warning_closed", domain.EventDisputeClosed, domain.DisputeWon},
		{"charge.dispute.funds_reinstated", "won", domain.EventDisputeFundsReinstated, domain.DisputeWon},
	} {
		dp["status"] = tt.status
		pe := parse(tt.typ, dp)
		// The fixture disputes a Charge with no PaymentIntent: its id is the charge's.
		if pe.Type != tt.want || pe.DisputeStatus != tt.ds || pe.DisputeID != dp["id"] || pe.ChargeID != dp["charge"] ||
			pe.AmountText != decimal.RequireFromString(amount).Shift(-2).StringFixed(2) || pe.Currency != "USD" ||
			pe.Reason != dp["reason"] || pe.OrderID != "" || pe.IdempotencyKey != "" {
			t.Errorf("Parse(%s, %s) = %+v", tt.typ, tt.status, pe)
		}
	}
	dp["payment_intent"] = "pi_123" // its PaymentIntent is looked up for payd's metadata (stripe-mock's has none)
	if pe := parse("charge.dispute.created", dp); pe.ChargeID != "pi_123" || pe.OrderID != "" || pe.IdempotencyKey != "" {
		t.Errorf("Parse(dispute of a PaymentIntent) = %+v", pe)
	}

	re := fixture(t, base, "/v1/refunds/re_123")
	if re["status"] != "succeeded" {
		t.Fatalf("stripe-mock's refund fixture changed: %v", re)
	}
	re["payment_intent"] = "pi_123"
	if pe := parse("refund.created", re); pe.Type != domain.EventRefundSucceeded || pe.RefundID != re["id"] || pe.IdempotencyKey != "" ||
		pe.ChargeID != "pi_123" || pe.Currency != "USD" || !pe.AmountReadable() {
		t.Errorf("Parse(Dashboard refund.created) = %+v", pe)
	}
}
