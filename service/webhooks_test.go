package service_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/service"
)

// TestWebhookDuplicateAppliedOnce: one event delivered twice at once (to
// two replicas) and again later pays the order once; the later copy is a
// duplicate.
func TestWebhookDuplicateAppliedOnce(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.order(t, cust, "14.00")
		if got, err := w.pay(cust, o.ID, newKey(), "pm_async"); err != nil || got.Status != domain.StatusProcessing {
			t.Fatalf("Pay(pm_async) = %v, %v, want processing", got.Status, err)
		}
		w.resolveAsync(t)
		evs := w.events(t, o.ID)
		if len(evs) != 1 || evs[0].Type != domain.EventPaymentSucceeded {
			t.Fatalf("events = %+v, want one payment.succeeded", evs)
		}

		other := w.replica()
		var wg sync.WaitGroup
		outcomes := make([]service.WebhookOutcome, 2)
		for i, p := range []*world{w, other} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := p.receive(ctx, evs[0])
				if err != nil {
					t.Errorf("Receive on replica %d = %v", i, err)
				}
				outcomes[i] = out
			}()
		}
		wg.Wait()
		for _, out := range outcomes {
			if out != service.OutcomeApplied && out != service.OutcomeDuplicate {
				t.Errorf("concurrent deliveries = %v, want applied or duplicate", outcomes)
			}
		}
		if out, err := w.receive(ctx, evs[0]); err != nil || out != service.OutcomeDuplicate {
			t.Fatalf("Receive later = %q, %v, want duplicate", out, err)
		}
		if st := w.get(t, cust, o.ID).Status; st != domain.StatusPaid {
			t.Fatalf("status = %v, want paid", st)
		}
		if n := w.outcomes("paid"); n != 1 {
			t.Fatalf("payments reported paid = %d, want 1", n)
		}
		if ds := w.discrepanciesOf(t, o.ID); len(ds) != 0 {
			t.Fatalf("discrepancies = %+v, want none", ds)
		}
	})
}

// TestWebhookOutOfOrder: a decline of an earlier attempt delivered after
// the success of a later one changes nothing: the order stays paid by the
// later attempt, nothing is released or refunded.
func TestWebhookOutOfOrder(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.order(t, cust, "16.00")
		if _, err := w.pay(cust, o.ID, newKey(), "pm_declined"); err == nil {
			t.Fatal("Pay(pm_declined) = nil, want a decline")
		}
		if got, err := w.pay(cust, o.ID, newKey(), "pm_ok"); err != nil || got.Status != domain.StatusPaid {
			t.Fatalf("Pay(pm_ok) = %v, %v, want paid", got.Status, err)
		}
		evs := w.events(t, o.ID)
		if len(evs) != 2 || evs[0].Type != domain.EventPaymentFailed || evs[1].Type != domain.EventPaymentSucceeded {
			t.Fatalf("events = %+v, want payment.failed then payment.succeeded", evs)
		}

		for _, ev := range []event{evs[1], evs[0]} {
			if out, err := w.receive(ctx, ev); err != nil || out != service.OutcomeApplied {
				t.Fatalf("Receive(%s) = %q, %v, want applied", ev.Type, out, err)
			}
		}
		got := w.get(t, cust, o.ID)
		if got.Status != domain.StatusPaid || !got.RefundedAmount.IsZero() {
			t.Fatalf("order = %v refunded %s, want paid, nothing refunded", got.Status, got.RefundedAmount)
		}
		if as := w.attempts(t, cust, o.ID); as[0].Status != domain.AttemptFailed || as[1].Status != domain.AttemptSucceeded {
			t.Fatalf("attempts = %v, %v, want failed, succeeded", as[0].Status, as[1].Status)
		}
		if p, d := w.outcomes("paid"), w.outcomes("declined"); p != 1 || d != 1 {
			t.Fatalf("reported paid %d, declined %d, want 1 and 1", p, d)
		}
		if ds := w.discrepanciesOf(t, o.ID); len(ds) != 0 {
			t.Fatalf("discrepancies = %+v, want none", ds)
		}
	})
}

