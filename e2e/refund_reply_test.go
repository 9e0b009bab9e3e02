package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
)

// refundMismatch checks that refund id was not settled by a report of other
// money and that an open amount_mismatch names it for an operator.
func (s *stack) refundMismatch(orderID, refundID string) {
	s.t.Helper()
	if n := s.count("refunds WHERE id = ? AND status = 'succeeded'", refundID); n != 0 {
		s.t.Errorf("refund %s succeeded on a report of other money", refundID)
	}
	var found int
	for _, d := range s.discrepancies(orderID) {
		if d.Type == domain.AmountMismatch && d.Status == domain.DiscrepancyOpen {
			found++
		}
	}
	if found != 1 {
		s.t.Errorf("open amount_mismatch discrepancies = %d, want 1: %+v", found, s.discrepancies(orderID))
	}
}

// TestRefundReplyAmountMismatch: the provider's reply to a refund reports
// another amount than payd asked for. The refund is not settled as
// succeeded and an amount_mismatch is recorded for an operator.
func TestRefundReplyAmountMismatch(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		h := s.hostile
		_, token := s.register("refund-reply@example.com")
		id := s.paidOrder(token, "10.00")
		h.setRefundAmount("9.00")
		r := s.refund(id, uuid.NewString(), "3.00")
		if r.Status == http.StatusOK {
			t.Errorf("refund with a reply of 9.00 for 3.00 = 200 %s, want an error", r.Body)
		}
		var refundID string
		if err := s.db.Gorm().Raw("SELECT id FROM refunds WHERE order_id = ?", id).Scan(&refundID).Error; err != nil || refundID == "" {
			t.Fatalf("refund row: %q %v", refundID, err)
		}
		s.refundMismatch(id, refundID)
	})
}

// TestRefundEventAmountMismatch: a refund.succeeded event reports another
// amount than the refund payd recorded: it is not applied, and an
// amount_mismatch is recorded for an operator.
func TestRefundEventAmountMismatch(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), tuned(silentSandbox))
		_, id, refund := s.lostRefundReply("refund-event@example.com")
		evID := "evt_" + uuid.NewString()
		body, err := json.Marshal(map[string]any{
			"id": evID, "type": "refund.succeeded", "created_at": time.Now().UTC().Format(time.RFC3339Nano),
			"data": map[string]string{"charge_id": refund.ProviderChargeId, "refund_id": "re_" + uuid.NewString(), "idempotency_key": refund.Id,
				"order_id": id, "amount": "30.00", "currency": "USD", "status": "succeeded"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.postWebhook(body, signedWebhook(t, evID, time.Now(), body)); got.Status != http.StatusOK {
			t.Errorf("delivery = %d %s, want 200", got.Status, got.Body)
		}
		s.refundMismatch(id, refund.Id)
	})
}
