package stripeprovider_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/stripefake"
	"github.com/payd/payd/provider/stripeprovider"
)

// parseLast parses the fake's last event of type typ, freshly signed.
func parseLast(t *testing.T, e *env, w *stripeprovider.Webhooks, typ string) domain.ProviderEvent {
	t.Helper()
	ev := lastEvent(t, e.fake, typ)
	id, pe, err := w.Parse(context.Background(), ev.Body, e.fake.Sign(ev.Body, time.Now()))
	if err != nil || id != ev.ID {
		t.Fatalf("Parse(%s) = %q, %+v, %v", typ, id, pe, err)
	}
	return pe
}

// wantPayment fails unless pe is an event of type typ and status st about
// attempt's charge chargeID, with its order and money.
func wantPayment(t *testing.T, what string, pe domain.ProviderEvent, typ domain.ProviderEventType, st domain.ChargeStatus, chargeID, attempt string) {
	t.Helper()
	if pe.Type != typ || pe.Status != st || pe.ChargeID != chargeID || pe.IdempotencyKey != attempt || pe.OrderID != "ord-"+attempt ||
		pe.AmountText != "19.90" || !pe.Amount.Equal(dec("19.90")) || pe.Currency != "EUR" || !pe.AmountReadable() {
		t.Errorf("Parse(%s) = %+v; want %s, %s, charge %s of %s, 19.90 EUR", what, pe, typ, st, chargeID, attempt)
	}
}

// A hold's events read as payd's hold events, with the charge (its
// PaymentIntent), attempt, order and amount of any payment event:
// authorized (payment_intent.amount_capturable_updated), captured
// (charge.captured, and the hold's payment_intent.succeeded), voided
// (payment_intent.canceled of a hold), or voided as lapsed. None of them
// is a type payd applies yet.
func TestWebhookHoldEvents(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	w, err := e.c.Webhooks(e.fake.Secret)
	if err != nil {
		t.Fatal(err)
	}
	held, err := e.c.Charge(ctx, e.hold("att-c", stripefake.PMVisa))
	if err != nil {
		t.Fatal(err)
	}
	pe := parseLast(t, e, w, "payment_intent.amount_capturable_updated")
	wantPayment(t, "amount_capturable_updated", pe, domain.EventPaymentAuthorized, domain.ChargeAuthorized, held.ID, "att-c")

	if _, err := e.c.Capture(ctx, capReq("cap-c", held.ID, "10.00")); err != nil {
		t.Fatal(err)
	}
	pe = parseLast(t, e, w, "charge.captured")
	wantPayment(t, "charge.captured", pe, domain.EventPaymentCaptured, domain.ChargeSucceeded, held.ID, "att-c")
	if calls := e.fake.Calls(); calls[len(calls)-1] != "GET /v1/payment_intents/"+held.ID {
		t.Errorf("last call = %s, want the PaymentIntent fetched for payd's metadata", calls[len(calls)-1])
	}
	pe = parseLast(t, e, w, "payment_intent.succeeded")
	wantPayment(t, "payment_intent.succeeded of a hold", pe, domain.EventPaymentCaptured, domain.ChargeSucceeded, held.ID, "att-c")

	voided, err := e.c.Charge(ctx, e.hold("att-v", stripefake.PMVisa))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Void(ctx, domain.VoidRequest{IdempotencyKey: "void-v", ChargeID: voided.ID}); err != nil {
		t.Fatal(err)
	}
	pe = parseLast(t, e, w, "payment_intent.canceled")
	wantPayment(t, "payment_intent.canceled of a hold", pe, domain.EventPaymentVoided, domain.ChargeVoided, voided.ID, "att-v")
	if pe.FailureCode != "" {
		t.Errorf("voided on request: failure code %q, want none", pe.FailureCode)
	}

	lapsed, err := e.c.Charge(ctx, e.hold("att-l", stripefake.PMVisa))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.fake.LapseHold(lapsed.ID); err != nil {
		t.Fatal(err)
	}
	pe = parseLast(t, e, w, "payment_intent.canceled")
	wantPayment(t, "payment_intent.canceled of a lapsed hold", pe, domain.EventPaymentVoided, domain.ChargeVoided, lapsed.ID, "att-l")
	if pe.FailureCode != domain.HoldLapsed {
		t.Errorf("lapsed: failure code %q, want %s", pe.FailureCode, domain.HoldLapsed)
	}

	// payd knows the three: it applies payment.authorized as a hint (it
	// asks the provider); the capture's and the void's events answer its
	// own requests, and are ignored.
	for _, typ := range []domain.ProviderEventType{domain.EventPaymentAuthorized, domain.EventPaymentCaptured, domain.EventPaymentVoided} {
		if !typ.Known() {
			t.Errorf("%s is not a type payd knows", typ)
		}
	}
}