// TestWebhookChargePaydNeverMade: a success for a charge payd has no
// attempt for is recorded once as a missing local payment, for an operator.
func TestWebhookChargePaydNeverMade(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.order(t, cust, "3.00")
		w.chargeBehindPaydsBack(t, newKey(), o.ID, "3.00")
		evs := w.events(t, o.ID)
		if len(evs) != 1 {
			t.Fatalf("events = %+v, want one", evs)
		}
		if out, err := w.receive(ctx, evs[0]); err != nil || out != service.OutcomeDiscrepancy {
			t.Fatalf("Receive = %q, %v, want discrepancy", out, err)
		}
		ds := w.discrepanciesOf(t, o.ID)
		if len(ds) != 1 || ds[0].Type != domain.MissingLocalPayment {
			t.Fatalf("discrepancies = %+v, want one missing_local_payment", ds)
		}
		if st := w.get(t, cust, o.ID).Status; st != domain.StatusPending {
			t.Fatalf("status = %v, want pending", st)
		}
	})
}

// TestWebhookFailureContradictingProvider: a payment.failed for an attempt
// whose outcome payd does not know yet (the reply was lost) but which the
// provider charged is checked with the provider before anything is
// released: the order ends paid by that charge, never free for a second.
func TestWebhookFailureContradictingProvider(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.order(t, cust, "18.00")
		if got, err := w.pay(cust, o.ID, newKey(), "pm_timeout"); err != nil || got.Status != domain.StatusProcessing {
			t.Fatalf("Pay with the reply lost = %v, %v, want processing", got.Status, err)
		}
		evs := w.events(t, o.ID)
		if len(evs) != 1 {
			t.Fatalf("events = %+v, want one", evs)
		}
		stale := evs[0] // the same charge, reported failed by a wrong or stale event
		stale.ID, stale.Type, stale.Data.FailureCode = "evt_stale_"+newKey(), domain.EventPaymentFailed, "card_declined"

		if _, err := w.receive(ctx, stale); err != nil {
			t.Fatalf("Receive(stale failure) = %v", err)
		}
		if st := w.get(t, cust, o.ID).Status; st != domain.StatusPaid {
			t.Fatalf("status = %v, want paid: the provider charged this attempt", st)
		}
		if _, err := w.pay(cust, o.ID, newKey(), "pm_ok"); err == nil {
			t.Fatal("Pay with another key = nil, want a conflict")
		}
		if n := len(w.charges(t, o.ID)); n != 1 {
			t.Fatalf("charges = %d, want 1", n)
		}
	})
}

// garble returns ev delivered as a new message whose data edit changed, as
// payd's receiver reads it once the signature checked out.
func garble(t *testing.T, ev event, edit func(data map[string]any)) event {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal(ev.Payload, &body); err != nil {
		t.Fatal(err)
	}
	edit(body["data"].(map[string]any))
	payload, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := provider.ParseEvent(payload)
	if err != nil {
		t.Fatalf("ParseEvent(%s) = %v, want a signed event recorded, not refused", payload, err)
	}
	return event{ID: newKey(), Type: parsed.Type, Payload: payload, Data: parsed}
}

