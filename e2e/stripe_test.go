package e2e

import (
	"github.com/payd/payd/client"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/internal/stripefake"
)

// The Stripe adapter behind the same state machine: every case ends with
// exactly one PaymentIntent taking the customer's money for the order.
func TestStripePayments(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		// A short lease: a retry after a lost reply may ask at once, and
		// the recoverer passes every second.
		s := start(t, on(dialect), stripeMode(), withEnv(env{"PAYD_LEASE": "1s", "PAYD_PROVIDER_TIMEOUT": "500ms"})).stripe()
		_, token := s.register(newEmail())
		oneCharge := func(t *testing.T, orderID string) {
			t.Helper()
			if n := s.fake.Succeeded(orderID); n != 1 {
				t.Fatalf("succeeded PaymentIntents for order %s = %d, want 1", orderID, n)
			}
			if st := s.status(token, orderID); st != "paid" {
				t.Fatalf("order %s = %s, want paid", orderID, st)
			}
		}

		t.Run("success", func(t *testing.T) {
			id := s.order(token, "19.90")
			if r := s.pay(token, id, uuid.NewString(), stripefake.PMVisa); r.Status != http.StatusOK {
				t.Fatalf("pay = %d %s, want 200", r.Status, r.Body)
			}
			// Stripe's webhook arrives after the reply, twice: nothing changes.
			evs := s.eventsOf(s.fake.PaymentIntentOf(id))
			s.deliver(evs...)
			s.deliver(evs...)
			oneCharge(t, id)
			tl := s.timeline(id)
			if len(tl.Attempts) != 1 || tl.Attempts[0].ProviderChargeId == nil || *tl.Attempts[0].ProviderChargeId != s.fake.PaymentIntentOf(id) {
				t.Fatalf("attempts = %+v, want one recording the PaymentIntent", tl.Attempts)
			}
		})

		t.Run("concurrent pays, one charge", func(t *testing.T) {
			id := s.order(token, "19.90")
			statuses := make([]int, 16)
			forEach(16, len(statuses), func(i int) {
				statuses[i] = s.pay(token, id, uuid.NewString(), stripefake.PMVisa).Status
			})
			if n := slices.Index(statuses, http.StatusOK); n < 0 || slices.Contains(statuses[n+1:], http.StatusOK) {
				t.Fatalf("pay statuses = %v, want exactly one 200", statuses)
			}
			oneCharge(t, id)
			if n := s.fake.Created(id); n != 1 {
				t.Fatalf("PaymentIntents created = %d, want 1", n)
			}
		})

		t.Run("decline then pay", func(t *testing.T) {
			id := s.order(token, "19.90")
			r := s.pay(token, id, uuid.NewString(), stripefake.PMInsufficient)
			if r.Status != http.StatusPaymentRequired || r.code(t) != "card_declined" || !bytesContains(r.Body, `"decline_code":"insufficient_funds"`) {
				t.Fatalf("pay(declined) = %d %s, want 402 card_declined, insufficient_funds", r.Status, r.Body)
			}
			if fc := s.timeline(id).Attempts[0]; fc.Status != "failed" {
				t.Fatalf("attempt = %+v, want failed", fc)
			}
			// Cancelled before the order was released: a browser still
			// holding its client_secret cannot complete it any more.
			declined := s.fake.PaymentIntentOf(id)
			if err := s.fake.Confirm(declined, stripefake.PMVisa); err == nil || s.fake.Status(declined) != "canceled" {
				t.Fatalf("the declined PaymentIntent is %s and could be confirmed again (%v)", s.fake.Status(declined), err)
			}
			s.deliver(s.eventsOf(s.fake.PaymentIntentOf(id))...) // payment_failed: already known
			if r := s.pay(token, id, uuid.NewString(), stripefake.PMVisa); r.Status != http.StatusOK {
				t.Fatalf("pay again = %d %s, want 200", r.Status, r.Body)
			}
			oneCharge(t, id)
		})

		t.Run("unknown payment method", func(t *testing.T) {
			id := s.order(token, "19.90")
			if r := s.pay(token, id, uuid.NewString(), "pm_nosuch"); r.Status != http.StatusBadRequest {
				t.Fatalf("pay(pm_nosuch) = %d %s, want 400", r.Status, r.Body)
			}
			if st := s.status(token, id); st != "pending" {
				t.Fatalf("order = %s, want pending", st)
			}
		})

		t.Run("3-D Secure completed, webhooks reordered and duplicated", func(t *testing.T) {
			id := s.order(token, "19.90")
			key := uuid.NewString()
			r := s.pay(token, id, key, stripefake.PM3DS)
			if r.Status != http.StatusAccepted {
				t.Fatalf("pay(3DS) = %d %s, want 202", r.Status, r.Body)
			}
			pi := s.fake.PaymentIntentOf(id)
			na, _ := r.json(t)["next_action"].(map[string]any)
			if na == nil || na["type"] != "use_stripe_sdk" || na["client_secret"] != pi+"_secret_fake" {
				t.Fatalf("pay(3DS) = %s, want next_action with the PaymentIntent's client_secret", r.Body)
			}
			s.fake.Authenticate(pi, true)
			evs := s.eventsOf(pi) // requires_action, succeeded
			defer func() {
				// Stored for operators without the secret that completes the payment.
				var rows []struct{ Payload []byte }
				scanRows(t, s.db, &rows, "SELECT payload FROM webhook_events")
				for _, r := range rows {
					if bytesContains(r.Payload, pi+"_secret") {
						t.Errorf("stored event carries the client_secret: %s", r.Payload)
					}
				}
			}()
			rev := slices.Clone(evs)
			slices.Reverse(rev)
			s.deliver(rev...)
			s.deliver(evs...)
			oneCharge(t, id)
			if r := s.pay(token, id, key, stripefake.PM3DS); r.Status != http.StatusOK {
				t.Fatalf("pay(3DS) replayed after the webhook = %d %s, want 200", r.Status, r.Body)
			}
		})

		t.Run("an event for another PaymentIntent is a discrepancy, not the attempt's outcome", func(t *testing.T) {
			id := s.order(token, "19.90")
			if r := s.pay(token, id, uuid.NewString(), stripefake.PM3DS); r.Status != http.StatusAccepted {
				t.Fatalf("pay(3DS) = %d %s, want 202", r.Status, r.Body)
			}
			pi := s.fake.PaymentIntentOf(id)
			twin, ev := s.fake.Twin(pi)
			s.deliver(ev, ev)
			tl := s.timeline(id)
			if tl.Order.Status != "processing" || *tl.Attempts[0].ProviderChargeId != pi {
				t.Fatalf("order %s, attempt %+v after another PaymentIntent's success; want processing, still %s", tl.Order.Status, tl.Attempts[0], pi)
			}
			if len(tl.Discrepancies) != 1 || tl.Discrepancies[0].Type != "missing_local_payment" || tl.Discrepancies[0].Reference != twin {
				t.Fatalf("discrepancies = %+v, want one missing_local_payment for %s", tl.Discrepancies, twin)
			}
			s.fake.Authenticate(pi, true)
			evs := s.eventsOf(pi)
			s.deliver(evs[len(evs)-1])
			if st := s.status(token, id); st != "paid" {
				t.Fatalf("order = %s after its own PaymentIntent succeeded, want paid", st)
			}
			if tl := s.timeline(id); *tl.Attempts[0].ProviderChargeId != pi {
				t.Fatalf("attempt = %+v, want paid by %s", tl.Attempts[0], pi)
			}
		})

		t.Run("a success the PaymentIntent does not confirm is not applied", func(t *testing.T) {
			id := s.order(token, "19.90")
			if r := s.pay(token, id, uuid.NewString(), stripefake.PM3DS); r.Status != http.StatusAccepted {
				t.Fatalf("pay(3DS) = %d %s, want 202", r.Status, r.Body)
			}
			pi := s.fake.PaymentIntentOf(id)
			early := s.fake.OtherMoney(pi, 1990) // the PaymentIntent still requires action
			s.deliver(early, early)
			if tl := s.timeline(id); tl.Order.Status != "processing" || tl.Attempts[0].Status != "unknown" || len(tl.Discrepancies) != 0 {
				t.Fatalf("order %s, attempt %+v, discrepancies %+v after a success Stripe does not report yet; want processing, unknown, none",
					tl.Order.Status, tl.Attempts[0], tl.Discrepancies)
			}
			s.fake.Authenticate(pi, true)
			evs := s.eventsOf(pi)
			ev := s.fake.OtherMoney(pi, 199) // 1.99, not the PaymentIntent's 19.90
			s.deliver(ev, ev)
			tl := s.timeline(id)
			if tl.Order.Status == "paid" || tl.Attempts[0].Status != "unknown" {
				t.Fatalf("order %s, attempt %+v after a success for other money; want not paid, attempt unknown", tl.Order.Status, tl.Attempts[0])
			}
			if len(tl.Discrepancies) != 1 || tl.Discrepancies[0].Type != "unconfirmed_payment" || tl.Discrepancies[0].Reference != ev.ID ||
				tl.Discrepancies[0].ProviderAmount == nil || *tl.Discrepancies[0].ProviderAmount != "19.90" {
				t.Fatalf("discrepancies = %+v, want one unconfirmed_payment for %s quoting Stripe's 19.90", tl.Discrepancies, ev.ID)
			}
			s.deliver(evs[len(evs)-1])
			if st := s.status(token, id); st != "paid" {
				t.Fatalf("order = %s after the PaymentIntent's own success, want paid", st)
			}
		})

		t.Run("3-D Secure failed", func(t *testing.T) {
			id := s.order(token, "19.90")
			if r := s.pay(token, id, uuid.NewString(), stripefake.PM3DS); r.Status != http.StatusAccepted {
				t.Fatalf("pay(3DS) = %d %s, want 202", r.Status, r.Body)
			}
			pi := s.fake.PaymentIntentOf(id)
			s.fake.Authenticate(pi, false)
			s.deliver(s.eventsOf(pi)...)
			if st := s.status(token, id); st != "pending" {
				t.Fatalf("order after failed 3DS = %s, want pending (payable again)", st)
			}
			if err := s.fake.Confirm(pi, stripefake.PMVisa); err == nil || s.fake.Status(pi) != "canceled" {
				t.Fatalf("the PaymentIntent that failed 3DS is %s and could be confirmed again (%v)", s.fake.Status(pi), err)
			}
			if r := s.pay(token, id, uuid.NewString(), stripefake.PMVisa); r.Status != http.StatusOK {
				t.Fatalf("pay again = %d %s, want 200", r.Status, r.Body)
			}
			oneCharge(t, id)
		})

		t.Run("processing then webhook", func(t *testing.T) {
			id := s.order(token, "19.90")
			if r := s.pay(token, id, uuid.NewString(), stripefake.PMProcessing); r.Status != http.StatusAccepted {
				t.Fatalf("pay(processing) = %d %s, want 202", r.Status, r.Body)
			}
			pi := s.fake.PaymentIntentOf(id)
			s.fake.Finish(pi, true)
			evs := s.eventsOf(pi)
			s.deliver(evs[len(evs)-1], evs[len(evs)-1])
			oneCharge(t, id)
		})

		t.Run("lost reply, retried", func(t *testing.T) {
			id := s.order(token, "19.90")
			key := uuid.NewString()
			// Two: net/http itself resends a POST carrying an
			// Idempotency-Key once when a reused connection dies unanswered.
			s.fake.DropReplies(2)
			if r := s.pay(token, id, key, stripefake.PMVisa); r.Status != http.StatusAccepted {
				t.Fatalf("pay with the reply lost = %d %s, want 202", r.Status, r.Body)
			}
			var last reply
			if !within(20*time.Second, func() bool {
				last = s.pay(token, id, key, stripefake.PMVisa)
				return last.Status == http.StatusOK
			}) {
				t.Fatalf("retry = %d %s; calls %v", last.Status, last.Body, s.fake.Calls())
			}
			oneCharge(t, id)
			if n := s.fake.Created(id); n != 1 {
				t.Fatalf("PaymentIntents created for the order = %d, want 1", n)
			}
		})

		t.Run("lost reply, processing: the PaymentIntent id learned later is stored", func(t *testing.T) {
			id := s.order(token, "19.90")
			key := uuid.NewString()
			s.fake.DropReplies(2)
			if r := s.pay(token, id, key, stripefake.PMProcessing); r.Status != http.StatusAccepted {
				t.Fatalf("pay with the reply lost = %d %s, want 202", r.Status, r.Body)
			}
			pi := s.fake.PaymentIntentOf(id)
			// The retry (or the recoverer) replays the create and learns
			// the PaymentIntent, still processing: its id must be kept.
			var got string
			if !within(20*time.Second, func() bool {
				s.pay(token, id, key, stripefake.PMProcessing)
				tl := s.timeline(id)
				if len(tl.Attempts) == 1 && tl.Attempts[0].ProviderChargeId != nil {
					got = *tl.Attempts[0].ProviderChargeId
				}
				return got != ""
			}) {
				t.Fatalf("attempts never recorded the PaymentIntent %s; calls %v", pi, s.fake.Calls())
			}
			if got != pi {
				t.Fatalf("attempt recorded %s, want %s", got, pi)
			}
			// From now on payd asks by id.
			s.fake.Finish(pi, true)
			if !within(20*time.Second, func() bool { return s.status(token, id) == "paid" }) {
				t.Fatalf("order never paid; calls %v", s.fake.Calls())
			}
			if !slices.Contains(s.fake.Calls(), "GET /v1/payment_intents/"+pi) {
				t.Fatalf("calls = %v, want a retrieve of %s by id", s.fake.Calls(), pi)
			}
			oneCharge(t, id)
		})

		t.Run("dispute is a discrepancy", func(t *testing.T) {
			id := s.order(token, "19.90")
			if r := s.pay(token, id, uuid.NewString(), stripefake.PMVisa); r.Status != http.StatusOK {
				t.Fatalf("pay = %d %s", r.Status, r.Body)
			}
			dp := s.fake.Dispute(s.fake.PaymentIntentOf(id))
			evs := s.eventsOf(dp)
			s.deliver(evs...)
			s.deliver(evs...)
			ds := s.timeline(id).Discrepancies
			if len(ds) != 1 || ds[0].Type != "disputed" || ds[0].Reference != dp || ds[0].Status != "open" {
				t.Fatalf("discrepancies = %+v, want one open disputed %s", ds, dp)
			}
			if st := s.status(token, id); st != "paid" {
				t.Fatalf("order = %s, want paid (a dispute moves no order)", st)
			}
		})

		t.Run("refund through the Refunds API", func(t *testing.T) {
			id := s.order(token, "19.90")
			if r := s.pay(token, id, uuid.NewString(), stripefake.PMVisa); r.Status != http.StatusOK {
				t.Fatalf("pay = %d %s", r.Status, r.Body)
			}
			key := uuid.NewString()
			if r := s.refund(id, key, "5.00"); r.Status != http.StatusOK && r.Status != http.StatusCreated {
				t.Fatalf("refund = %d %s", r.Status, r.Body)
			}
			if r := s.refund(id, key, "5.00"); r.Status != http.StatusOK && r.Status != http.StatusCreated {
				t.Fatalf("refund replayed = %d %s", r.Status, r.Body)
			}
			var refunds int
			for _, e := range s.fake.Events() {
				if e.Type == "refund.created" && bytesContains(e.Body, s.fake.PaymentIntentOf(id)) {
					refunds++
				}
			}
			if refunds != 1 {
				t.Fatalf("Stripe refunds = %d, want 1", refunds)
			}
			s.deliver(s.eventsOf(s.fake.PaymentIntentOf(id))...)
			tl := s.timeline(id)
			if len(tl.Refunds) != 1 || tl.Refunds[0].Status != "succeeded" || tl.Order.RefundedAmount != "5.00" {
				t.Fatalf("refunds = %+v, order %+v, want one succeeded of 5.00", tl.Refunds, tl.Order)
			}
		})

		t.Run("pending refund: its webhook settles it, a failure gives it back", func(t *testing.T) {
			s.fake.PendRefunds(true)
			t.Cleanup(func() { s.fake.PendRefunds(false) })
			refundOf := func(id, amount string) (string, client.Refund) {
				t.Helper()
				if r := s.pay(token, id, uuid.NewString(), stripefake.PMVisa); r.Status != http.StatusOK {
					t.Fatalf("pay = %d %s", r.Status, r.Body)
				}
				if r := s.refund(id, uuid.NewString(), amount); r.Status != http.StatusOK && r.Status != http.StatusCreated {
					t.Fatalf("refund = %d %s", r.Status, r.Body)
				}
				rs := s.fake.Refunds()
				re := rs[len(rs)-1][0]
				tl := s.timeline(id)
				if len(tl.Refunds) != 1 || tl.Refunds[0].Status != "pending" || tl.Refunds[0].ProviderRefundId == nil ||
					*tl.Refunds[0].ProviderRefundId != re {
					t.Fatalf("refunds = %+v, want one pending carrying %s (Stripe answered pending)", tl.Refunds, re)
				}
				return re, tl.Refunds[0]
			}

			// Pending, then succeeded: refunded once.
			paid := s.order(token, "19.90")
			re, _ := refundOf(paid, "19.90")
			// Asking again goes by the refund's id, never a replayed create.
			if !within(20*time.Second, func() bool { return slices.Contains(s.fake.Calls(), "GET /v1/refunds/"+re) }) {
				t.Fatalf("calls = %v, want GET /v1/refunds/%s from the retry of a pending refund", s.fake.Calls(), re)
			}
			if tl := s.timeline(paid); tl.Refunds[0].Status != "pending" {
				t.Fatalf("refund = %+v after asking Stripe, want still pending", tl.Refunds[0])
			}
			s.fake.FinishRefund(re, true)
			s.deliver(s.eventsOf(re)...)
			s.deliver(s.eventsOf(re)...)
			tl := s.timeline(paid)
			if len(tl.Refunds) != 1 || tl.Refunds[0].Status != "succeeded" || tl.Order.RefundedAmount != "19.90" || tl.Order.Status != "refunded" {
				t.Fatalf("refunds = %+v, order %+v; want one succeeded, order refunded 19.90", tl.Refunds, tl.Order)
			}

			// Pending, then failed: not refunded, the reservation given back.
			other := s.order(token, "19.90")
			re, _ = refundOf(other, "5.00")
			s.fake.FinishRefund(re, false)
			s.deliver(s.eventsOf(re)...)
			s.deliver(s.eventsOf(re)...)
			tl = s.timeline(other)
			if len(tl.Refunds) != 1 || tl.Refunds[0].Status != "failed" || tl.Order.RefundedAmount != "0.00" || tl.Order.Status != "paid" {
				t.Fatalf("refunds = %+v, order %+v; want one failed, order paid with nothing refunded", tl.Refunds, tl.Order)
			}
		})

		t.Run("bad signature", func(t *testing.T) {
			e := s.fake.Events()[0]
			h := http.Header{"Stripe-Signature": {"t=1,v1=deadbeef"}}
			r := s.do(request{method: http.MethodPost, path: "/v1/webhooks/stripe", header: h, body: e.Body})
			if r.Status != http.StatusUnauthorized || r.code(t) != "invalid_signature" {
				t.Fatalf("webhook with a bad signature = %d %s, want 401 invalid_signature", r.Status, r.Body)
			}
		})
	})
}

