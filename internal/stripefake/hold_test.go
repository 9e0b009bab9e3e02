package stripefake_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/payd/payd/internal/stripefake"
)

// post sends form to path under Idempotency-Key key ("" for none) and
// returns the status and the body as sent.
func post(t *testing.T, f *stripefake.Fake, path, key string, form url.Values) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.URL()+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// hold creates a manual-capture PaymentIntent of 19.90 EUR paid with pm.
func hold(t *testing.T, f *stripefake.Fake, attempt, pm string) stripe.PaymentIntent {
	t.Helper()
	form := url.Values{"amount": {"1990"}, "currency": {"eur"}, "payment_method": {pm}, "confirm": {"true"},
		"capture_method": {"manual"}, "metadata[payd_attempt]": {attempt}, "expand[0]": {"latest_charge"}}
	st, body := post(t, f, "/v1/payment_intents", attempt, form)
	var pi stripe.PaymentIntent
	if err := json.Unmarshal(body, &pi); err != nil || st != 200 {
		t.Fatalf("create manual = %d %s", st, body)
	}
	return pi
}

// stripeErr reads a Stripe error body.
func stripeErr(t *testing.T, body []byte) stripe.Error {
	t.Helper()
	var e struct{ Error stripe.Error }
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	return e.Error
}

