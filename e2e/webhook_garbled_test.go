package e2e

import (
	"encoding/json"
	"github.com/payd/payd/client"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
)

// TestWebhookGarbledButSigned: an event the provider signed is its word,
// however garbled its data: payd records it and answers 200, never 400, or
// the provider would retry it forever and no operator would see it. An
// unreadable amount is stored and never applied — it is not what the
// provider's record says (ADR 0031), so the order stays unpaid and an
// operator finds one unconfirmed_payment on its timeline; a status payd
// does not know is ignored (the type says the outcome); a refund.succeeded
// without the provider's refund id settles the refund all the same. A
// repeated delivery of each changes nothing.
func TestWebhookGarbledButSigned(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		_, token := s.register(newEmail())

		// The payment's amount cannot be read.
		unread, _, p := s.asyncOrder(token, "21.00")
		badAmount := garbledEvent(t, "payment.succeeded", p, func(d map[string]any) { d["amount"] = "twenty-one" })
		s.deliverTwice(badAmount, "discrepancy")
		if o := s.orderRow(unread); o.Status == domain.StatusPaid {
			t.Errorf("order with an unreadable amount = %s, want unpaid", o.Status)
		}
		var unconfirmed []client.Discrepancy
		for _, d := range s.timeline(unread).Discrepancies {
			if string(d.Type) == string(domain.UnconfirmedPayment) {
				unconfirmed = append(unconfirmed, d)
			}
		}
		if len(unconfirmed) != 1 || unconfirmed[0].AttemptId == nil || *unconfirmed[0].AttemptId != p.AttemptID {
			t.Errorf("unconfirmed_payment discrepancies on the timeline = %+v, want one for attempt %s", unconfirmed, p.AttemptID)
		}

		// The status is one payd does not know: the type decides.
		odd, _, q := s.asyncOrder(token, "22.00")
		badStatus := garbledEvent(t, "payment.succeeded", q, func(d map[string]any) { d["status"] = "maybe" })
		s.deliverTwice(badStatus, "applied")
		if o := s.orderRow(odd); o.Status != domain.StatusPaid {
			t.Errorf("order paid with an odd status = %s, want paid", o.Status)
		}

		// The refund's own id is missing.
		_, refunded, refund := s.lostRefundReply(newEmail())
		var ev map[string]any
		if err := json.Unmarshal(s.outboxEvent("refund.succeeded").Payload, &ev); err != nil {
			t.Fatal(err)
		}
		data := ev["data"].(map[string]any)
		delete(data, "refund_id")
		noRefundID := garbled{id: "evt_" + uuid.NewString(), body: mustJSON(t, ev)}
		s.deliverTwice(noRefundID, "applied")
		if n := s.count("refunds WHERE id = ? AND status = 'succeeded'", refund.Id); n != 1 {
			t.Errorf("refund %s not settled by the event without a refund id", refund.Id)
		}
		if o := s.timeline(refunded).Order; o.RefundedAmount != "3.00" {
			t.Errorf("order refunded %s, want 3.00", o.RefundedAmount)
		}

		if n := s.count("discrepancies"); n != 1 {
			t.Errorf("discrepancies = %d, want the one unconfirmed_payment", n)
		}
	})
}

// garbled is one signed delivery: its message id and its body.
type garbled struct {
	id   string
	body []byte
}

// garbledEvent renders a payment event as eventBody does, under a new
// message id, with its data changed by edit.
func garbledEvent(t *testing.T, typ string, p payment, edit func(data map[string]any)) garbled {
	t.Helper()
	id := "evt_" + uuid.NewString()
	var ev map[string]any
	if err := json.Unmarshal(eventBody(t, id, typ, p), &ev); err != nil {
		t.Fatal(err)
	}
	edit(ev["data"].(map[string]any))
	return garbled{id: id, body: mustJSON(t, ev)}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deliverTwice delivers ev, wanting 200 with outcome, then again, wanting
// 200 duplicate and nothing changed: one inbox row, the same orders,
// attempts, refunds and discrepancies.
func (s *stack) deliverTwice(ev garbled, outcome string) {
	s.t.Helper()
	r := s.postWebhook(ev.body, signedWebhook(s.t, ev.id, time.Now(), ev.body))
	if r.Status != http.StatusOK || r.json(s.t)["outcome"] != outcome {
		s.t.Fatalf("delivery of %s = %d %s, want 200 %s", ev.body, r.Status, r.Body, outcome)
	}
	before := s.books()
	r = s.postWebhook(ev.body, signedWebhook(s.t, ev.id, time.Now(), ev.body))
	if r.Status != http.StatusOK || r.json(s.t)["outcome"] != "duplicate" {
		s.t.Errorf("repeated delivery of %s = %d %s, want 200 duplicate", ev.body, r.Status, r.Body)
	}
	if after := s.books(); after != before {
		s.t.Errorf("repeated delivery changed payd's books: %+v, then %+v", before, after)
	}
	if n := s.count("webhook_events WHERE id = ?", ev.id); n != 1 {
		s.t.Errorf("inbox rows for %s = %d, want 1", ev.id, n)
	}
}

// ledger counts what an event could change: orders and their versions
// (one more per transition), attempts by status, refunds, discrepancies and
// inbox rows.
type ledger struct {
	Orders, Paid, Versions, Attempts, Held, Refunds, RefundsDone, Discrepancies, Events int64
}

// books reads the ledger from payd's database.
func (s *stack) books() ledger {
	s.t.Helper()
	var versions []int64
	scanRows(s.t, s.db, &versions, "SELECT version FROM orders")
	var sum int64
	for _, v := range versions {
		sum += v
	}
	return ledger{
		Orders: s.count("orders"), Paid: s.count("orders WHERE status = 'paid'"), Versions: sum,
		Attempts: s.count("payment_attempts"), Held: s.count("payment_attempts WHERE status = 'held'"),
		Refunds: s.count("refunds"), RefundsDone: s.count("refunds WHERE status = 'succeeded'"),
		Discrepancies: s.count("discrepancies"), Events: s.count("webhook_events"),
	}
}
