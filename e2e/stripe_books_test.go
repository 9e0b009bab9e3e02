package e2e

import (
	"github.com/payd/payd/client"
	"net/http"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/payd/payd/internal/stripefake"
)

// books reads the admin order detail's books.
func (s *stripeStack) books(orderID string) client.Timeline {
	s.t.Helper()
	r := s.admin("GET", "/v1/admin/orders/"+orderID, "", nil)
	if r.Status != http.StatusOK {
		s.t.Fatalf("GET /v1/admin/orders/%s = %d %s, want 200", orderID, r.Status, r.Body)
	}
	return decode[client.Timeline](s.t, r)
}

// paidStripeOrder creates an order of amount and pays it with the test Visa.
func (s *stripeStack) paidStripeOrder(token, amount string) (string, string) {
	s.t.Helper()
	id := s.order(token, amount)
	if r := s.pay(token, id, uuid.NewString(), stripefake.PMVisa); r.Status != http.StatusOK {
		s.t.Fatalf("pay(%s) = %d %s, want 200", id, r.Status, r.Body)
	}
	return id, s.fake.PaymentIntentOf(id)
}

// since is the events the fake emitted after the first n.
func (s *stripeStack) since(n int) []stripefake.Event { return s.fake.Events()[n:] }

// wantMoney fails unless the order's money summary is want (charged,
// refunded, disputed, lost, net).
func wantMoney(t *testing.T, what string, doc client.Timeline, charged, refunded, disputed, lost, net string) {
	t.Helper()
	want := map[string]string{"charged": charged, "refunded": refunded, "disputed": disputed, "lost": lost, "net": net}
	for k, v := range want {
		if money(doc.Order.Money)[k] != v {
			t.Errorf("%s: order.money.%s = %q, want %q (money %+v)", what, k, money(doc.Order.Money)[k], v, doc.Order.Money)
		}
	}
}

// kinds counts the order's ledger entries by kind.
func kinds(doc client.Timeline) map[string]int {
	n := map[string]int{}
	for _, e := range doc.Ledger {
		n[string(e.Kind)]++
	}
	return n
}

// wantLedger fails unless the order's ledger holds exactly the entries of
// each kind in want (kinds not named: none).
func wantLedger(t *testing.T, what string, doc client.Timeline, want map[string]int) {
	t.Helper()
	got := kinds(doc)
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: ledger has %d %s, want %d (ledger %+v)", what, got[k], k, n, doc.Ledger)
		}
	}
	for k, n := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: ledger has %d %s, want none (ledger %+v)", what, n, k, doc.Ledger)
		}
	}
}

// wantDispute fails unless the order lists exactly one dispute, dp, in status.
func wantDispute(t *testing.T, what string, doc client.Timeline, dp, status, amount string) {
	t.Helper()
	if len(doc.Disputes) != 1 || doc.Disputes[0].Id != dp || string(doc.Disputes[0].Status) != status || doc.Disputes[0].Amount != amount {
		t.Errorf("%s: disputes = %v, want %s %s of %s", what, doc.Disputes, dp, status, amount)
	}
}