// eventOf returns the one event of type typ the sandbox owes for an order.
func eventOf(t *testing.T, w *world, orderID string, typ domain.ProviderEventType) event {
	t.Helper()
	var found []event
	for _, ev := range w.events(t, orderID) {
		if ev.Type == typ {
			found = append(found, ev)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s events for order %s = %d, want 1", typ, orderID, len(found))
	}
	return found[0]
}

// receiveTwice delivers ev, wanting outcome, then again, wanting a
// duplicate.
func receiveTwice(t *testing.T, w *world, ev event, outcome service.WebhookOutcome) {
	t.Helper()
	ctx := context.Background()
	if out, err := w.receive(ctx, ev); err != nil || out != outcome {
		t.Fatalf("Receive(%s) = %q, %v, want %s", ev.Payload, out, err, outcome)
	}
	if out, err := w.receive(ctx, ev); err != nil || out != service.OutcomeDuplicate {
		t.Fatalf("Receive(%s) again = %q, %v, want duplicate", ev.Payload, out, err)
	}
}

// TestWebhookGarbledPaymentRecorded: a signed payment.succeeded whose
// amount is unreadable or missing does not say what the provider's record
// says, so it is stored and never applied (ADR 0031): the attempt stays
// unsettled for its own path to settle, the order unpaid, and one
// unconfirmed_payment quotes the event as written and the provider's
// amount. A status payd does not know is ignored: the type says the
// outcome.
func TestWebhookGarbledPaymentRecorded(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		for name, edit := range map[string]func(map[string]any){
			"unreadable": func(d map[string]any) { d["amount"] = "fourteen" },
			"missing":    func(d map[string]any) { delete(d, "amount") },
		} {
			o := w.order(t, cust, "14.00")
			if got, err := w.pay(cust, o.ID, newKey(), "pm_async"); err != nil || got.Status != domain.StatusProcessing {
				t.Fatalf("Pay(pm_async) = %v, %v, want processing", got.Status, err)
			}
			w.resolveAsync(t)
			ev := garble(t, eventOf(t, w, o.ID, domain.EventPaymentSucceeded), edit)
			if ev.Data.AmountReadable() {
				t.Fatalf("%s amount: AmountReadable() = true for %s", name, ev.Payload)
			}
			receiveTwice(t, w, ev, service.OutcomeDiscrepancy)
			if st := w.get(t, cust, o.ID).Status; st == domain.StatusPaid {
				t.Errorf("%s amount: order = %v, want unpaid", name, st)
			}
			if as := w.attempts(t, cust, o.ID); len(as) != 1 || as[0].Status != domain.AttemptUnknown {
				t.Errorf("%s amount: attempts = %+v, want one unknown", name, as)
			}
			ds := w.discrepanciesOf(t, o.ID)
			if len(ds) != 1 || ds[0].Type != domain.UnconfirmedPayment || ds[0].AttemptID != ev.Data.IdempotencyKey || ds[0].Reference != ev.ID ||
				!ds[0].ProviderAmount.Equal(o.Amount) || !strings.Contains(ds[0].Note, ev.ID) || !strings.Contains(ds[0].Note, ", "+ev.Data.AmountText+" EUR)") {
				t.Errorf("%s amount: discrepancies = %+v, want one unconfirmed_payment under the message, quoting the event and the provider's amount", name, ds)
			}
		}

		o := w.order(t, cust, "15.00")
		if _, err := w.pay(cust, o.ID, newKey(), "pm_async"); err != nil {
			t.Fatal(err)
		}
		w.resolveAsync(t)
		ev := garble(t, eventOf(t, w, o.ID, domain.EventPaymentSucceeded), func(d map[string]any) { d["status"] = "maybe" })
		receiveTwice(t, w, ev, service.OutcomeApplied)
		if st := w.get(t, cust, o.ID).Status; st != domain.StatusPaid {
			t.Errorf("order after a success with an odd status = %v, want paid", st)
		}
		if ds := w.discrepanciesOf(t, o.ID); len(ds) != 0 {
			t.Errorf("discrepancies = %+v, want none", ds)
		}
	})
}

// TestWebhookAmountQuotedAsWritten: an amount with more decimals than its
// currency has is quoted in the discrepancy's note as the provider wrote
// it, never normalised into an amount payd would have refused.
func TestWebhookAmountQuotedAsWritten(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		cust := w.customer(t)
		o := w.order(t, cust, "3.00")
		w.chargeBehindPaydsBack(t, newKey(), o.ID, "3.00")
		ev := garble(t, eventOf(t, w, o.ID, domain.EventPaymentSucceeded), func(d map[string]any) { d["amount"] = "3.000" })
		receiveTwice(t, w, ev, service.OutcomeDiscrepancy)
		ds := w.discrepanciesOf(t, o.ID)
		if len(ds) != 1 || ds[0].Type != domain.MissingLocalPayment || !ds[0].ProviderAmount.IsZero() || !strings.Contains(ds[0].Note, "(provider: 3.000 EUR)") {
			t.Fatalf("discrepancies = %+v, want one missing_local_payment quoting 3.000 EUR in its note", ds)
		}
	})
}