// A 3-D Secure payment the customer abandons is cancelled by the recoverer
// once PAYD_ORDER_TTL has passed, and only then is the order released: the
// PaymentIntent can no longer be completed behind payd's back.
func TestStripeAbandonedActionCancelled(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), stripeMode(), withEnv(env{"PAYD_LEASE": "1s", "PAYD_PROVIDER_TIMEOUT": "500ms", "PAYD_ORDER_TTL": "3s"})).stripe()
		_, token := s.register(newEmail())
		id := s.order(token, "19.90")
		if r := s.pay(token, id, uuid.NewString(), stripefake.PM3DS); r.Status != http.StatusAccepted {
			t.Fatalf("pay(3DS) = %d %s, want 202", r.Status, r.Body)
		}
		pi := s.fake.PaymentIntentOf(id)
		if !within(20*time.Second, func() bool { return s.fake.Status(pi) == "canceled" }) {
			t.Fatalf("PaymentIntent %s = %s, want canceled by the recoverer; calls %v", pi, s.fake.Status(pi), s.fake.Calls())
		}
		if !within(10*time.Second, func() bool { return s.timeline(id).Attempts[0].Status == "failed" }) {
			t.Fatalf("attempt = %+v, want failed once cancelled", s.timeline(id).Attempts[0])
		}
		if err := s.fake.Confirm(pi, stripefake.PMVisa); err == nil {
			t.Fatal("the abandoned PaymentIntent was confirmed after payd released the order")
		}
		if n := s.fake.Succeeded(id); n != 0 {
			t.Fatalf("succeeded PaymentIntents = %d, want 0", n)
		}
	})
}
