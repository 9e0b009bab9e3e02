package stripeprovider_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/stripefake"
)

func lastEvent(t *testing.T, f *stripefake.Fake, typ string) stripefake.Event {
	t.Helper()
	evs := f.Events()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ {
			return evs[i]
		}
	}
	t.Fatalf("no %s event", typ)
	return stripefake.Event{}
}

func TestWebhookParse(t *testing.T) {
	e := newEnv(t)
	w, err := e.c.Webhooks("whsec_old " + e.fake.Secret)
	if err != nil {
		t.Fatal(err)
	}
	_, ok := e.attempt("att-ok", stripefake.PMVisa)
	ch, err := e.c.Charge(context.Background(), ok)
	if err != nil {
		t.Fatal(err)
	}
	ev := lastEvent(t, e.fake, "payment_intent.succeeded")
	id, pe, err := w.Parse(context.Background(), ev.Body, e.fake.Sign(ev.Body, time.Now()))
	if err != nil || id != ev.ID || pe.Type != domain.EventPaymentSucceeded || pe.ChargeID != ch.ID ||
		pe.IdempotencyKey != "att-ok" || pe.OrderID != "ord-att-ok" || pe.AmountText != "19.90" || pe.Currency != "EUR" {
		t.Fatalf("Parse(succeeded) = %q, %+v, %v", id, pe, err)
	}

	for name, sig := range map[string]string{
		"wrong secret": "t=1,v1=00",
		"too old":      e.fake.Sign(ev.Body, time.Now().Add(-10*time.Minute)),
		"missing":      "",
	} {
		if _, _, err := w.Parse(context.Background(), ev.Body, sig); !errors.Is(err, domain.ErrInvalidSignature) {
			t.Errorf("Parse(%s) = %v, want ErrInvalidSignature", name, err)
		}
	}

	_, bad := e.attempt("att-bad", stripefake.PMDeclined)
	if _, err := e.c.Charge(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	ev = lastEvent(t, e.fake, "payment_intent.payment_failed")
	if _, pe, err := w.Parse(context.Background(), ev.Body, e.fake.Sign(ev.Body, time.Now())); err != nil ||
		pe.Type != domain.EventPaymentFailed || pe.FailureCode != "generic_decline" {
		t.Fatalf("Parse(failed) = %+v, %v", pe, err)
	}
}

// An event rendered for another API version is not read as is: its object
// is fetched fresh from the API, and that is what payd applies.
func TestWebhookOtherVersionFetchedFresh(t *testing.T) {
	e := newEnv(t)
	w, _ := e.c.Webhooks(e.fake.Secret)
	_, req := e.attempt("att-v", stripefake.PMVisa)
	ch, err := e.c.Charge(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"id": "evt_old", "object": "event", "api_version": "2019-01-01", "created": time.Now().Unix(),
		"type": "payment_intent.succeeded", "data": map[string]any{"object": map[string]any{"id": ch.ID, "amount": "shape of old"}}})
	_, pe, err := w.Parse(context.Background(), body, e.fake.Sign(body, time.Now()))
	if err != nil || pe.IdempotencyKey != "att-v" || pe.AmountText != "19.90" {
		t.Fatalf("Parse(other version) = %+v, %v", pe, err)
	}
	if calls := e.fake.Calls(); calls[len(calls)-1] != "GET /v1/payment_intents/"+ch.ID {
		t.Fatalf("last call = %s, want the PaymentIntent fetched", calls[len(calls)-1])
	}
}

