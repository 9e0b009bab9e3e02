package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// TestClientHoldFields: a charge's hold fields are read only when they
// hang together. A provider that calls an automatic charge authorized,
// captures more than the charge, or captures a charge that did not
// succeed is answering something payd cannot believe: the outcome is
// unknown (ErrProviderUnavailable), never a hold or a payment.
func TestClientHoldFields(t *testing.T) {
	const base = `{"id":"ch_1","idempotency_key":"k","order_id":"o","amount":"12.30","currency":"USD","payment_method":"pm_ok","failure_code":"","refunded_amount":"0.00","created_at":"2024-05-01T10:00:00Z",`
	good := []struct {
		name, body string
		status     domain.ChargeStatus
		captured   string
		before     time.Time
	}{
		{"automatic, no hold fields", base + `"status":"succeeded"}`, domain.ChargeSucceeded, "12.30", time.Time{}},
		{"automatic, said", base + `"status":"succeeded","capture_method":"automatic","amount_captured":"12.30"}`, domain.ChargeSucceeded, "12.30", time.Time{}},
		// An automatic charge's amount_captured is not read: a reply whose
		// amount was rewritten stays the provider's word on the amount.
		{"automatic, captured otherwise", base + `"status":"succeeded","capture_method":"automatic","amount_captured":"99.00"}`, domain.ChargeSucceeded, "12.30", time.Time{}},
		{"automatic failed, captured", base + `"status":"failed","amount_captured":"12.30"}`, domain.ChargeFailed, "0", time.Time{}},
		{"held", base + `"status":"authorized","capture_method":"manual","amount_captured":"0.00","capture_before":"2024-05-08T10:00:00Z"}`,
			domain.ChargeAuthorized, "0", time.Date(2024, 5, 8, 10, 0, 0, 0, time.UTC)},
		{"captured in part", base + `"status":"succeeded","capture_method":"manual","amount_captured":"10.00"}`, domain.ChargeSucceeded, "10.00", time.Time{}},
		{"voided", base + `"status":"voided","capture_method":"manual","amount_captured":"0.00"}`, domain.ChargeVoided, "0", time.Time{}},
	}
	for _, tt := range good {
		c, _ := fake(t, status(200, tt.body))
		ch, err := c.FindCharge(context.Background(), "ch_1")
		if err != nil || ch.Status != tt.status || !ch.AmountCaptured.Equal(dec(tt.captured)) || !ch.CaptureBefore.Equal(tt.before) {
			t.Errorf("%s: FindCharge = %+v, %v; want %s, %s captured, capture_before %v", tt.name, ch, err, tt.status, tt.captured, tt.before)
		}
	}
	bad := map[string]string{
		"automatic authorized":       base + `"status":"authorized","capture_before":"2024-05-08T10:00:00Z"}`,
		"automatic voided":           base + `"status":"voided"}`,
		"captured more than charged": base + `"status":"succeeded","capture_method":"manual","amount_captured":"12.31"}`,
		"captured but held":          base + `"status":"authorized","capture_method":"manual","amount_captured":"1.00","capture_before":"2024-05-08T10:00:00Z"}`,
		"held without a deadline":    base + `"status":"authorized","capture_method":"manual","amount_captured":"0.00"}`,
		"captured without an amount": base + `"status":"succeeded","capture_method":"manual"}`,
		"negative capture":           base + `"status":"succeeded","capture_method":"manual","amount_captured":"-1.00"}`,
		"unknown capture method":     base + `"status":"succeeded","capture_method":"later"}`,
	}
	for name, body := range bad {
		c, _ := fake(t, status(200, body))
		if ch, err := c.FindCharge(context.Background(), "ch_1"); !errors.Is(err, domain.ErrProviderUnavailable) {
			t.Errorf("%s: FindCharge = %+v, %v; want ErrProviderUnavailable", name, ch, err)
		}
		if ch, err := c.Capture(context.Background(), domain.CaptureRequest{IdempotencyKey: "c", ChargeID: "ch_1", Amount: dec("1.00"), Currency: "USD"}); !errors.Is(err, domain.ErrProviderUnavailable) {
			t.Errorf("%s: Capture = %+v, %v; want ErrProviderUnavailable", name, ch, err)
		}
	}
}

// TestClientHoldWire: what a manual charge, a capture and a void send.
func TestClientHoldWire(t *testing.T) {
	type sent struct {
		path, key string
		body      map[string]any
	}
	var got []sent
	c, _ := fake(t, func(w http.ResponseWriter, r *http.Request) {
		var b map[string]any
		_ = json.NewDecoder(r.Body).Decode(&b)
		got = append(got, sent{r.URL.Path, r.Header.Get("Idempotency-Key"), b})
		status(503, ``)(w, r)
	})
	ctx := context.Background()
	req := chargeReq("a1", "pm_ok")
	req.CaptureMethod = domain.CaptureManual
	_, err1 := c.Charge(ctx, req)
	_, err2 := c.Capture(ctx, domain.CaptureRequest{IdempotencyKey: "cap-1", ChargeID: "ch_1", Amount: dec("10"), Currency: "USD"})
	_, err3 := c.Void(ctx, domain.VoidRequest{IdempotencyKey: "void-1", ChargeID: "ch_1"})
	for i, err := range []error{err1, err2, err3} {
		if !errors.Is(err, domain.ErrProviderUnavailable) {
			t.Errorf("call %d on a 503 = %v; want ErrProviderUnavailable", i, err)
		}
	}
	want := []string{
		`/v1/charges a1 {"amount":"12.30","capture_method":"manual","currency":"USD","order_id":"ord-a1","payment_method":"pm_ok"}`,
		`/v1/captures cap-1 {"amount":"10.00","charge_id":"ch_1","currency":"USD"}`,
		`/v1/voids void-1 {"charge_id":"ch_1"}`,
	}
	var lines []string
	for _, s := range got {
		b, _ := json.Marshal(s.body)
		lines = append(lines, s.path+" "+s.key+" "+string(b))
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("sent\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }
