package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// receiverFunc is an EventReceiver.
type receiverFunc func(ctx context.Context, msgID string, ev domain.ProviderEvent, payload []byte) (service.WebhookOutcome, error)

func (f receiverFunc) Receive(ctx context.Context, msgID string, ev domain.ProviderEvent, payload []byte) (service.WebhookOutcome, error) {
	return f(ctx, msgID, ev, payload)
}

// TestWebhookUsesInjectedParser: a verified body goes through the injected
// parser once; what it returns reaches the use case with the webhook-id and
// the body as received; its refusals are 400s (a field's, or a malformed
// body's), and nothing reaches the use case.
func TestWebhookUsesInjectedParser(t *testing.T) {
	var gotID string
	var gotEv domain.ProviderEvent
	var gotPayload []byte
	calls := 0
	recv := receiverFunc(func(_ context.Context, msgID string, ev domain.ProviderEvent, payload []byte) (service.WebhookOutcome, error) {
		calls++
		gotID, gotEv, gotPayload = msgID, ev, payload
		return "applied", nil
	})
	var parseErr error
	parsed := domain.ProviderEvent{Type: domain.EventPaymentSucceeded, IdempotencyKey: "att_1"}
	parse := func([]byte) (domain.ProviderEvent, error) { return parsed, parseErr }
	wh, err := NewWebhooks(recv, parse, testSecret)
	if err != nil {
		t.Fatal(err)
	}
	e := New(Deps{Log: slog.New(slog.DiscardHandler), Webhooks: wh})
	post := func(body []byte) *httptest.ResponseRecorder {
		t.Helper()
		signer, err := standardwebhooks.NewWebhook(testSecret)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		sig, err := signer.Sign("msg_1", now, body)
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/v1/webhooks/provider", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(standardwebhooks.HeaderWebhookID, "msg_1")
		req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
		req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}

	body := []byte(`{"type":"payment.succeeded"}`)
	if rec := post(body); rec.Code != http.StatusOK || calls != 1 || gotID != "msg_1" || gotEv != parsed || !bytes.Equal(gotPayload, body) {
		t.Fatalf("webhook = %d %s (calls %d, id %q, event %+v), want 200 with the parsed event under msg_1", rec.Code, rec.Body, calls, gotID, gotEv)
	}
	for _, c := range []struct {
		err   error
		field string
	}{
		{&domain.ValidationError{Field: "data.amount", Reason: "is not a decimal amount"}, "data.amount"},
		{errors.New("provider event: unexpected end of JSON input"), ""},
	} {
		parseErr = c.err
		rec := post(body)
		var p struct {
			Code   string `json:"code"`
			Errors []struct {
				Param string `json:"param"`
			} `json:"errors"`
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &p)
		if rec.Code != http.StatusBadRequest || p.Code != "validation_failed" || calls != 1 {
			t.Errorf("parser error %v: webhook = %d %s (calls %d), want 400 validation_failed and no call", c.err, rec.Code, rec.Body, calls)
		}
		if c.field != "" && (len(p.Errors) != 1 || p.Errors[0].Param != c.field) {
			t.Errorf("parser error %v: errors = %+v, want one for %s", c.err, p.Errors, c.field)
		}
	}
}