func TestWebhookRefundAndDispute(t *testing.T) {
	e := newEnv(t)
	w, _ := e.c.Webhooks(e.fake.Secret)
	_, req := e.attempt("att-r", stripefake.PMVisa)
	ch, err := e.c.Charge(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Refund(context.Background(), domain.ProviderRefundRequest{IdempotencyKey: "rk-1", ChargeID: ch.ID,
		Amount: req.Amount, Currency: "EUR"}); err != nil {
		t.Fatal(err)
	}
	ev := lastEvent(t, e.fake, "charge.refunded")
	if _, pe, err := w.Parse(context.Background(), ev.Body, e.fake.Sign(ev.Body, time.Now())); err != nil ||
		pe.Type != domain.EventRefundSucceeded || pe.IdempotencyKey != "rk-1" || pe.AmountText != "19.90" {
		t.Fatalf("Parse(charge.refunded) = %+v, %v", pe, err)
	}
	ev = lastEvent(t, e.fake, "refund.created")
	if _, pe, err := w.Parse(context.Background(), ev.Body, e.fake.Sign(ev.Body, time.Now())); err != nil ||
		pe.Type != domain.EventRefundSucceeded || pe.IdempotencyKey != "rk-1" || pe.ChargeID != ch.ID || !strings.HasPrefix(pe.RefundID, "re_") {
		t.Fatalf("Parse(refund.created) = %+v, %v", pe, err)
	}
	dp := e.fake.Dispute(ch.ID)
	ev = lastEvent(t, e.fake, "charge.dispute.created")
	if _, pe, err := w.Parse(context.Background(), ev.Body, e.fake.Sign(ev.Body, time.Now())); err != nil ||
		pe.Type != domain.EventDisputeCreated || pe.ID != dp || pe.IdempotencyKey != "att-r" || pe.OrderID != "ord-att-r" {
		t.Fatalf("Parse(dispute) = %+v, %v", pe, err)
	}
	// A known type whose object names nothing is refused (400), not fetched.
	for _, typ := range []string{"payment_intent.succeeded", "charge.refunded", "refund.updated", "charge.dispute.created"} {
		body := []byte(`{"id":"evt_y","object":"event","api_version":"2019-01-01","type":"` + typ + `","data":{"object":{}}}`)
		var ve *domain.ValidationError
		if _, _, err := w.Parse(context.Background(), body, e.fake.Sign(body, time.Now())); !errors.As(err, &ve) {
			t.Errorf("Parse(%s without an object id) = %v, want a ValidationError", typ, err)
		}
	}
	// Unknown types parse, keep their type, and are for the inbox only.
	body := []byte(`{"id":"evt_x","object":"event","api_version":"` + "2025-08-27.basil" + `","type":"customer.created","data":{"object":{"id":"cus_1"}}}`)
	if id, pe, err := w.Parse(context.Background(), body, e.fake.Sign(body, time.Now())); err != nil || id != "evt_x" || pe.Type.Known() {
		t.Fatalf("Parse(unknown) = %q %+v, %v", id, pe, err)
	}
}

// An event whose object Stripe answers 404 for, or whose money is in a
// currency payd does not take, is stored and ignored (a type payd does
// not apply, no error): refusing it would have Stripe retry it for days.
func TestWebhookUnreadableObjectIgnored(t *testing.T) {
	e := newEnv(t)
	w, err := e.c.Webhooks(e.fake.Secret)
	if err != nil {
		t.Fatal(err)
	}
	events := map[string]map[string]any{
		// Another API version: fetched fresh, and Stripe has no such object.
		"object gone": {"id": "evt_gone", "object": "event", "api_version": "2019-01-01", "type": "payment_intent.succeeded",
			"created": time.Now().Unix(), "data": map[string]any{"object": map[string]any{"id": "pi_gone"}}},
		"refund gone": {"id": "evt_re_gone", "object": "event", "api_version": "2019-01-01", "type": "refund.failed",
			"created": time.Now().Unix(), "data": map[string]any{"object": map[string]any{"id": "re_gone"}}},
		"currency payd does not take": {"id": "evt_huf", "object": "event", "api_version": stripeAPIVersion(t, e), "type": "payment_intent.succeeded",
			"created": time.Now().Unix(), "data": map[string]any{"object": map[string]any{"id": "pi_huf", "object": "payment_intent",
				"amount": 100000, "currency": "huf", "status": "succeeded", "metadata": map[string]string{"payd_attempt": "a", "payd_order": "o"}}}},
	}
	for name, ev := range events {
		body, _ := json.Marshal(ev)
		id, pe, err := w.Parse(context.Background(), body, e.fake.Sign(body, time.Now()))
		if err != nil || id != ev["id"] || pe.Type.Known() {
			t.Errorf("Parse(%s) = %q, %+v, %v; want stored and ignored", name, id, pe, err)
		}
	}
}

// stripeAPIVersion is the API version the fake's events carry (stripe-go's).
func stripeAPIVersion(t *testing.T, e *env) string {
	t.Helper()
	_, req := e.attempt("att-version", stripefake.PMVisa)
	if _, err := e.c.Charge(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	var ev struct {
		APIVersion string `json:"api_version"`
	}
	_ = json.Unmarshal(lastEvent(t, e.fake, "payment_intent.succeeded").Body, &ev)
	return ev.APIVersion
}