func count(events []stripefake.Event, typ string) int {
	n := 0
	for _, e := range events {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// A manual-capture PaymentIntent paid with a good card is held: its
// charge succeeded, uncaptured, capture_before a week after creation.
// One capture takes part of it, once per key (a repeat answers the same
// bytes, other parameters under the key are refused); the rest is
// released, counted refunded on the charge; a second capture is
// refused, and refunds are bounded by what was captured.
func TestHoldCapture(t *testing.T) {
	f := stripefake.New(t.Cleanup)
	created := time.Unix(1_800_000_000, 0)
	f.SetNow(func() time.Time { return created })
	pi := hold(t, f, "att-h", stripefake.PMVisa)
	ch := pi.LatestCharge
	if pi.Status != stripe.PaymentIntentStatusRequiresCapture || pi.CaptureMethod != stripe.PaymentIntentCaptureMethodManual ||
		pi.AmountCapturable != 1990 || pi.AmountReceived != 0 || ch == nil || ch.Status != stripe.ChargeStatusSucceeded || ch.Captured ||
		ch.PaymentMethodDetails == nil || ch.PaymentMethodDetails.Card == nil ||
		ch.PaymentMethodDetails.Card.CaptureBefore != created.Add(stripefake.HoldWindow).Unix() {
		t.Fatalf("manual create = %+v, charge %+v", pi, ch)
	}
	if n := count(f.Events(), "payment_intent.amount_capturable_updated"); n != 1 {
		t.Fatalf("amount_capturable_updated events = %d, want 1", n)
	}

	path := "/v1/payment_intents/" + pi.ID + "/capture"
	if st, body := post(t, f, path, "cap-big", url.Values{"amount_to_capture": {"1991"}}); st != 400 || stripeErr(t, body).Code != stripe.ErrorCodeAmountTooLarge {
		t.Fatalf("capture 1991 of 1990 = %d %s, want 400 amount_too_large", st, body)
	}
	form := url.Values{"amount_to_capture": {"1000"}, "expand[0]": {"latest_charge"}}
	st, first := post(t, f, path, "cap-1", form)
	var got stripe.PaymentIntent
	if err := json.Unmarshal(first, &got); err != nil || st != 200 || got.Status != stripe.PaymentIntentStatusSucceeded ||
		got.AmountReceived != 1000 || got.AmountCapturable != 0 || got.LatestCharge == nil || !got.LatestCharge.Captured ||
		got.LatestCharge.AmountCaptured != 1000 || got.LatestCharge.AmountRefunded != 990 {
		t.Fatalf("capture 1000 = %d %s", st, first)
	}
	if st, again := post(t, f, path, "cap-1", form); st != 200 || !bytes.Equal(again, first) {
		t.Fatalf("capture under its key again = %d %s, want the first answer", st, again)
	}
	if st, body := post(t, f, path, "cap-1", url.Values{"amount_to_capture": {"1100"}}); st != 400 || stripeErr(t, body).Type != stripe.ErrorTypeIdempotency {
		t.Fatalf("capture key with another amount = %d %s, want 400 idempotency_error", st, body)
	}
	st, body := post(t, f, path, "cap-2", url.Values{"amount_to_capture": {"990"}})
	if e := stripeErr(t, body); st != 400 || e.Code != stripe.ErrorCodePaymentIntentUnexpectedState || e.PaymentIntent == nil || e.PaymentIntent.ID != pi.ID {
		t.Fatalf("second capture = %d %s, want 400 payment_intent_unexpected_state with the PaymentIntent", st, body)
	}
	evs := f.Events()
	if count(evs, "charge.captured") != 1 || count(evs, "payment_intent.succeeded") != 1 {
		t.Fatalf("events = %v, want one charge.captured and one payment_intent.succeeded", evs)
	}
	if st, body := post(t, f, "/v1/refunds", "", url.Values{"payment_intent": {pi.ID}, "amount": {"1001"}}); st != 400 {
		t.Fatalf("refund of 1001 of 1000 captured = %d %s, want 400", st, body)
	}
	if st, body := post(t, f, "/v1/refunds", "", url.Values{"payment_intent": {pi.ID}, "amount": {"1000"}}); st != 200 {
		t.Fatalf("refund of all that was captured = %d %s", st, body)
	}
}

// A hold's cancel releases it all (its charge refunded whole, still the
// succeeded authorization it was); a capture after is refused. A hold
// left uncaptured lapses as Stripe cancels it: cancellation_reason
// automatic. An automatic PaymentIntent cannot be captured, and its
// charge names no capture_before.
func TestHoldCancelAndLapse(t *testing.T) {
	f := stripefake.New(t.Cleanup)
	pi := hold(t, f, "att-v", stripefake.PMVisa)
	cancel := "/v1/payment_intents/" + pi.ID + "/cancel"
	form := url.Values{"expand[0]": {"latest_charge"}}
	st, first := post(t, f, cancel, "void-1", form)
	var got stripe.PaymentIntent
	if err := json.Unmarshal(first, &got); err != nil || st != 200 || got.Status != stripe.PaymentIntentStatusCanceled ||
		got.CancellationReason != stripe.PaymentIntentCancellationReasonRequestedByCustomer || got.AmountCapturable != 0 ||
		got.LatestCharge == nil || got.LatestCharge.Status != stripe.ChargeStatusSucceeded || got.LatestCharge.Captured ||
		!got.LatestCharge.Refunded || got.LatestCharge.AmountRefunded != 1990 {
		t.Fatalf("cancel of a hold = %d %s", st, first)
	}
	if st, again := post(t, f, cancel, "void-1", form); st != 200 || !bytes.Equal(again, first) {
		t.Fatalf("cancel under its key again = %d %s, want the first answer", st, again)
	}
	for _, p := range []string{cancel, "/v1/payment_intents/" + pi.ID + "/capture"} {
		if st, body := post(t, f, p, "other", nil); st != 400 || stripeErr(t, body).Code != stripe.ErrorCodePaymentIntentUnexpectedState {
			t.Errorf("POST %s after the cancel = %d %s, want 400 payment_intent_unexpected_state", p, st, body)
		}
	}

	lapsing := hold(t, f, "att-l", stripefake.PMVisa)
	if err := f.LapseHold(lapsing.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.LapseHold(lapsing.ID); err == nil {
		t.Error("a lapsed hold lapsed again")
	}
	var lapsed stripe.PaymentIntent
	if st := call(t, f, http.MethodGet, "/v1/payment_intents/"+lapsing.ID, nil, &lapsed); st != 200 ||
		lapsed.Status != stripe.PaymentIntentStatusCanceled || lapsed.CancellationReason != stripe.PaymentIntentCancellationReasonAutomatic {
		t.Fatalf("lapsed hold = %d %+v", st, lapsed)
	}

	auto := pay(t, f, "att-auto")
	if auto.CaptureMethod != stripe.PaymentIntentCaptureMethodAutomatic || auto.AmountCapturable != 0 {
		t.Fatalf("automatic create = %+v", auto)
	}
	if err := f.LapseHold(auto.ID); err == nil {
		t.Error("an automatic PaymentIntent lapsed")
	}
	if st, body := post(t, f, "/v1/payment_intents/"+auto.ID+"/capture", "cap-auto", nil); st != 400 || stripeErr(t, body).Code != stripe.ErrorCodePaymentIntentUnexpectedState {
		t.Errorf("capture of an automatic PaymentIntent = %d %s, want 400 payment_intent_unexpected_state", st, body)
	}
	var ch stripe.Charge
	if st := call(t, f, http.MethodGet, "/v1/charges/"+auto.LatestCharge.ID, nil, &ch); st != 200 || ch.PaymentMethodDetails != nil || !ch.Captured {
		t.Errorf("automatic charge = %d %+v, want captured, no capture_before", st, ch)
	}
}

// A manual PaymentIntent that needs 3-D Secure is held once the customer
// passes it, and declined ones hold nothing; capture_method must be one
// Stripe knows.
func TestHoldAfter3DS(t *testing.T) {
	f := stripefake.New(t.Cleanup)
	pi := hold(t, f, "att-3ds", stripefake.PM3DS)
	if pi.Status != stripe.PaymentIntentStatusRequiresAction {
		t.Fatalf("manual 3DS = %s, want requires_action", pi.Status)
	}
	f.Authenticate(pi.ID, true)
	if st := f.Status(pi.ID); st != "requires_capture" {
		t.Fatalf("manual 3DS after authentication = %s, want requires_capture", st)
	}
	form := url.Values{"amount": {"1990"}, "currency": {"eur"}, "payment_method": {stripefake.PMDeclined}, "confirm": {"true"},
		"capture_method": {"manual"}}
	if st, body := post(t, f, "/v1/payment_intents", "att-declined", form); st != 402 {
		t.Fatalf("manual declined = %d %s, want 402", st, body)
	}
	form.Set("capture_method", "later")
	if st, body := post(t, f, "/v1/payment_intents", "att-later", form); st != 400 {
		t.Fatalf("capture_method later = %d %s, want 400", st, body)
	}
}
