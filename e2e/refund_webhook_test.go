package e2e

import (
	"github.com/payd/payd/client"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/sandbox"
)

// TestRefundWebhookOnce: a refund.succeeded event settles a refund whose
// reply was lost, once, however often and concurrently it is delivered;
// and with the sandbox delivering every event three times, each refund's
// event is stored once and changes nothing payd already knew.
func TestRefundWebhookOnce(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), tuned(silentSandbox))
		_, id, refund := s.lostRefundReply("wes@example.com")
		ev := s.outboxEvent("refund.succeeded")
		replies := parallel(5, func(int) reply { return s.deliver(ev) })
		for _, r := range replies {
			if r.Status != http.StatusOK {
				t.Errorf("delivery = %d %s, want 200", r.Status, r.Body)
			}
		}
		if n := s.count("webhook_events WHERE id = ?", ev.EventID); n != 1 {
			t.Errorf("inbox rows for %s = %d, want 1", ev.EventID, n)
		}
		if n := s.count("webhook_events WHERE id = ? AND outcome = 'applied' AND processed_at IS NOT NULL", ev.EventID); n != 1 {
			t.Errorf("event %s applied %d times, want once", ev.EventID, n)
		}
		if n := s.count("refunds WHERE id = ? AND status = 'succeeded' AND provider_refund_id IS NOT NULL", refund.Id); n != 1 {
			t.Errorf("refund %s not settled by the webhook", refund.Id)
		}
		if o := s.timeline(id).Order; o.RefundedAmount != "3.00" || o.Status != "paid" {
			t.Errorf("order after the webhooks = %+v, want 3.00 refunded, paid", o)
		}

		d := start(t, on(dialect), tuned(withDuplicates(3)))
		_, tok := d.register("wyn@example.com")
		id = d.paidOrder(tok, "8.00")
		for _, amount := range []string{"1.00", "2.00"} {
			if r := d.refund(id, uuid.NewString(), amount); r.Status != http.StatusOK {
				t.Fatalf("refund = %d %s, want 200", r.Status, r.Body)
			}
		}
		if !within(20*time.Second, func() bool { return d.delivered("refund.succeeded") == 6 }) {
			t.Fatalf("refund.succeeded copies delivered = %d, want 6", d.delivered("refund.succeeded"))
		}
		if n := d.count("webhook_events WHERE type = 'refund.succeeded'"); n != 2 {
			t.Errorf("refund.succeeded events stored = %d, want 2", n)
		}
		if n := d.count("refunds WHERE order_id = ? AND status = 'succeeded'", id); n != 2 {
			t.Errorf("succeeded refunds = %d, want 2", n)
		}
		if o := d.timeline(id).Order; o.RefundedAmount != "3.00" {
			t.Errorf("order refunded %s, want 3.00", o.RefundedAmount)
		}
	})
}

// outboxEvent returns the one event of type typ in the sandbox's outbox.
func (s *stack) outboxEvent(typ string) sandbox.Delivery {
	s.t.Helper()
	all, err := s.sandbox.Deliveries(s.t.Context())
	if err != nil {
		s.t.Fatal(err)
	}
	var found []sandbox.Delivery
	for _, d := range all {
		if d.Type == typ {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		s.t.Fatalf("outbox events of type %s = %d, want 1", typ, len(found))
	}
	return found[0]
}

// delivered counts the copies of events of type typ the sandbox delivered.
func (s *stack) delivered(typ string) int {
	s.t.Helper()
	all, err := s.sandbox.Deliveries(s.t.Context())
	if err != nil {
		s.t.Fatal(err)
	}
	n := 0
	for _, d := range all {
		if d.Type == typ && d.Delivered() {
			n++
		}
	}
	return n
}

// deliver posts an outbox event to payd as the sandbox would, signed now.
func (s *stack) deliver(d sandbox.Delivery) reply {
	s.t.Helper()
	return s.postWebhook(d.Payload, signedWebhook(s.t, d.EventID, time.Now(), d.Payload))
}

// lostRefundReply registers email, pays an 8.00 order and refunds 3.00 of
// it, then forgets the provider's reply: payd's refund is still pending. It
// returns the customer's token, the order and the refund.
func (s *stack) lostRefundReply(email string) (token, orderID string, refund client.Refund) {
	s.t.Helper()
	_, token = s.register(email)
	orderID = s.paidOrder(token, "8.00")
	r := s.refund(orderID, uuid.NewString(), "3.00")
	if r.Status != http.StatusOK {
		s.t.Fatalf("refund = %d %s, want 200", r.Status, r.Body)
	}
	refund = decode[client.RefundResult](s.t, r).Refund
	// The books as a lost reply leaves them (ADR 55): the refund pending,
	// its money reserved on the order, not confirmed, not booked.
	for _, q := range []string{
		"UPDATE refunds SET status = 'pending', provider_refund_id = NULL WHERE id = ?",
		"UPDATE orders SET refunded_minor = refunded_minor - 300, refund_reserved_minor = refund_reserved_minor + 300 WHERE id = (SELECT order_id FROM refunds WHERE id = ?)",
		"DELETE FROM ledger_entries WHERE kind = 'refund' AND order_id = (SELECT order_id FROM refunds WHERE id = ?)",
	} {
		if err := s.db.Gorm().Exec(q, refund.Id).Error; err != nil {
			s.t.Fatal(err)
		}
	}
	return token, orderID, refund
}
