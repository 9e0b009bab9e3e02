package e2e

import (
	"fmt"
	"github.com/payd/payd/client"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
)

// A refund resolution moves money, so it rests on the provider's word, not
// on the file's or the event's that raised the discrepancy.

// forgedSettlement uploads a settlement file of one charge line and
// returns the run's ID.
func (s *stack) forgedSettlement(chargeID, key, orderID, amount string) string {
	s.t.Helper()
	now := time.Now().UTC()
	csv := "charge_id,idempotency_key,order_id,type,status,amount,currency,created_at\n" +
		fmt.Sprintf("%s,%s,%s,charge,succeeded,%s,USD,%s\n", chargeID, key, orderID, amount, now.Add(-time.Minute).Format(time.RFC3339))
	r := s.uploadSettlement(uuid.NewString(), now.Add(-time.Hour), now.Add(time.Minute), false, csv)
	if r.Status != http.StatusCreated {
		s.t.Fatalf("upload = %d %s, want 201", r.Status, r.Body)
	}
	return r.json(s.t)["id"].(string)
}

// openOf is the one open discrepancy of type typ about orderID.
func (s *stack) openOf(orderID string, typ domain.DiscrepancyType) domain.Discrepancy {
	s.t.Helper()
	var found []domain.Discrepancy
	for _, d := range s.discrepancies(orderID) {
		if d.Type == typ && d.Status == domain.DiscrepancyOpen {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		s.t.Fatalf("open %s discrepancies about %s = %+v, want one", typ, orderID, found)
	}
	return found[0]
}

// notRefunded checks that a paid order and its charge are as the pay left
// them: paid, nothing refunded at payd or at the provider, no refund row.
func (s *stack) notRefunded(orderID, chargeID string) {
	s.t.Helper()
	if o := s.orderRow(orderID); o.Status != domain.StatusPaid || !o.RefundedAmount.IsZero() {
		s.t.Errorf("order %s = %s refunded %s, want paid with nothing refunded", orderID, o.Status, o.RefundedAmount)
	}
	if got := s.providerRefunded(chargeID); got != "0.00" {
		s.t.Errorf("provider refunded %s of charge %s, want nothing", got, chargeID)
	}
	if n := s.count("refunds"); n != 0 {
		s.t.Errorf("refunds = %d, want 0", n)
	}
}

// refusedAsOthers checks a resolve answer is 409
// charge_belongs_to_other_order naming owner, that the discrepancy is open
// again and that the refusal is on the audit trail with its code.
func (s *stack) refusedAsOthers(r reply, key, did, owner string) {
	s.t.Helper()
	if r.Status != http.StatusConflict || r.code(s.t) != "charge_belongs_to_other_order" {
		s.t.Fatalf("resolve refund = %d %s, want 409 charge_belongs_to_other_order", r.Status, r.Body)
	}
	if detail, _ := r.json(s.t)["detail"].(string); !strings.Contains(detail, owner) {
		s.t.Errorf("detail %q, want it to name order %s", detail, owner)
	}
	if n := s.count("discrepancies WHERE id = ? AND status = 'open' AND resolution IS NULL", did); n != 1 {
		s.t.Errorf("discrepancy %s not open after the refusal", did)
	}
	if n := s.count("audit_log WHERE action = 'resolve_discrepancy' AND request_id = ? AND result = 409 AND detail LIKE ?",
		key, `%charge_belongs_to_other_order%`); n != 1 {
		s.t.Errorf("audit rows of the refusal = %d, want 1", n)
	}
}

// TestResolveRefundOfPaidOrderGoesThroughItsRefund: a settlement file
// names a paid order's real charge under that order for less (5.00 of
// 10.00): an amount_mismatch. Refunding it is legitimate — the charge is
// the order's payment — but through the order's one refund path, for what
// the provider says is left (10.00), so the order ends refunded in payd's
// books as at the provider; a later admin refund finds nothing to refund.
func TestResolveRefundOfPaidOrderGoesThroughItsRefund(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), tuned(silentSandbox))
		_, tok := s.register(newEmail())
		paid := s.paidOrder(tok, "10.00")
		a := s.onlyAttempt(paid)
		run := s.forgedSettlement(a.ProviderChargeID, a.ID, paid, "5.00")
		d := s.openOf(paid, domain.AmountMismatch)

		r := s.admin("POST", resolvePath(run, d.ID), uuid.NewString(), map[string]string{"action": "refund", "note": "the file says 5.00"})
		if got := decode[client.Discrepancy](t, r); r.Status != http.StatusOK || got.Status != "resolved" {
			t.Fatalf("resolve refund = %d %s, want 200 resolved", r.Status, r.Body)
		}
		if o := s.orderRow(paid); o.Status != domain.StatusRefunded || o.RefundedAmount.StringFixed(2) != "10.00" {
			t.Errorf("order = %s refunded %s, want refunded 10.00", o.Status, o.RefundedAmount.StringFixed(2))
		}
		if got := s.providerRefunded(a.ProviderChargeID); got != "10.00" {
			t.Errorf("provider refunded %s, want 10.00 (what was left, not the file's 5.00)", got)
		}
		if n := s.count("refunds WHERE order_id = ? AND kind = 'manual' AND status = 'succeeded' AND amount_minor = 1000", paid); n != 1 || s.count("refunds") != 1 {
			t.Errorf("refunds = %d manual 10.00 of %d, want the one", n, s.count("refunds"))
		}
		if r := s.refund(paid, uuid.NewString(), ""); r.Status != http.StatusConflict || r.code(t) != "order_not_refundable" {
			t.Errorf("admin refund after the resolution = %d %s, want 409 order_not_refundable", r.Status, r.Body)
		}
		// Asked again under another key, the resolution is done: nothing moves twice.
		if r := s.admin("POST", resolvePath(run, d.ID), uuid.NewString(), map[string]string{"action": "refund"}); r.Status != http.StatusOK {
			t.Errorf("resolve refund again = %d %s, want 200", r.Status, r.Body)
		}
		if got := s.providerRefunded(a.ProviderChargeID); got != "10.00" || s.count("refunds") != 1 {
			t.Errorf("after a repeat: provider refunded %s, %d refunds; want 10.00 and one", got, s.count("refunds"))
		}
	})
}

