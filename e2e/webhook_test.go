package e2e

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
)

// otherSecret is a well-formed Standard Webhooks secret payd does not hold.
const otherSecret = "whsec_dGhpcyBpcyBub3QgcGF5ZCdzIHNlY3JldCBhdCBhbGwh"

// TestWebhookSignatures: an event that would pay a processing order is
// refused with 401 invalid_signature when its signature is forged, stale,
// from the future, over another body, or missing, and nothing is stored or
// applied; the same event correctly signed (also beside a stale signature,
// as during a secret rotation) is applied.
func TestWebhookSignatures(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		_, token := s.register("sig@example.com")
		id, _, p := s.asyncOrder(token, "21.00")
		evID := "evt_" + uuid.NewString()
		body := eventBody(t, evID, "payment.succeeded", p)
		now := time.Now()

		with := func(mutate func(h http.Header)) http.Header {
			h := signedWebhook(t, evID, now, body)
			mutate(h)
			return h
		}
		cases := []struct {
			name string
			body []byte
			h    http.Header
		}{
			{"forged", body, with(func(h http.Header) { h.Set("webhook-signature", signWith(t, otherSecret, evID, now, body)) })},
			{"stale", body, signedWebhook(t, evID, now.Add(-6*time.Minute), body)},
			{"future", body, signedWebhook(t, evID, now.Add(6*time.Minute), body)},
			{"tampered body", bytes.Replace(body, []byte(`"21.00"`), []byte(`"1.00"`), 1), signedWebhook(t, evID, now, body)},
			{"other event id", body, with(func(h http.Header) { h.Set("webhook-id", "evt_other") })},
			{"timestamp moved", body, with(func(h http.Header) { h.Set("webhook-timestamp", "1") })},
			{"unknown version", body, with(func(h http.Header) {
				h.Set("webhook-signature", strings.Replace(h.Get("webhook-signature"), "v1,", "v2,", 1))
			})},
			{"no signature", body, with(func(h http.Header) { h.Del("webhook-signature") })},
			{"no timestamp", body, with(func(h http.Header) { h.Del("webhook-timestamp") })},
			{"no id", body, with(func(h http.Header) { h.Del("webhook-id") })},
		}
		for _, c := range cases {
			r := s.postWebhook(c.body, c.h)
			if r.Status != http.StatusUnauthorized || r.code(t) != "invalid_signature" {
				t.Errorf("%s: webhook = %d %s, want 401 invalid_signature", c.name, r.Status, r.Body)
			}
			if n := s.count("webhook_events"); n != 0 {
				t.Fatalf("%s: webhook_events = %d, want 0", c.name, n)
			}
			if o := s.orderRow(id); o.Status != domain.StatusProcessing {
				t.Fatalf("%s: order = %s, want processing", c.name, o.Status)
			}
		}
		if a := s.onlyAttempt(id); a.Status != domain.AttemptUnknown {
			t.Errorf("attempt after refused events = %s, want unknown", a.Status)
		}

		// Rotation: payd's signature beside one it cannot check, in second place.
		rotated := with(func(h http.Header) {
			h.Set("webhook-signature", signWith(t, otherSecret, evID, now, body)+" "+h.Get("webhook-signature"))
		})
		if r := s.postWebhook(body, rotated); r.Status != http.StatusOK {
			t.Fatalf("webhook with two signatures, one valid = %d %s, want 200", r.Status, r.Body)
		}
		if o := s.orderRow(id); o.Status != domain.StatusPaid {
			t.Errorf("order after the valid event = %s, want paid", o.Status)
		}
		if n := s.count("webhook_events WHERE id = ? AND outcome = 'applied'", evID); n != 1 {
			t.Errorf("applied events stored = %d, want 1", n)
		}
	})
}

// TestWebhookBadBodies: a correctly signed body that is not an event is a
// 400 and leaves nothing behind; an event of a type payd does not know,
// whatever its data, is answered 200, stored, and changes nothing.
func TestWebhookBadBodies(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		_, token := s.register("bodies@example.com")
		id, _, p := s.asyncOrder(token, "4.20")

		bad := []struct{ name, body string }{
			{"malformed", `{"id":"evt_bad","type":"payment.succeeded",`},
			{"not an object", `["evt_bad"]`},
			{"no type", `{"id":"evt_bad","data":{}}`},
			{"data not an object", `{"id":"evt_bad","type":"payment.succeeded","data":"x"}`},
		}
		for _, c := range bad {
			r := s.postWebhook([]byte(c.body), signedWebhook(t, "evt_bad", time.Now(), []byte(c.body)))
			if r.Status != http.StatusBadRequest {
				t.Errorf("%s: webhook = %d %s, want 400", c.name, r.Status, r.Body)
			}
			if n := s.count("webhook_events"); n != 0 {
				t.Fatalf("%s: webhook_events = %d, want 0", c.name, n)
			}
		}

		// An unknown type naming a real attempt: kept for the record, ignored.
		evID := "evt_" + uuid.NewString()
		body := bytes.Replace(eventBody(t, evID, "payment.succeeded", p), []byte(`"payment.succeeded"`), []byte(`"charge.disputed"`), 1)
		r := s.postWebhook(body, signedWebhook(t, evID, time.Now(), body))
		if r.Status != http.StatusOK || r.json(t)["outcome"] != "ignored" {
			t.Errorf("unknown event type = %d %s, want 200 ignored", r.Status, r.Body)
		}
		if n := s.count("webhook_events WHERE id = ? AND type = 'charge.disputed' AND outcome = 'ignored'", evID); n != 1 {
			t.Errorf("stored unknown events = %d, want 1", n)
		}
		// Whatever shape an unknown type's data has, it is not payd's to refuse.
		odd := `{"id":"evt_odd","type":"charge.dispute.opened","data":["x",1]}`
		r = s.postWebhook([]byte(odd), signedWebhook(t, "evt_odd", time.Now(), []byte(odd)))
		if r.Status != http.StatusOK || r.json(t)["outcome"] != "ignored" {
			t.Errorf("unknown event type with array data = %d %s, want 200 ignored", r.Status, r.Body)
		}
		if n := s.count("webhook_events WHERE id = 'evt_odd'"); n != 1 {
			t.Errorf("stored odd events = %d, want 1", n)
		}
		if o := s.orderRow(id); o.Status != domain.StatusProcessing || o.Version != 2 {
			t.Errorf("order after unknown events = %s v%d, want processing v2", o.Status, o.Version)
		}
	})
}
