package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
)

// The first reproduction over the wire, told to a real receiver
// (examples/receiver): a 10.00 order; 4.00 refunded at the sandbox's
// dashboard; an operator's refund of 8.00 held on its way to the provider
// while the sandbox's signed refund.succeeded for the 4.00 arrives; the
// 8.00 is refused (502 refund_refused). The order is paid with 4.00
// refunded, as the provider and the ledger say, and the shop heard only
// confirmed money: order.refunded with 4.00, never 8.00 or 12.00. The
// remaining 6.00 refunded makes it refunded, 10.00, and the shop hears it.
func TestOutsideRefundDuringAHeldRefundIsCountedAndTold(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		rcv := startReceiver(t, notifySecret, 0)
		s := start(t, on(dialect), throughHostile(), withEnv(notifyEnv(rcv)))
		_, token := s.register(newEmail())
		order := s.paidOrder(token, "10.00")
		charge := s.timeline(order).Attempts[0].ProviderChargeId
		if charge == nil {
			t.Fatal("the paid order's attempt names no charge")
		}
		outside := s.refundDirectly(*charge, "4.00")
		s.hostile.holdNextRefund(func() {
			for _, d := range s.webhookOf(outside.ID) {
				if r := s.deliver(d); r.Status != http.StatusOK {
					t.Errorf("refund.succeeded of the outside refund = %d %s, want 200", r.Status, r.Body)
				}
			}
		})
		if r := s.refund(order, uuid.NewString(), "8.00"); r.Status != http.StatusBadGateway || r.code(t) != "refund_refused" {
			t.Fatalf("refund 8.00 of the 6.00 left = %d %s, want 502 refund_refused", r.Status, r.Body)
		}
		tl := s.timeline(order)
		if tl.Order.Status != "paid" || tl.Order.RefundedAmount != "4.00" || tl.Order.RefundPendingAmount != "0.00" {
			t.Fatalf("order = %s refunded %s pending %s, want paid, 4.00, 0.00", tl.Order.Status, tl.Order.RefundedAmount, tl.Order.RefundPendingAmount)
		}
		for _, d := range tl.Discrepancies {
			if d.Type == "refund_amount_mismatch" {
				t.Errorf("discrepancy %s: %s; the outside refund was counted", d.Type, d.Note)
			}
		}
		if r := s.refund(order, uuid.NewString(), ""); r.Status != http.StatusOK {
			t.Fatalf("refund of the rest = %d %s, want 200", r.Status, r.Body)
		}
		tl = s.timeline(order)
		if tl.Order.Status != "refunded" || tl.Order.RefundedAmount != "10.00" {
			t.Fatalf("order after the rest = %s refunded %s, want refunded 10.00", tl.Order.Status, tl.Order.RefundedAmount)
		}
		var told []string
		eventually(t, 30*time.Second, "the refunds did not reach the receiver", func() bool {
			told = told[:0]
			rows, err := rcv.db.Query(`SELECT body FROM events WHERE order_id = ? AND type = 'order.refunded' ORDER BY rowid`, order)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var body []byte
				if err := rows.Scan(&body); err != nil {
					t.Fatal(err)
				}
				var ev struct {
					Order struct {
						RefundedAmount string `json:"refunded_amount"`
						Status         string `json:"status"`
					} `json:"order"`
				}
				if err := json.Unmarshal(body, &ev); err != nil {
					t.Fatalf("the receiver's body %s: %v", body, err)
				}
				told = append(told, ev.Order.Status+" "+ev.Order.RefundedAmount)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			return len(told) >= 2
		})
		if len(told) != 2 || told[0] != "paid 4.00" || told[1] != "refunded 10.00" {
			t.Errorf("the shop heard order.refunded %q, want [paid 4.00, refunded 10.00]", told)
		}
	})
}