// TestResolveRefundRefusesChargeOfAnotherOrder: the same real charge
// listed under a made-up order and key is a missing_local_payment; the
// provider says the charge pays the real order, so refunding it is refused
// with 409 charge_belongs_to_other_order naming that order. Nothing moves,
// the discrepancy stays open, the refusal is audited, and the order's own
// refund still works afterwards.
func TestResolveRefundRefusesChargeOfAnotherOrder(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), tuned(silentSandbox))
		_, tok := s.register(newEmail())
		paid := s.paidOrder(tok, "10.00")
		a := s.onlyAttempt(paid)
		madeUp := uuid.NewString()
		run := s.forgedSettlement(a.ProviderChargeID, uuid.NewString(), madeUp, "10.00")
		d := s.openOf(madeUp, domain.MissingLocalPayment)

		key := uuid.NewString()
		r := s.admin("POST", resolvePath(run, d.ID), key, map[string]string{"action": "refund", "note": "nobody's charge"})
		s.refusedAsOthers(r, key, d.ID, paid)
		s.notRefunded(paid, a.ProviderChargeID)
		if r := s.refund(paid, uuid.NewString(), ""); r.Status != http.StatusOK {
			t.Errorf("admin refund of the real order after the refusal = %d %s, want 200", r.Status, r.Body)
		}
		if o := s.orderRow(paid); o.Status != domain.StatusRefunded || s.providerRefunded(a.ProviderChargeID) != "10.00" {
			t.Errorf("order = %s, provider refunded %s; want refunded 10.00", o.Status, s.providerRefunded(a.ProviderChargeID))
		}
	})
}

// TestResolveRefundRefusesEventNamingAnotherOrdersCharge: a signed
// payment.succeeded under a key payd never used names order B and order
// A's real charge: an unconfirmed_payment about B. Refunding it would
// refund A behind its back: the provider holds no charge under the
// event's key, so the discrepancy names no charge and offers no refund,
// and asking for one is 409 resolution_not_applicable naming ignore.
func TestResolveRefundRefusesEventNamingAnotherOrdersCharge(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), tuned(silentSandbox))
		_, tok := s.register(newEmail())
		paid := s.paidOrder(tok, "10.00")
		a := s.onlyAttempt(paid)
		other := s.order(tok, "10.00")
		ev := payment{AttemptID: uuid.NewString(), ChargeID: a.ProviderChargeID, OrderID: other, Amount: "10.00", Currency: "USD"}
		if r := s.sendEvent("evt_"+uuid.NewString(), "payment.succeeded", ev); r.Status != http.StatusOK && r.Status != http.StatusNoContent {
			t.Fatalf("webhook = %d %s, want 2xx", r.Status, r.Body)
		}
		// The provider has no charge under the event's key: the success is
		// not applied (ADR 0031), and its discrepancy quotes the charge the
		// event claimed in its note only.
		d := s.openOf(other, domain.UnconfirmedPayment)
		if d.ChargeID != "" || !strings.Contains(d.Note, a.ProviderChargeID) {
			t.Errorf("discrepancy names charge %q, note %q; want no charge, the claimed one in the note", d.ChargeID, d.Note)
		}

		key := uuid.NewString()
		r := s.admin("POST", "/v1/admin/discrepancies/"+d.ID+"/resolve", key, map[string]string{"action": "refund", "note": "the event says so"})
		if r.Status != http.StatusConflict || r.code(t) != "resolution_not_applicable" || !slices.Equal(r.actionsOf(t), []string{"ignore"}) {
			t.Fatalf("resolve refund = %d %s, want 409 resolution_not_applicable naming ignore", r.Status, r.Body)
		}
		s.notRefunded(paid, a.ProviderChargeID)
		if o := s.orderRow(other); o.Status != domain.StatusPending {
			t.Errorf("order B = %s, want pending", o.Status)
		}
	})
}
