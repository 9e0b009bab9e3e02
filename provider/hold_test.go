package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
)

// heldCharge is a captured hold as the provider writes it.
const heldCharge = `{"id":"ch_1","idempotency_key":"k","order_id":"o","amount":"12.30","currency":"USD","payment_method":"pm_ok",` +
	`"status":"succeeded","failure_code":"","refunded_amount":"0.00","disputed_amount":"0.00","created_at":"2024-05-01T10:00:00.5Z",` +
	`"capture_method":"manual","captured":true,"amount_captured":"5.00","capture_before":"2024-05-08T10:00:00.5Z","void_reason":""}`

// Capture and Void map the provider's answers as every call does: an
// unknown outcome is ErrProviderUnavailable, a refusal a
// *ProviderRequestError with its code, the provider's 404 ErrChargeNotFound.
func TestClientHoldErrorMapping(t *testing.T) {
	hang := func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}
	tests := []struct {
		name            string
		h               http.HandlerFunc
		wantUnavailable bool
		wantNotFound    bool
		wantCode        string
	}{
		{"timeout", hang, true, false, ""},
		{"500", status(500, `{"error":{"code":"internal_error"}}`), true, false, ""},
		{"502 no body", status(502, ``), true, false, ""},
		{"garbled 200", status(200, `{"id":`), true, false, ""},
		{"unknown status", status(200, strings.Replace(heldCharge, `"succeeded"`, `"requires_capture"`, 1)), true, false, ""},
		{"bad amount_captured", status(200, strings.Replace(heldCharge, `"5.00"`, `"5,00"`, 1)), true, false, ""},
		{"bad capture_before", status(200, strings.Replace(heldCharge, `"2024-05-08T10:00:00.5Z"`, `"next week"`, 1)), true, false, ""},
		{"404", status(404, `{"error":{"code":"charge_not_found","message":"no"}}`), false, true, "charge_not_found"},
		{"already captured", status(409, `{"error":{"code":"charge_already_captured","message":"no"}}`), false, false, "charge_already_captured"},
		{"expired", status(409, `{"error":{"code":"authorization_expired","message":"no"}}`), false, false, "authorization_expired"},
		{"too large", status(422, `{"error":{"code":"amount_too_large","message":"no"}}`), false, false, "amount_too_large"},
		{"key reused", status(422, `{"error":{"code":"idempotency_key_reused","message":"no"}}`), false, false, "idempotency_key_reused"},
	}
	calls := map[string]func(c *provider.Client) error{
		"Capture": func(c *provider.Client) error {
			_, err := c.Capture(context.Background(), domain.CaptureRequest{IdempotencyKey: "cap", ChargeID: "ch_1", Amount: decimal.RequireFromString("5"), Currency: "USD"})
			return err
		},
		"Void": func(c *provider.Client) error {
			_, err := c.Void(context.Background(), domain.VoidRequest{IdempotencyKey: "void", ChargeID: "ch_1"})
			return err
		},
	}
	for call, do := range calls {
		for _, tt := range tests {
			c, _ := fake(t, tt.h)
			err := do(c)
			if err == nil {
				t.Errorf("%s(%s) = nil error", call, tt.name)
				continue
			}
			if got := errors.Is(err, domain.ErrProviderUnavailable); got != tt.wantUnavailable {
				t.Errorf("%s(%s): errors.Is(%v, ErrProviderUnavailable) = %v, want %v", call, tt.name, err, got, tt.wantUnavailable)
			}
			if got := errors.Is(err, domain.ErrChargeNotFound); got != tt.wantNotFound {
				t.Errorf("%s(%s): errors.Is(%v, ErrChargeNotFound) = %v, want %v", call, tt.name, err, got, tt.wantNotFound)
			}
			if !tt.wantUnavailable && !domain.IsProviderRequestError(err, tt.wantCode) {
				t.Errorf("%s(%s): %v is not a ProviderRequestError with code %q", call, tt.name, err, tt.wantCode)
			}
		}
	}
}