// TestStripeBooksDisputes: in Stripe mode payd books a customer's
// disputes from Stripe's signed charge.dispute.* webhooks, confirmed with
// Stripe: a chargeback's money withdrawn once though two events report it,
// no refund while it is open, and its close lost (gone for good) or won
// (given back); an inquiry, which withdraws nothing, is listed but books no
// money, unless the bank escalates it to a chargeback. Webhooks delivered
// twice or in reverse order leave the same books.
func TestStripeBooksDisputes(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), stripeMode()).stripe()
		_, tok := s.register(newEmail())

		t.Run("chargeback lost", func(t *testing.T) {
			id, pi := s.paidStripeOrder(tok, "19.90")
			n := len(s.fake.Events())
			dp := s.fake.OpenDispute(pi, stripefake.DisputeOptions{})
			evs := s.since(n)
			if types := eventTypes(evs); !slices.Equal(types, []string{"charge.dispute.created", "charge.dispute.funds_withdrawn"}) {
				t.Fatalf("the fake emitted %v for a chargeback", types)
			}
			s.deliver(evs...)
			doc := s.books(id)
			wantDispute(t, "open", doc, dp, "open", "19.90")
			wantMoney(t, "open", doc, "19.90", "0.00", "19.90", "0.00", "19.90")
			wantLedger(t, "open", doc, map[string]int{"charge": 1, "dispute_opened": 1})

			refunds := len(s.fake.Refunds())
			if r := s.refund(id, uuid.NewString(), "5.00"); r.Status != http.StatusConflict || r.code(t) != "charge_disputed" {
				t.Fatalf("refund of a disputed charge = %d %s, want 409 charge_disputed", r.Status, r.Body)
			}
			if n := len(s.fake.Refunds()); n != refunds {
				t.Fatalf("Stripe refunds = %d after a refused refund, want %d", n, refunds)
			}

			n = len(s.fake.Events())
			if err := s.fake.CloseDispute(dp, "lost"); err != nil {
				t.Fatal(err)
			}
			s.deliver(s.since(n)...)
			doc = s.books(id)
			wantDispute(t, "lost", doc, dp, "lost", "19.90")
			wantMoney(t, "lost", doc, "19.90", "0.00", "0.00", "19.90", "0.00")
			wantLedger(t, "lost", doc, map[string]int{"charge": 1, "dispute_opened": 1, "dispute_lost": 1})
			if doc.Disputes[0].ClosedAt == nil {
				t.Errorf("the lost dispute has no closed_at: %v", doc.Disputes[0])
			}
		})

		t.Run("chargeback won", func(t *testing.T) {
			id, pi := s.paidStripeOrder(tok, "12.00")
			n := len(s.fake.Events())
			dp := s.fake.OpenDispute(pi, stripefake.DisputeOptions{Reason: "product_not_received"})
			s.deliver(s.since(n)...)
			wantMoney(t, "open", s.books(id), "12.00", "0.00", "12.00", "0.00", "12.00")

			n = len(s.fake.Events())
			if err := s.fake.CloseDispute(dp, "won"); err != nil {
				t.Fatal(err)
			}
			evs := s.since(n)
			if types := eventTypes(evs); !slices.Equal(types, []string{"charge.dispute.closed", "charge.dispute.funds_reinstated"}) {
				t.Fatalf("the fake emitted %v for a won dispute", types)
			}
			s.deliver(evs...)
			doc := s.books(id)
			wantDispute(t, "won", doc, dp, "won", "12.00")
			if doc.Disputes[0].Reason != "product_not_received" {
				t.Errorf("dispute reason = %v, want product_not_received", doc.Disputes[0].Reason)
			}
			wantMoney(t, "won", doc, "12.00", "0.00", "0.00", "0.00", "12.00")
			wantLedger(t, "won", doc, map[string]int{"charge": 1, "dispute_opened": 1, "dispute_won": 1})

			// Decided for the merchant, the charge is refundable again.
			if r := s.refund(id, uuid.NewString(), "2.00"); r.Status != http.StatusOK {
				t.Fatalf("refund after the dispute was won = %d %s, want 200", r.Status, r.Body)
			}
			wantMoney(t, "won, then refunded", s.books(id), "12.00", "2.00", "0.00", "0.00", "10.00")
		})

		t.Run("inquiry closed books no money", func(t *testing.T) {
			id, pi := s.paidStripeOrder(tok, "19.90")
			n := len(s.fake.Events())
			dp := s.fake.OpenDispute(pi, stripefake.DisputeOptions{Inquiry: true, Reason: "general"})
			if err := s.fake.UpdateDispute(dp, "warning_under_review"); err != nil {
				t.Fatal(err)
			}
			s.deliver(s.since(n)...)
			doc := s.books(id)
			wantDispute(t, "inquiry open", doc, dp, "open", "19.90")
			wantMoney(t, "inquiry open", doc, "19.90", "0.00", "0.00", "0.00", "19.90")
			wantLedger(t, "inquiry open", doc, map[string]int{"charge": 1})

			n = len(s.fake.Events())
			if err := s.fake.CloseDispute(dp, "warning_closed"); err != nil {
				t.Fatal(err)
			}
			s.deliver(s.since(n)...)
			doc = s.books(id)
			// Stripe's warning_closed reads as won: the merchant kept the money.
			wantDispute(t, "inquiry closed", doc, dp, "won", "19.90")
			wantMoney(t, "inquiry closed", doc, "19.90", "0.00", "0.00", "0.00", "19.90")
			wantLedger(t, "inquiry closed", doc, map[string]int{"charge": 1})
		})

		t.Run("a refund during an inquiry is allowed", func(t *testing.T) {
			// The bank only asks questions and withdrew nothing: refunding
			// the customer is the merchant's usual answer, not a second payout.
			id, pi := s.paidStripeOrder(tok, "19.90")
			n := len(s.fake.Events())
			dp := s.fake.OpenDispute(pi, stripefake.DisputeOptions{Inquiry: true, Reason: "general"})
			s.deliver(s.since(n)...)
			wantDispute(t, "inquiry open", s.books(id), dp, "open", "19.90")
			if r := s.refund(id, uuid.NewString(), "5.00"); r.Status != http.StatusOK {
				t.Fatalf("refund during an inquiry = %d %s, want 200", r.Status, r.Body)
			}
			wantMoney(t, "refunded during the inquiry", s.books(id), "19.90", "5.00", "0.00", "0.00", "14.90")
		})

		t.Run("inquiry escalated to a chargeback books its withdrawal", func(t *testing.T) {
			id, pi := s.paidStripeOrder(tok, "19.90")
			n := len(s.fake.Events())
			dp := s.fake.OpenDispute(pi, stripefake.DisputeOptions{Inquiry: true, Amount: 990})
			s.deliver(s.since(n)...)
			wantLedger(t, "inquiry", s.books(id), map[string]int{"charge": 1})

			n = len(s.fake.Events())
			if err := s.fake.UpdateDispute(dp, "needs_response"); err != nil {
				t.Fatal(err)
			}
			evs := s.since(n)
			s.deliver(evs...)
			s.deliver(evs...)
			doc := s.books(id)
			wantDispute(t, "escalated", doc, dp, "open", "9.90")
			wantMoney(t, "escalated", doc, "19.90", "0.00", "9.90", "0.00", "19.90")
			wantLedger(t, "escalated", doc, map[string]int{"charge": 1, "dispute_opened": 1})

			n = len(s.fake.Events())
			if err := s.fake.CloseDispute(dp, "lost"); err != nil {
				t.Fatal(err)
			}
			s.deliver(s.since(n)...)
			doc = s.books(id)
			wantMoney(t, "escalated, lost", doc, "19.90", "0.00", "0.00", "9.90", "10.00")
			wantLedger(t, "escalated, lost", doc, map[string]int{"charge": 1, "dispute_opened": 1, "dispute_lost": 1})
		})

		t.Run("webhooks twice and reversed", func(t *testing.T) {
			// Lost: every event arrives after the dispute closed, the
			// close first, then all of them again.
			lost, pi := s.paidStripeOrder(tok, "19.90")
			n := len(s.fake.Events())
			dp := s.fake.OpenDispute(pi, stripefake.DisputeOptions{})
			if err := s.fake.CloseDispute(dp, "lost"); err != nil {
				t.Fatal(err)
			}
			evs := s.since(n)
			rev := slices.Clone(evs)
			slices.Reverse(rev)
			s.deliver(rev...)
			s.deliver(evs...)
			s.deliver(rev...)
			doc := s.books(lost)
			wantDispute(t, "lost, reversed", doc, dp, "lost", "19.90")
			wantMoney(t, "lost, reversed", doc, "19.90", "0.00", "0.00", "19.90", "0.00")
			wantLedger(t, "lost, reversed", doc, map[string]int{"charge": 1, "dispute_opened": 1, "dispute_lost": 1})

			// Won, delivered in order, then again reversed: booked once.
			won, pi := s.paidStripeOrder(tok, "19.90")
			n = len(s.fake.Events())
			dp = s.fake.OpenDispute(pi, stripefake.DisputeOptions{})
			s.deliver(s.since(n)...)
			if err := s.fake.CloseDispute(dp, "won"); err != nil {
				t.Fatal(err)
			}
			evs = s.since(n)
			rev = slices.Clone(evs)
			slices.Reverse(rev)
			s.deliver(evs...)
			s.deliver(rev...)
			doc = s.books(won)
			wantDispute(t, "won, twice", doc, dp, "won", "19.90")
			wantMoney(t, "won, twice", doc, "19.90", "0.00", "0.00", "0.00", "19.90")
			wantLedger(t, "won, twice", doc, map[string]int{"charge": 1, "dispute_opened": 1, "dispute_won": 1})

			// Won, every event arriving only after the money came back,
			// reinstatement first: Stripe's charge shows nothing disputed,
			// so payd books neither the withdrawal nor its return; the
			// money adds up as in order.
			late, pi := s.paidStripeOrder(tok, "19.90")
			n = len(s.fake.Events())
			dp = s.fake.OpenDispute(pi, stripefake.DisputeOptions{})
			if err := s.fake.CloseDispute(dp, "won"); err != nil {
				t.Fatal(err)
			}
			evs = s.since(n)
			rev = slices.Clone(evs)
			slices.Reverse(rev)
			s.deliver(rev...)
			s.deliver(evs...)
			doc = s.books(late)
			wantDispute(t, "won, late and reversed", doc, dp, "won", "19.90")
			wantMoney(t, "won, late and reversed", doc, "19.90", "0.00", "0.00", "0.00", "19.90")
			if k := kinds(doc); k["dispute_opened"] != k["dispute_won"] || k["dispute_opened"] > 1 || k["dispute_lost"] != 0 {
				t.Errorf("won, late and reversed: ledger %+v, want at most one dispute_opened, matched by a dispute_won", doc.Ledger)
			}
		})
	})
}