// TestWebhookGarbledRefundRecorded: a signed refund.succeeded with an
// unreadable amount leaves a pending refund pending with one
// amount_mismatch quoting what the provider wrote; one without the
// provider's refund id settles the refund all the same.
func TestWebhookGarbledRefundRecorded(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.paidOrder(t, cust, "10.00")
		w.loseNextRefundReply()
		req := service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Fingerprint: "fp-1", Amount: "4.00", Reason: "damaged"}
		r, _, err := w.refunds.Refund(ctx, req)
		if err != nil || r.Status != domain.RefundPending {
			t.Fatalf("Refund(4.00) with its reply lost = %+v, %v, want pending", r, err)
		}
		sent := eventOf(t, w, o.ID, domain.EventRefundSucceeded)

		receiveTwice(t, w, garble(t, sent, func(d map[string]any) { d["amount"] = "four" }), service.OutcomeDiscrepancy)
		if r, _, err := w.refunds.Refund(ctx, req); err != nil || r.Status != domain.RefundPending {
			t.Fatalf("refund after an unreadable amount = %+v, %v, want pending", r, err)
		}
		ds := w.discrepanciesOf(t, o.ID)
		if len(ds) != 1 || ds[0].Type != domain.AmountMismatch || !strings.Contains(ds[0].Note, "(provider: four EUR)") {
			t.Fatalf("discrepancies = %+v, want one amount_mismatch quoting four EUR", ds)
		}

		receiveTwice(t, w, garble(t, sent, func(d map[string]any) { delete(d, "refund_id") }), service.OutcomeApplied)
		if r, _, err := w.refunds.Refund(ctx, req); err != nil || r.Status != domain.RefundSucceeded || r.ProviderRefundID != "" {
			t.Fatalf("refund after an event without its id = %+v, %v, want succeeded with no provider refund id", r, err)
		}
	})
}

// TestWebhookSuccessWhilePending: a payment.succeeded for a charge the
// provider still reports pending is not yet confirmed, nor contradicted:
// it is ignored, nothing is recorded, and the attempt waits for its own
// path; the event sent once the charge succeeded pays the order.
func TestWebhookSuccessWhilePending(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.order(t, cust, "14.00")
		if got, err := w.pay(cust, o.ID, newKey(), "pm_async"); err != nil || got.Status != domain.StatusProcessing {
			t.Fatalf("Pay(pm_async) = %v, %v, want processing", got.Status, err)
		}
		a := w.attempts(t, cust, o.ID)[0]
		payload, err := json.Marshal(map[string]any{"id": "evt_early", "type": "payment.succeeded", "data": map[string]string{
			"charge_id": a.ProviderChargeID, "idempotency_key": a.ID, "order_id": o.ID, "amount": "14.00", "currency": "EUR", "status": "succeeded"}})
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := provider.ParseEvent(payload)
		if err != nil {
			t.Fatal(err)
		}
		early := event{ID: newKey(), Type: parsed.Type, Payload: payload, Data: parsed}
		if out, err := w.receive(ctx, early); err != nil || out != service.OutcomeIgnored {
			t.Fatalf("Receive(success while pending) = %q, %v, want ignored", out, err)
		}
		if as := w.attempts(t, cust, o.ID); as[0].Status != domain.AttemptUnknown {
			t.Errorf("attempt = %v, want unknown", as[0].Status)
		}
		if ds := w.discrepanciesOf(t, o.ID); len(ds) != 0 {
			t.Errorf("discrepancies = %+v, want none", ds)
		}
		w.resolveAsync(t)
		if out, err := w.receive(ctx, eventOf(t, w, o.ID, domain.EventPaymentSucceeded)); err != nil || out != service.OutcomeApplied {
			t.Fatalf("Receive(success) = %q, %v, want applied", out, err)
		}
		if st := w.get(t, cust, o.ID).Status; st != domain.StatusPaid {
			t.Errorf("order = %v, want paid", st)
		}
	})
}
