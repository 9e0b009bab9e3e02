package stripeprovider_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider/stripeprovider"
)

// TestPaymentIntentStatuses reads each PaymentIntent status, automatic
// and manual, as Stripe answers it (JSON, through FindCharge). An
// automatic PaymentIntent reads as it always has, all of it captured once
// succeeded; a hold is authorized until capture_before (its charge's, else
// a week after creation), captured for what amount_received says (the
// part its capture released is no refund), and voided if cancelled after
// it held money (lapsed when Stripe cancelled it automatically), failed
// if cancelled before.
func TestPaymentIntentStatuses(t *testing.T) {
	const created = 1_800_000_000
	createdAt := time.Unix(created, 0).UTC()
	before := createdAt.Add(5 * 24 * time.Hour)
	charge := func(status string, refunded int64, extra string) string {
		return fmt.Sprintf(`{"id":"ch_1","object":"charge","status":%q,"amount":1990,"amount_refunded":%d%s}`, status, refunded, extra)
	}
	card := fmt.Sprintf(`,"payment_method_details":{"type":"card","card":{"capture_before":%d}}`, before.Unix())
	declined := `"last_payment_error":{"type":"card_error","code":"card_declined","decline_code":"insufficient_funds"}`
	for _, tt := range []struct {
		name, fields string
		status       domain.ChargeStatus
		method       domain.CaptureMethod
		code         string
		captured     string
		refunded     string
		before       time.Time
	}{
		{"automatic succeeded", `"status":"succeeded","capture_method":"automatic","amount_received":1990,"latest_charge":` + charge("succeeded", 500, ""),
			domain.ChargeSucceeded, domain.CaptureAutomatic, "", "19.90", "5.00", time.Time{}},
		{"automatic_async succeeded", `"status":"succeeded","capture_method":"automatic_async","amount_received":1990`,
			domain.ChargeSucceeded, domain.CaptureAutomatic, "", "19.90", "0", time.Time{}},
		{"automatic requires_capture", `"status":"requires_capture","capture_method":"automatic"`,
			domain.ChargePending, domain.CaptureAutomatic, "", "0", "0", time.Time{}},
		{"automatic canceled", `"status":"canceled","capture_method":"automatic","cancellation_reason":"automatic","latest_charge":"ch_1"`,
			domain.ChargeFailed, domain.CaptureAutomatic, "canceled", "0", "0", time.Time{}},
		{"automatic declined", `"status":"requires_payment_method","capture_method":"automatic",` + declined,
			domain.ChargeFailed, domain.CaptureAutomatic, "insufficient_funds", "0", "0", time.Time{}},
		{"held, capture_before said", `"status":"requires_capture","capture_method":"manual","amount_capturable":1990,"latest_charge":` + charge("succeeded", 0, card),
			domain.ChargeAuthorized, domain.CaptureManual, "", "0", "0", before},
		{"held, capture_before not said", `"status":"requires_capture","capture_method":"manual","amount_capturable":1990,"latest_charge":"ch_1"`,
			domain.ChargeAuthorized, domain.CaptureManual, "", "0", "0", createdAt.Add(stripeprovider.HoldWindow)},
		{"captured in part, then refunded", `"status":"succeeded","capture_method":"manual","amount_received":1000,"latest_charge":` + charge("succeeded", 990+400, card),
			domain.ChargeSucceeded, domain.CaptureManual, "", "10.00", "4.00", time.Time{}},
		{"captured whole", `"status":"succeeded","capture_method":"manual","amount_received":1990,"latest_charge":"ch_1"`,
			domain.ChargeSucceeded, domain.CaptureManual, "", "19.90", "0", time.Time{}},
		{"voided", `"status":"canceled","capture_method":"manual","cancellation_reason":"requested_by_customer","latest_charge":` + charge("succeeded", 1990, card),
			domain.ChargeVoided, domain.CaptureManual, "", "0", "0", time.Time{}},
		{"voided, no reason", `"status":"canceled","capture_method":"manual","latest_charge":` + charge("succeeded", 1990, card),
			domain.ChargeVoided, domain.CaptureManual, "", "0", "0", time.Time{}},
		{"voided, charge not expanded", `"status":"canceled","capture_method":"manual","cancellation_reason":"abandoned","latest_charge":"ch_1"`,
			domain.ChargeVoided, domain.CaptureManual, "", "0", "0", time.Time{}},
		{"lapsed", `"status":"canceled","capture_method":"manual","cancellation_reason":"automatic","latest_charge":` + charge("succeeded", 1990, card),
			domain.ChargeVoided, domain.CaptureManual, domain.HoldLapsed, "0", "0", time.Time{}},
		{"lapsed, charge not expanded", `"status":"canceled","capture_method":"manual","cancellation_reason":"automatic","latest_charge":"ch_1"`,
			domain.ChargeVoided, domain.CaptureManual, domain.HoldLapsed, "0", "0", time.Time{}},
		{"declined, then cancelled", `"status":"canceled","capture_method":"manual","cancellation_reason":"abandoned",` + declined + `,"latest_charge":` + charge("failed", 0, ""),
			domain.ChargeFailed, domain.CaptureManual, "insufficient_funds", "0", "0", time.Time{}},
		{"declined, then cancelled, charge not expanded", `"status":"canceled","capture_method":"manual",` + declined + `,"latest_charge":"ch_1"`,
			domain.ChargeFailed, domain.CaptureManual, "insufficient_funds", "0", "0", time.Time{}},
		{"cancelled awaiting 3-D Secure", `"status":"canceled","capture_method":"manual","cancellation_reason":"abandoned","latest_charge":null`,
			domain.ChargeFailed, domain.CaptureManual, "canceled", "0", "0", time.Time{}},
		{"manual declined", `"status":"requires_payment_method","capture_method":"manual",` + declined,
			domain.ChargeFailed, domain.CaptureManual, "insufficient_funds", "0", "0", time.Time{}},
		{"manual awaiting 3-D Secure", `"status":"requires_action","capture_method":"manual"`,
			domain.ChargePending, domain.CaptureManual, "", "0", "0", time.Time{}},
		{"manual processing", `"status":"processing","capture_method":"manual"`,
			domain.ChargePending, domain.CaptureManual, "", "0", "0", time.Time{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"id":"pi_1","object":"payment_intent","amount":1990,"currency":"eur","created":%d,`+
				`"metadata":{"payd_attempt":"att-1","payd_order":"ord-1"},%s}`, created, tt.fields)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if r.URL.Path != "/v1/payment_intents/pi_1" {
					w.WriteHeader(http.StatusNotFound)
					_, _ = w.Write([]byte(`{"error":{"type":"invalid_request_error","code":"resource_missing"}}`))
					return
				}
				_, _ = w.Write([]byte(body))
			}))
			t.Cleanup(srv.Close)
			c, err := stripeprovider.New(stripeprovider.Config{SecretKey: "sk_test_x", APIBase: srv.URL, Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ch, err := c.FindCharge(context.Background(), "pi_1")
			if err != nil || ch.Status != tt.status || ch.CaptureMethod != tt.method || ch.FailureCode != tt.code ||
				!ch.AmountCaptured.Equal(dec(tt.captured)) || !ch.RefundedAmount.Equal(dec(tt.refunded)) || !ch.CaptureBefore.Equal(tt.before) ||
				!ch.Amount.Equal(dec("19.90")) || ch.IdempotencyKey != "att-1" || ch.OrderID != "ord-1" {
				t.Errorf("FindCharge = %+v, %v\nwant %s %s code %q, %s captured, %s refunded, capture_before %v",
					ch, err, tt.status, tt.method, tt.code, tt.captured, tt.refunded, tt.before)
			}
		})
	}
}
