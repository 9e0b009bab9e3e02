package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
)

// In Standard Webhooks the webhook-id header is the message id, the same
// on every retry: payd dedupes on it. The payload's own id is the sender's
// business and may differ from it or be absent (Svix-style senders).

// deliverAs signs body under the message id msgID and posts it.
func (s *stack) deliverAs(msgID string, body []byte) reply {
	s.t.Helper()
	return s.postWebhook(body, signedWebhook(s.t, msgID, time.Now(), body))
}

// TestWebhookIDIsTheDedupeKey: one message (one webhook-id) delivered twice
// with different ids in its body is applied once; its body id is kept in
// the stored payload.
func TestWebhookIDIsTheDedupeKey(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		_, token := s.register("msgid@example.com")
		id, _, p := s.asyncOrder(token, "21.00")
		msg := "msg_" + uuid.NewString()

		first := s.deliverAs(msg, eventBody(t, "evt_a", "payment.succeeded", p))
		if first.Status != http.StatusOK || first.json(t)["outcome"] != "applied" || first.json(t)["id"] != msg {
			t.Fatalf("first delivery (body id differs from webhook-id) = %d %s, want 200 applied under %s", first.Status, first.Body, msg)
		}
		again := s.deliverAs(msg, eventBody(t, "evt_b", "payment.succeeded", p))
		if again.Status != http.StatusOK || again.json(t)["outcome"] != "duplicate" {
			t.Errorf("same webhook-id, other body id = %d %s, want 200 duplicate", again.Status, again.Body)
		}
		if n := s.count("webhook_events"); n != 1 {
			t.Errorf("inbox rows = %d, want 1", n)
		}
		var row struct{ Payload []byte }
		s.db.Gorm().Raw("SELECT payload FROM webhook_events WHERE id = ?", msg).Scan(&row)
		var stored struct{ ID string }
		if err := json.Unmarshal(row.Payload, &stored); err != nil || stored.ID != "evt_a" {
			t.Errorf("stored payload id = %q (%v), want the first delivery's evt_a", stored.ID, err)
		}
		if o := s.orderRow(id); o.Status != domain.StatusPaid || o.Version != 3 {
			t.Errorf("order = %s v%d, want paid v3", o.Status, o.Version)
		}
		s.noOrphans(p.ChargeID)
	})
}

// TestWebhookWithoutBodyID: an event whose body carries no id is accepted
// and applied under its webhook-id.
func TestWebhookWithoutBodyID(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		_, token := s.register("noid@example.com")
		id, _, p := s.asyncOrder(token, "8.00")
		var ev map[string]any
		if err := json.Unmarshal(eventBody(t, "x", "payment.succeeded", p), &ev); err != nil {
			t.Fatal(err)
		}
		delete(ev, "id")
		body, _ := json.Marshal(ev)
		msg := "msg_" + uuid.NewString()
		if r := s.deliverAs(msg, body); r.Status != http.StatusOK || r.json(t)["outcome"] != "applied" {
			t.Fatalf("event without body id = %d %s, want 200 applied", r.Status, r.Body)
		}
		if o := s.orderRow(id); o.Status != domain.StatusPaid {
			t.Errorf("order = %s, want paid", o.Status)
		}
		if n := s.count("webhook_events WHERE id = ?", msg); n != 1 {
			t.Errorf("inbox rows under %s = %d, want 1", msg, n)
		}
		unknown := []byte(`{"type":"dispute.created","data":{"x":1}}`)
		if r := s.deliverAs("msg_"+uuid.NewString(), unknown); r.Status != http.StatusOK {
			t.Errorf("unknown event without body id = %d %s, want 200", r.Status, r.Body)
		}
	})
}

// TestWebhookSameBodyIDTwoMessages: two messages (two webhook-ids) that
// carry the same body id are two messages, each stored; applying the
// second goes through the same guarded transitions, so it changes nothing.
func TestWebhookSameBodyIDTwoMessages(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		_, token := s.register("twomsg@example.com")
		id, _, p := s.asyncOrder(token, "5.00")
		for i := range 2 {
			if r := s.deliverAs("msg_"+uuid.NewString(), eventBody(t, "evt_same", "payment.succeeded", p)); r.Status != http.StatusOK {
				t.Fatalf("message %d = %d %s, want 200", i+1, r.Status, r.Body)
			}
		}
		if n := s.count("webhook_events"); n != 2 {
			t.Errorf("inbox rows = %d, want 2 (two messages)", n)
		}
		if o := s.orderRow(id); o.Status != domain.StatusPaid || o.Version != 3 {
			t.Errorf("order = %s v%d, want paid v3 (applied once)", o.Status, o.Version)
		}
		if n := s.charges(id); n != 1 {
			t.Errorf("charges = %d, want 1", n)
		}
		s.noOrphans(p.ChargeID)
	})
}