// A cancel of what held nothing keeps Stripe's type, stored and ignored
// as every cancel was before holds: an automatic PaymentIntent's is not
// even read, a hold cancelled awaiting 3-D Secure is read and is no
// void. A capture of a Charge without a PaymentIntent is not payd's. An
// authorization rendered for another API version is fetched fresh.
func TestWebhookHoldEventsNotVoids(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	w, err := e.c.Webhooks(e.fake.Secret)
	if err != nil {
		t.Fatal(err)
	}
	a, req := e.attempt("att-auto-3ds", stripefake.PM3DS)
	auto, err := e.c.Charge(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CancelCharge(ctx, a, auto.ID); err != nil {
		t.Fatal(err)
	}
	calls := len(e.fake.Calls())
	pe := parseLast(t, e, w, "payment_intent.canceled")
	if pe.Type != "payment_intent.canceled" || pe.ChargeID != "" || pe.Status != "" {
		t.Errorf("Parse(automatic payment_intent.canceled) = %+v; want Stripe's type, unread", pe)
	}
	if n := len(e.fake.Calls()); n != calls {
		t.Errorf("Parse(automatic payment_intent.canceled) called Stripe %d times, want none", n-calls)
	}

	mreq := e.hold("att-manual-3ds", stripefake.PM3DS)
	m, err := e.c.Charge(ctx, mreq)
	if err != nil || m.Status != domain.ChargePending {
		t.Fatalf("Charge(manual 3DS) = %+v, %v", m, err)
	}
	if got, err := e.c.CancelCharge(ctx, e.store.record(mreq.IdempotencyKey), m.ID); err != nil || got.Status != domain.ChargeFailed {
		t.Fatalf("CancelCharge(manual 3DS) = %+v, %v; want failed", got, err)
	}
	pe = parseLast(t, e, w, "payment_intent.canceled")
	if pe.Type != "payment_intent.canceled" || pe.Type.Known() {
		t.Errorf("Parse(payment_intent.canceled of a hold never authorized) = %+v; want Stripe's type", pe)
	}

	sign := func(ev map[string]any) (domain.ProviderEvent, error) {
		body, _ := json.Marshal(ev)
		_, pe, err := w.Parse(ctx, body, e.fake.Sign(body, time.Now()))
		return pe, err
	}
	pe, err = sign(map[string]any{"id": "evt_cc", "object": "event", "api_version": stripeAPIVersion(t, e), "type": "charge.captured",
		"created": time.Now().Unix(), "data": map[string]any{"object": map[string]any{"id": "ch_alone", "object": "charge", "payment_intent": nil}}})
	if err != nil || pe.Type != "charge.captured" || pe.ChargeID != "ch_alone" || pe.IdempotencyKey != "" {
		t.Errorf("Parse(charge.captured without a PaymentIntent) = %+v, %v; want Stripe's type, the charge named", pe, err)
	}
	var ve *domain.ValidationError
	if _, err := sign(map[string]any{"id": "evt_cc2", "object": "event", "api_version": "2019-01-01", "type": "charge.captured",
		"data": map[string]any{"object": map[string]any{}}}); !errors.As(err, &ve) {
		t.Errorf("Parse(charge.captured without an object id) = %v, want a ValidationError", err)
	}

	held, err := e.c.Charge(ctx, e.hold("att-old", stripefake.PMVisa))
	if err != nil {
		t.Fatal(err)
	}
	pe, err = sign(map[string]any{"id": "evt_old", "object": "event", "api_version": "2019-01-01", "type": "payment_intent.amount_capturable_updated",
		"created": time.Now().Unix(), "data": map[string]any{"object": map[string]any{"id": held.ID, "amount": "shape of old"}}})
	if err != nil {
		t.Fatal(err)
	}
	wantPayment(t, "amount_capturable_updated of another version", pe, domain.EventPaymentAuthorized, domain.ChargeAuthorized, held.ID, "att-old")
}
