package e2e

import (
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/payd/payd/client"
	"github.com/payd/payd/domain"
)

// lastEvent is the order's newest outbox event as the admin timeline
// shows it, failing unless it is of type typ and the order has n events.
func (s *stack) lastEvent(orderID string, n int, typ string) client.OutboxEvent {
	s.t.Helper()
	evs := s.timeline(orderID).Events
	if len(evs) != n || string(evs[n-1].Type) != typ {
		s.t.Fatalf("events of order %s = %+v, want %d, the last %s", orderID, evs, n, typ)
	}
	return evs[n-1]
}

// TestEventCauseOfOperatorAndRun: what the shop is told caused a change
// (ADR 0053), in the order's outbox events: a refund through the admin
// API and a discrepancy's resolution are the operator's doing, under the
// name of the operator whose token made the request; an outside refund a
// reconciliation run records is the run's, although an operator's request
// started the run.
func TestEventCauseOfOperatorAndRun(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		const alice = "adm_alice_0123456789abcdef0123456789"
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m", "PAYD_ADMIN_TOKENS": "alice:" + alice}), tuned(silentSandbox))
		_, tok := s.register(newEmail())

		// A refund through the admin API, by alice.
		refunded := s.paidOrder(tok, "6.00")
		if paid := s.lastEvent(refunded, 1, "order.paid"); paid.Cause.Kind != "pay_request" {
			t.Errorf("order.paid cause = %+v, want pay_request", paid.Cause)
		}
		amount := "2.00"
		key := uuid.NewString()
		if r := s.as(alice)(client.NewRefundOrderRequest(s.server(), refunded, &client.RefundOrderParams{IdempotencyKey: &key},
			client.RefundRequest{Reason: "customer asked", Amount: &amount})); r.Status != http.StatusOK && r.Status != http.StatusCreated {
			t.Fatalf("admin refund = %d %s, want success", r.Status, r.Body)
		}
		if ev := s.lastEvent(refunded, 2, "order.refunded"); ev.Cause.Kind != "operator" || ev.Cause.Ref != "alice" {
			t.Errorf("order.refunded of an admin refund: cause %+v, want operator alice", ev.Cause)
		}

		// A discrepancy resolved by alice: the settlement file says 5.00 of
		// a 10.00 charge; the refund resolution refunds what is left.
		mismatched := s.paidOrder(tok, "10.00")
		a := s.onlyAttempt(mismatched)
		run := s.forgedSettlement(a.ProviderChargeID, a.ID, mismatched, "5.00")
		d := s.openOf(mismatched, domain.AmountMismatch)
		if r := s.do(request{method: "POST", path: resolvePath(run, d.ID), token: alice, key: uuid.NewString(),
			body: map[string]string{"action": "refund", "note": "the file says 5.00"}}); r.Status != http.StatusOK {
			t.Fatalf("resolve refund = %d %s, want 200", r.Status, r.Body)
		}
		if ev := s.lastEvent(mismatched, 2, "order.refunded"); ev.Cause.Kind != "operator" || ev.Cause.Ref != "alice" {
			t.Errorf("order.refunded of a resolution: cause %+v, want operator alice", ev.Cause)
		}

		// An outside refund, found and recorded by a run an operator started.
		outside := s.paidOrder(tok, "4.00")
		w := newRefundWindow()
		s.refundDirectly(s.sandboxCharge(outside, "succeeded"), "4.00")
		_, r := s.reconcileRefunds(w, false, "")
		if ev := s.lastEvent(outside, 2, "order.refunded"); ev.Cause.Kind != "reconciliation" || ev.Cause.Ref != r.Id {
			t.Errorf("order.refunded recorded by run %s: cause %+v, want reconciliation of that run", r.Id, ev.Cause)
		}
	})
}
