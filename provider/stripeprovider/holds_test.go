package stripeprovider_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/stripefake"
	"github.com/payd/payd/provider/stripeprovider"
)

// holdReq is attempt id's charge request, as a hold.
func (e *env) hold(id, pm string) domain.ChargeRequest {
	a, req := e.attempt(id, pm)
	a.CaptureMethod = domain.CaptureManual
	e.store.put(a)
	req.CaptureMethod = domain.CaptureManual
	return req
}

func capReq(key, chargeID, amount string) domain.CaptureRequest {
	return domain.CaptureRequest{IdempotencyKey: key, ChargeID: chargeID, Amount: decimal.RequireFromString(amount), Currency: "EUR"}
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// A manual charge is a hold: authorized, nothing captured, until its
// charge's capture_before. One capture takes part of it and a repeat of
// its key answers the same; another capture or a void is refused as
// captured already, and the charge reads as captured from then on, its
// refunds bounded by what was captured.
func TestHoldCaptured(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	created := time.Unix(1_800_000_000, 0).UTC()
	e.fake.SetNow(func() time.Time { return created })
	held, err := e.c.Charge(ctx, e.hold("att-h", stripefake.PMVisa))
	if err != nil || held.Status != domain.ChargeAuthorized || held.CaptureMethod != domain.CaptureManual || !held.AmountCaptured.IsZero() ||
		!held.CaptureBefore.Equal(created.Add(stripefake.HoldWindow)) || !strings.HasPrefix(held.ID, "pi_") || held.IdempotencyKey != "att-h" {
		t.Fatalf("Charge(manual) = %+v, %v; want authorized until a week on", held, err)
	}
	if _, err := e.c.Capture(ctx, capReq("cap-big", held.ID, "19.91")); !domain.IsProviderRequestError(err, domain.CaptureTooLarge) {
		t.Errorf("Capture(19.91 of 19.90) = %v, want %s", err, domain.CaptureTooLarge)
	}
	if _, err := e.c.Capture(ctx, capReq("cap-fine", held.ID, "1.001")); err == nil || domain.IsProviderRequestError(err, "") {
		t.Errorf("Capture(1.001 EUR) = %v, want refused before sending", err)
	}

	cap1 := capReq("cap-1", held.ID, "10.00")
	for i := range 2 { // the key again answers the same capture
		got, err := e.c.Capture(ctx, cap1)
		if err != nil || got.Status != domain.ChargeSucceeded || !got.AmountCaptured.Equal(dec("10.00")) || !got.Amount.Equal(dec("19.90")) ||
			!got.CaptureBefore.IsZero() || !got.RefundedAmount.IsZero() || got.ID != held.ID || got.OrderID != "ord-att-h" {
			t.Fatalf("Capture(10.00) #%d = %+v, %v; want succeeded with 10.00 of 19.90 captured", i+1, got, err)
		}
	}
	if n := e.fake.Count("POST /v1/payment_intents/" + held.ID + "/capture"); n != 3 {
		t.Fatalf("captures sent = %d, want 3", n)
	}
	if _, err := e.c.Capture(ctx, capReq("cap-1", held.ID, "11.00")); !domain.IsProviderRequestError(err, "idempotency_key_reused") {
		t.Errorf("the capture's key for 11.00 = %v, want idempotency_key_reused", err)
	}
	if _, err := e.c.Capture(ctx, capReq("cap-2", held.ID, "2.00")); !domain.IsProviderRequestError(err, domain.ChargeAlreadyCaptured) {
		t.Errorf("a second capture = %v, want %s", err, domain.ChargeAlreadyCaptured)
	}
	if _, err := e.c.Void(ctx, domain.VoidRequest{IdempotencyKey: "void-1", ChargeID: held.ID}); !domain.IsProviderRequestError(err, domain.ChargeAlreadyCaptured) {
		t.Errorf("a void of a captured hold = %v, want %s", err, domain.ChargeAlreadyCaptured)
	}
	if _, err := e.c.Refund(ctx, domain.ProviderRefundRequest{IdempotencyKey: "rf-1", ChargeID: held.ID, Amount: dec("4.00"), Currency: "EUR"}); err != nil {
		t.Fatal(err)
	}
	found, err := e.c.FindCharge(ctx, held.ID)
	if err != nil || found.Status != domain.ChargeSucceeded || !found.AmountCaptured.Equal(dec("10.00")) || !found.RefundedAmount.Equal(dec("4.00")) {
		t.Errorf("FindCharge = %+v, %v; want 10.00 captured, 4.00 refunded (the 9.90 released is no refund)", found, err)
	}
	if _, err := e.c.Refund(ctx, domain.ProviderRefundRequest{IdempotencyKey: "rf-2", ChargeID: held.ID, Amount: dec("6.01"), Currency: "EUR"}); !domain.IsProviderRequestError(err, "") {
		t.Errorf("refund beyond what was captured = %v, want a refusal", err)
	}
}

// A void gives the hold up, and a repeat of its key answers the same; a
// capture or another void after it is refused as voided. A hold Stripe
// let lapse reads voided, authorization_expired, and refuses both so.
// What never held anything (an automatic charge, a declined hold) is not
// capturable.
func TestHoldVoidedOrLapsed(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	held, err := e.c.Charge(ctx, e.hold("att-v", stripefake.PMVisa))
	if err != nil || held.Status != domain.ChargeAuthorized {
		t.Fatalf("Charge(manual) = %+v, %v", held, err)
	}
	void := domain.VoidRequest{IdempotencyKey: "void-1", ChargeID: held.ID}
	for i := range 2 {
		got, err := e.c.Void(ctx, void)
		if err != nil || got.Status != domain.ChargeVoided || got.FailureCode != "" || !got.AmountCaptured.IsZero() || !got.RefundedAmount.IsZero() {
			t.Fatalf("Void #%d = %+v, %v; want voided, nothing captured or refunded", i+1, got, err)
		}
	}
	if _, err := e.c.Capture(ctx, capReq("cap-v", held.ID, "1.00")); !domain.IsProviderRequestError(err, domain.ChargeAlreadyVoided) {
		t.Errorf("Capture after the void = %v, want %s", err, domain.ChargeAlreadyVoided)
	}
	if _, err := e.c.Void(ctx, domain.VoidRequest{IdempotencyKey: "void-2", ChargeID: held.ID}); !domain.IsProviderRequestError(err, domain.ChargeAlreadyVoided) {
		t.Errorf("a second void = %v, want %s", err, domain.ChargeAlreadyVoided)
	}
	if got, err := e.c.FindCharge(ctx, held.ID); err != nil || got.Status != domain.ChargeVoided || !got.RefundedAmount.IsZero() {
		t.Errorf("FindCharge(voided) = %+v, %v", got, err)
	}

	lapsing, err := e.c.Charge(ctx, e.hold("att-l", stripefake.PMVisa))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.fake.LapseHold(lapsing.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := e.c.FindCharge(ctx, lapsing.ID); err != nil || got.Status != domain.ChargeVoided || got.FailureCode != domain.HoldLapsed {
		t.Errorf("FindCharge(lapsed) = %+v, %v; want voided, %s", got, err, domain.HoldLapsed)
	}
	if _, err := e.c.Capture(ctx, capReq("cap-l", lapsing.ID, "1.00")); !domain.IsProviderRequestError(err, domain.HoldLapsed) {
		t.Errorf("Capture of a lapsed hold = %v, want %s", err, domain.HoldLapsed)
	}
	if _, err := e.c.Void(ctx, domain.VoidRequest{IdempotencyKey: "void-l", ChargeID: lapsing.ID}); !domain.IsProviderRequestError(err, domain.HoldLapsed) {
		t.Errorf("Void of a lapsed hold = %v, want %s", err, domain.HoldLapsed)
	}

	_, req := e.attempt("att-auto", stripefake.PMVisa)
	auto, err := e.c.Charge(ctx, req)
	if err != nil || auto.Status != domain.ChargeSucceeded {
		t.Fatalf("Charge(automatic) = %+v, %v", auto, err)
	}
	if _, err := e.c.Capture(ctx, capReq("cap-auto", auto.ID, "1.00")); !domain.IsProviderRequestError(err, domain.ChargeNotCapturable) {
		t.Errorf("Capture of an automatic charge = %v, want %s", err, domain.ChargeNotCapturable)
	}
	if _, err := e.c.Void(ctx, domain.VoidRequest{IdempotencyKey: "void-auto", ChargeID: auto.ID}); !domain.IsProviderRequestError(err, domain.ChargeNotCapturable) {
		t.Errorf("Void of an automatic charge = %v, want %s", err, domain.ChargeNotCapturable)
	}
	declined, err := e.c.Charge(ctx, e.hold("att-d", stripefake.PMDeclined))
	if err != nil || declined.Status != domain.ChargeFailed || declined.CaptureMethod != domain.CaptureManual {
		t.Fatalf("Charge(manual, declined) = %+v, %v; want failed", declined, err)
	}
	if _, err := e.c.Capture(ctx, capReq("cap-d", declined.ID, "1.00")); !domain.IsProviderRequestError(err, domain.ChargeNotCapturable) {
		t.Errorf("Capture of a declined hold = %v, want %s", err, domain.ChargeNotCapturable)
	}
	if _, err := e.c.Capture(ctx, capReq("cap-none", "pi_nope", "1.00")); !errors.Is(err, domain.ErrChargeNotFound) {
		t.Errorf("Capture of a PaymentIntent Stripe does not know = %v, want ErrChargeNotFound", err)
	}
}

// A capture whose reply is lost, or that Stripe could not answer, has an
// unknown outcome; sent again under its key it answers the capture made.
func TestHoldCaptureReplyLost(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	held, err := e.c.Charge(ctx, e.hold("att-lost", stripefake.PMVisa))
	if err != nil {
		t.Fatal(err)
	}
	e.fake.SetDown(true)
	if _, err := e.c.Capture(ctx, capReq("cap-lost", held.ID, "19.90")); !errors.Is(err, domain.ErrProviderUnavailable) {
		t.Fatalf("Capture while Stripe is down = %v, want ErrProviderUnavailable", err)
	}
	if _, err := e.c.Void(ctx, domain.VoidRequest{IdempotencyKey: "void-lost", ChargeID: held.ID}); !errors.Is(err, domain.ErrProviderUnavailable) {
		t.Fatalf("Void while Stripe is down = %v, want ErrProviderUnavailable", err)
	}
	e.fake.SetDown(false)
	// A client of its own: net/http sends a keyed POST again by itself
	// when a reused connection dies before the reply.
	fresh, err := stripeprovider.New(stripeprovider.Config{SecretKey: "sk_test_fake", APIBase: e.fake.URL(), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.fake.DropReplies(1)
	if _, err := fresh.Capture(ctx, capReq("cap-lost", held.ID, "19.90")); !errors.Is(err, domain.ErrProviderUnavailable) {
		t.Fatalf("Capture with a lost reply = %v, want ErrProviderUnavailable", err)
	}
	got, err := e.c.Capture(ctx, capReq("cap-lost", held.ID, "19.90"))
	if err != nil || got.Status != domain.ChargeSucceeded || !got.AmountCaptured.Equal(dec("19.90")) {
		t.Fatalf("Capture again under its key = %+v, %v; want the capture made", got, err)
	}
	if st := e.fake.Status(held.ID); st != "succeeded" {
		t.Fatalf("PaymentIntent = %s, want succeeded", st)
	}
}

// wireTap records the form of each request the adapter sends to the fake.
type wireTap struct {
	mu    sync.Mutex
	forms map[string][]url.Values // "METHOD path" → forms, in order
}

func (r *wireTap) RoundTrip(req *http.Request) (*http.Response, error) {
	var form url.Values
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		form, _ = url.ParseQuery(string(b))
	}
	r.mu.Lock()
	r.forms[req.Method+" "+req.URL.Path] = append(r.forms[req.Method+" "+req.URL.Path], form)
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

// An automatic charge sends what it always sent: no capture_method, no
// expand. A manual one asks for capture_method manual, and a capture
// sends amount_to_capture in Stripe's integer amount, under its key.
func TestHoldWire(t *testing.T) {
	fake := stripefake.New(t.Cleanup)
	rec := &wireTap{forms: map[string][]url.Values{}}
	c, err := stripeprovider.New(stripeprovider.Config{SecretKey: "sk_test_fake", APIBase: fake.URL(), Timeout: 2 * time.Second,
		HTTPClient: &http.Client{Transport: rec}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	auto := domain.ChargeRequest{IdempotencyKey: "att-a", OrderID: "ord-a", Amount: dec("19.90"), Currency: "EUR", PaymentMethod: stripefake.PMVisa}
	if ch, err := c.Charge(ctx, auto); err != nil || ch.Status != domain.ChargeSucceeded || ch.CaptureMethod != domain.CaptureAutomatic ||
		!ch.AmountCaptured.Equal(ch.Amount) || !ch.CaptureBefore.IsZero() {
		t.Fatalf("Charge(automatic) = %+v, %v; want succeeded, all of it captured", ch, err)
	}
	manual := auto
	manual.IdempotencyKey, manual.CaptureMethod = "att-m", domain.CaptureManual
	held, err := c.Charge(ctx, manual)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Capture(ctx, domain.CaptureRequest{IdempotencyKey: "cap-m", ChargeID: held.ID, Amount: dec("12.34"), Currency: "EUR"}); err != nil {
		t.Fatal(err)
	}
	creates := rec.forms["POST /v1/payment_intents"]
	if len(creates) != 2 {
		t.Fatalf("creates = %v", creates)
	}
	want := "amount=1990&confirm=true&currency=eur&metadata[payd_attempt]=att-a&metadata[payd_order]=ord-a&" +
		"payment_method=pm_card_visa&payment_method_types[0]=card"
	if got, _ := url.QueryUnescape(creates[0].Encode()); got != want {
		t.Errorf("automatic create sent\n%s\nwant\n%s", got, want)
	}
	if m := creates[1]; m.Get("capture_method") != "manual" || m.Get("expand[0]") != "latest_charge" || m.Get("amount") != "1990" {
		t.Errorf("manual create sent %v, want capture_method manual", m)
	}
	if caps := rec.forms["POST /v1/payment_intents/"+held.ID+"/capture"]; len(caps) != 1 || caps[0].Get("amount_to_capture") != "1234" {
		t.Errorf("capture sent %v, want amount_to_capture 1234", caps)
	}
}

// A manual attempt asked about by repeating its create repeats it as a
// hold, so Stripe answers the first create (another capture_method
// under the key would be refused).
func TestHoldAskedByReplay(t *testing.T) {
	e := newEnv(t)
	req := e.hold("att-replay", stripefake.PMVisa)
	e.fake.DropReplies(1)
	if _, err := e.c.Charge(context.Background(), req); !errors.Is(err, domain.ErrProviderUnavailable) {
		t.Fatalf("Charge with a lost reply = %v, want ErrProviderUnavailable", err)
	}
	ch, err := e.c.GetCharge(context.Background(), e.store.record(req.IdempotencyKey))
	if err != nil || ch.Status != domain.ChargeAuthorized {
		t.Fatalf("GetCharge = %+v, %v; want authorized", ch, err)
	}
	if n := e.fake.Created(req.OrderID); n != 1 {
		t.Fatalf("PaymentIntents for the order = %d, want 1", n)
	}
}