// TestStripeBooksOutsideRefund: a refund made in Stripe's Dashboard,
// outside payd, is recorded from its refund.created and charge.refunded
// webhooks (confirmed with Stripe's charge) as an outside refund, booked
// once however often and in whatever order the events arrive; the order's
// refunded_amount counts it, and one that refunds the rest moves the order
// to refunded. A reconciliation run against Stripe's lists afterwards finds
// nothing new.
func TestStripeBooksOutsideRefund(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), stripeMode()).stripe()
		st := &stack{inproc: s.inproc, db: s.db, dialect: s.dialect, dbURL: s.dbURL}
		w := newRefundWindow()
		_, tok := s.register(newEmail())
		id, pi := s.paidStripeOrder(tok, "19.90")

		n := len(s.fake.Events())
		part, err := s.fake.RefundOutside(pi, 500)
		if err != nil {
			t.Fatal(err)
		}
		evs := s.since(n)
		if types := eventTypes(evs); !slices.Equal(types, []string{"refund.created", "charge.refunded"}) {
			t.Fatalf("the fake emitted %v for an outside refund", types)
		}
		s.deliver(evs...)
		s.deliver(evs...)
		doc := s.books(id)
		wantMoney(t, "part", doc, "19.90", "5.00", "0.00", "0.00", "14.90")
		wantLedger(t, "part", doc, map[string]int{"charge": 1, "outside_refund": 1})
		if doc.Order.RefundedAmount != "5.00" {
			t.Errorf("part: refunded_amount = %s, want 5.00", doc.Order.RefundedAmount)
		}
		if o := s.timeline(id).Order; o.Status != "paid" {
			t.Errorf("part: order %s, want paid", o.Status)
		}
		if n := st.outsideEntries(part); n != 1 {
			t.Errorf("outside refund entries of %s = %d, want 1", part, n)
		}

		// The rest, its events reversed and delivered twice.
		n = len(s.fake.Events())
		rest, err := s.fake.RefundOutside(pi, 1490)
		if err != nil {
			t.Fatal(err)
		}
		evs = s.since(n)
		rev := slices.Clone(evs)
		slices.Reverse(rev)
		s.deliver(rev...)
		s.deliver(evs...)
		doc = s.books(id)
		wantMoney(t, "full", doc, "19.90", "19.90", "0.00", "0.00", "0.00")
		wantLedger(t, "full", doc, map[string]int{"charge": 1, "outside_refund": 2})
		tl := s.timeline(id)
		if tl.Order.Status != "refunded" || tl.Order.RefundedAmount != "19.90" {
			t.Errorf("full: order %s, %s refunded; want refunded, 19.90", tl.Order.Status, tl.Order.RefundedAmount)
		}
		if n := st.outsideEntries(rest); n != 1 {
			t.Errorf("outside refund entries of %s = %d, want 1", rest, n)
		}
		if n := st.count("audit_log WHERE action = 'outside_refund' AND order_id = ? AND actor = 'provider'", id); n != 2 {
			t.Errorf("audit rows of the outside refunds = %d, want 2", n)
		}
		if len(tl.Discrepancies) != 0 {
			t.Errorf("discrepancies = %+v, want none", tl.Discrepancies)
		}

		// Stripe's lists agree with payd's books: nothing new.
		_, run := st.reconcileRefunds(w, false, "")
		if run.Source != "provider" || run.New != 0 {
			t.Errorf("reconcile from Stripe = source %s, %d new %+v; want provider, nothing new", run.Source, run.New, run.Discrepancies)
		}
		st.checkFound(run.Discrepancies, nil)
		doc = s.books(id)
		wantMoney(t, "after the run", doc, "19.90", "19.90", "0.00", "0.00", "0.00")
		wantLedger(t, "after the run", doc, map[string]int{"charge": 1, "outside_refund": 2})
	})
}

func eventTypes(evs []stripefake.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}
