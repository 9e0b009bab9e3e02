package service_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// overRemaining lists the order's discrepancies that say a dispute is for
// more than is left of its charge.
func overRemaining(t *testing.T, w *world, orderID string) []domain.Discrepancy {
	t.Helper()
	var out []domain.Discrepancy
	for _, d := range w.discrepanciesOf(t, orderID) {
		if d.Type == domain.DisputeExceedsRemaining && strings.HasPrefix(d.Reference, "exceeds_remaining:") {
			out = append(out, d)
		}
	}
	return out
}

// TestDisputeOverRemainingFlagged: a dispute that opens for the whole
// charge after payd refunded it in full is booked, and flagged for an
// operator, once, with what payd's books hold left; a dispute within what
// is left is not flagged.
func TestDisputeOverRemainingFlagged(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		open := func(t *testing.T, id, chargeID, amount string, cur domain.Currency) {
			t.Helper()
			w.dispute(chargeID, amount)
			pd := domain.ProviderDispute{ID: id, ChargeID: chargeID, Amount: money(amount), Currency: string(cur), Status: domain.DisputeOpen,
				Reason: "fraudulent", CreatedAt: w.clock.Now().Add(-time.Minute)}
			if _, err := w.disputes.Sync(ctx, pd, domain.SourceWebhook); err != nil {
				t.Fatalf("Sync(dispute %s) = %v", id, err)
			}
		}

		full := w.paidOrder(t, cust, "10.00")
		ch := w.charges(t, full.ID)[0]
		if _, _, err := w.refunds.Refund(ctx, service.RefundRequest{OrderID: full.ID, RequestID: newKey(), Fingerprint: "fp-full"}); err != nil {
			t.Fatalf("Refund(all) = %v", err)
		}
		dp := "dp_full_" + full.ID[:8]
		open(t, dp, ch.ID, "10.00", full.Currency)
		open(t, dp, ch.ID, "10.00", full.Currency) // reported again
		got := overRemaining(t, w, full.ID)
		if len(got) != 1 || got[0].Reference != "exceeds_remaining:"+dp || got[0].ChargeID != ch.ID || got[0].Status != domain.DiscrepancyOpen ||
			!got[0].ProviderAmount.Equal(money("10.00")) || !got[0].LocalAmount.IsZero() || !strings.Contains(got[0].Note, "refunded 10.00") {
			t.Errorf("discrepancies over what is left = %+v, want one for %s: 10.00 disputed, 0.00 left", got, dp)
		}

		part := w.paidOrder(t, cust, "10.00")
		pch := w.charges(t, part.ID)[0]
		if _, _, err := w.refunds.Refund(ctx, service.RefundRequest{OrderID: part.ID, RequestID: newKey(), Fingerprint: "fp-part", Amount: "4.00"}); err != nil {
			t.Fatalf("Refund(4.00) = %v", err)
		}
		open(t, "dp_part_"+part.ID[:8], pch.ID, "6.00", part.Currency)
		if got := overRemaining(t, w, part.ID); len(got) != 0 {
			t.Errorf("a 6.00 dispute of 10.00 less 4.00 refunded flagged: %+v, want none", got)
		}
	})
}