// Only a manual charge may be held or voided: an automatic one that says so
// is an unreadable reply, never a decline, so a pay takes no hold for one.
func TestClientHoldStatusOfAutomaticCharge(t *testing.T) {
	for _, st := range []string{"authorized", "voided"} {
		auto := strings.Replace(strings.Replace(heldCharge, `"succeeded"`, `"`+st+`"`, 1), `"capture_method":"manual",`, ``, 1)
		c, _ := fake(t, status(200, auto))
		if _, err := c.Charge(context.Background(), chargeReq("k", "pm_ok")); !errors.Is(err, domain.ErrProviderUnavailable) {
			t.Errorf("Charge(automatic, answered %s) = %v, want ErrProviderUnavailable", st, err)
		}
		held := strings.Replace(heldCharge, `"succeeded"`, `"`+st+`"`, 1)
		c, _ = fake(t, status(200, held))
		if ch, err := c.FindCharge(context.Background(), "ch_1"); err != nil || string(ch.Status) != st {
			t.Errorf("FindCharge(manual, %s) = %+v, %v; want %s", st, ch, err, st)
		}
	}
}

// The requests on the wire: the charge in the path, the key in the header,
// a capture's amount at the currency's scale (none for the whole hold),
// and a manual charge's capture_method; the answer's hold fields read back.
func TestClientHoldWireFormat(t *testing.T) {
	type seen struct {
		path, key string
		body      map[string]any
	}
	var got []seen
	c, n := fake(t, func(w http.ResponseWriter, r *http.Request) {
		s := seen{path: r.URL.Path, key: r.Header.Get("Idempotency-Key")}
		_ = json.NewDecoder(r.Body).Decode(&s.body)
		got = append(got, s)
		status(200, heldCharge)(w, r)
	})
	ctx := context.Background()
	ch, err := c.Capture(ctx, domain.CaptureRequest{IdempotencyKey: "cap-1", ChargeID: "ch_1", Amount: decimal.RequireFromString("5"), Currency: "USD"})
	wantBefore := time.Date(2024, 5, 8, 10, 0, 0, 5e8, time.UTC)
	if err != nil || !ch.Captured || !ch.AmountCaptured.Equal(decimal.RequireFromString("5")) || ch.CaptureMethod != domain.CaptureManual ||
		!ch.CaptureBefore.Equal(wantBefore) || ch.Status != domain.ChargeSucceeded {
		t.Errorf("Capture = %+v, %v; want 5.00 captured, capture_before %v", ch, err, wantBefore)
	}
	_, _ = c.Capture(ctx, domain.CaptureRequest{IdempotencyKey: "cap-2", ChargeID: "ch_1", Currency: "USD"})
	_, _ = c.Void(ctx, domain.VoidRequest{IdempotencyKey: "void-1", ChargeID: "ch_1"})
	manual := chargeReq("key-1", "pm_ok")
	manual.CaptureMethod = domain.CaptureManual
	_, _ = c.Charge(ctx, manual)
	want := []string{
		`/v1/charges/ch_1/capture cap-1 {"amount":"5.00","currency":"USD"}`,
		`/v1/charges/ch_1/capture cap-2 {}`,
		`/v1/charges/ch_1/void void-1 {}`,
		`/v1/charges key-1 {"amount":"12.30","capture_method":"manual","currency":"USD","order_id":"ord-key-1","payment_method":"pm_ok"}`,
	}
	if len(got) != len(want) {
		t.Fatalf("requests = %+v, want %d", got, len(want))
	}
	for i, s := range got {
		b, _ := json.Marshal(s.body)
		if line := s.path + " " + s.key + " " + string(b); line != want[i] {
			t.Errorf("request %d = %s, want %s", i, line, want[i])
		}
	}

	// An amount finer than the currency is refused, and nothing is sent.
	before := n.Load()
	if _, err := c.Capture(ctx, domain.CaptureRequest{IdempotencyKey: "cap-3", ChargeID: "ch_1", Amount: decimal.RequireFromString("1.005"), Currency: "USD"}); err == nil {
		t.Error("Capture(1.005 USD) = nil error, want a validation error")
	}
	if n.Load() != before {
		t.Error("Capture(1.005 USD) reached the provider")
	}
}
