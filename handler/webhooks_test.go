package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
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

// TestWebhookProviderNotAskedIsUnavailable: on both webhook routes, an
// event payd could not confirm because the provider's reply to its
// question was lost or cut (or, in Stripe mode, the event could not be
// fetched fresh) answers 503 with Retry-After and is logged as a warning
// with its cause, as a database outage is; a fault in payd stays a 500
// logged as an internal error.
func TestWebhookProviderNotAskedIsUnavailable(t *testing.T) {
	cut := fmt.Errorf("ask the provider about attempt att_1: get charge att_1: %w: read reply (status 200): %w",
		domain.ErrProviderUnavailable, io.ErrUnexpectedEOF)
	reset := fmt.Errorf("ask the provider about charge ch_1: %w: %w", domain.ErrProviderUnreachable, domain.ErrProviderUnavailable)
	dbDown := fmt.Errorf("store event msg_1: %w", domain.ErrUnavailable)
	for _, c := range []struct {
		name                string
		recvErr, parseErr   error
		status              int
		level, cause, route string
	}{
		{"provider reply cut", cut, nil, http.StatusServiceUnavailable, "WARN", "unexpected EOF", "provider"},
		{"provider reset", reset, nil, http.StatusServiceUnavailable, "WARN", "ch_1", "provider"},
		{"database down", dbDown, nil, http.StatusServiceUnavailable, "WARN", "database unavailable", "provider"},
		{"fault in payd", errors.New("boom"), nil, http.StatusInternalServerError, "ERROR", "boom", "provider"},
		{"stripe: confirm reply cut", cut, nil, http.StatusServiceUnavailable, "WARN", "unexpected EOF", "stripe"},
		{"stripe: event not fetched", nil, fmt.Errorf("retrieve payment intent pi_1: %w: stripe status 500", domain.ErrProviderUnavailable),
			http.StatusServiceUnavailable, "WARN", "stripe status 500", "stripe"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			recv := receiverFunc(func(context.Context, string, domain.ProviderEvent, []byte) (service.WebhookOutcome, error) {
				return "", c.recvErr
			})
			ev := domain.ProviderEvent{Type: domain.EventPaymentSucceeded, IdempotencyKey: "att_1"}
			deps := Deps{Log: slog.New(slog.NewJSONHandler(&logs, nil))}
			req := httptest.NewRequest(http.MethodPost, "/v1/webhooks/stripe", bytes.NewReader([]byte(`{}`)))
			if c.route == "stripe" {
				deps.StripeWebhooks = &StripeWebhooks{Receiver: recv,
					Parse: func(context.Context, []byte, string) (string, domain.ProviderEvent, []byte, error) {
						return "evt_1", ev, []byte(`{}`), c.parseErr
					}}
			} else {
				wh, err := NewWebhooks(recv, func([]byte) (domain.ProviderEvent, error) { return ev, nil }, testSecret)
				if err != nil {
					t.Fatal(err)
				}
				deps.Webhooks = wh
				req = signedWebhook(t, []byte(`{}`))
			}
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			New(deps).ServeHTTP(rec, req)
			if rec.Code != c.status || (c.status == http.StatusServiceUnavailable) != (rec.Header().Get("Retry-After") != "") {
				t.Errorf("webhook = %d (Retry-After %q) %s, want %d (Retry-After with a 503 only)", rec.Code, rec.Header().Get("Retry-After"), rec.Body, c.status)
			}
			var lines []string
			for line := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
				if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
					lines = append(lines, line)
				}
			}
			if len(lines) != 1 || !strings.Contains(lines[0], `"level":"`+c.level+`"`) || !strings.Contains(lines[0], c.cause) {
				t.Errorf("warnings and errors logged = %q, want one %s line naming %q", lines, c.level, c.cause)
			}
		})
	}
}

// signedWebhook is a POST of body to the sandbox's webhook route, signed
// with testSecret under the message id msg_1.
func signedWebhook(t *testing.T, body []byte) *http.Request {
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
	req.Header.Set(standardwebhooks.HeaderWebhookID, "msg_1")
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	return req
}
