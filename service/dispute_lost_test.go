package service_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// lose has payd learn that the provider's dispute id of charge chargeID
// (of amount in the world's currency, EUR) was lost, and the provider
// report the money disputed.
func (w *world) lose(t *testing.T, id, chargeID, amount string) {
	t.Helper()
	w.dispute(chargeID, amount)
	pd := domain.ProviderDispute{ID: id, ChargeID: chargeID, Amount: money(amount), Currency: "EUR", Status: domain.DisputeLost,
		CreatedAt: w.clock.Now().Add(-time.Minute), ClosedAt: w.clock.Now()}
	if _, err := w.disputes.Sync(context.Background(), pd, domain.SourceReconciliation); err != nil {
		t.Fatalf("Sync(lost dispute %s) = %v", id, err)
	}
}

// TestRefundAfterLostDisputeSaysLost: a refund of an order whose charge's
// dispute was lost is refused as disputed (charge_disputed), worded as a
// lost dispute, not an open one: the money is gone, there is nothing to
// answer at the provider. While a dispute is open the wording stays.
//
// The refusal comes from askCharge in Refunds.refund; it is worded by
// Refunds.disputeRefusal once refund passes its error through it.
func TestRefundAfterLostDisputeSaysLost(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.paidOrder(t, cust, "10.00")
		ch := w.charges(t, o.ID)[0]

		w.dispute(ch.ID, "10.00") // open at the provider, unknown to payd
		_, _, err := w.refunds.Refund(ctx, service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Fingerprint: "fp-1"})
		if !errors.Is(err, domain.ErrChargeDisputed) || errors.Is(err, domain.ErrChargeDisputeLost) {
			t.Fatalf("Refund under a dispute payd does not know lost = %v, want ErrChargeDisputed, not lost", err)
		}

		w.lose(t, "dp_lost_"+o.ID[:8], ch.ID, "10.00")
		_, _, err = w.refunds.Refund(ctx, service.RefundRequest{OrderID: o.ID, RequestID: newKey(), Fingerprint: "fp-2"})
		if !errors.Is(err, domain.ErrChargeDisputeLost) || !errors.Is(err, domain.ErrChargeDisputed) {
			t.Fatalf("Refund after a lost dispute = %v, want ErrChargeDisputeLost (an ErrChargeDisputed)", err)
		}
		if got := w.get(t, cust, o.ID); !got.RefundedAmount.IsZero() {
			t.Errorf("order refunded %s, want nothing reserved", got.RefundedAmount)
		}
	})
}

// TestResolveRefundAfterLostDisputeSaysLost: refunding a charge payd never
// asked for whose dispute was lost is refused as a lost dispute, and the
// discrepancy stays open.
func TestResolveRefundAfterLostDisputeSaysLost(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		_, o, d := w.foreignCharge(t, "9.00")
		w.lose(t, "dp_lost_"+o.ID[:8], d.ChargeID, "9.00")

		_, err := w.resolver.Resolve(ctx, d.ID, service.ResolveRefund, "ops")
		if !errors.Is(err, domain.ErrChargeDisputeLost) {
			t.Fatalf("Resolve(refund) after a lost dispute = %v, want ErrChargeDisputeLost", err)
		}
		got, err := w.admin.Discrepancy(ctx, d.ID)
		if err != nil || got.Status != domain.DiscrepancyOpen {
			t.Errorf("discrepancy = %s, %v after the refusal, want open", got.Status, err)
		}
	})
}

// TestDisputeFollowsEvidenceDate: a dispute opens with the provider's
// evidence date, or none when it names none; a later report that names or
// moves the date moves payd's record with it, and a report without one
// leaves the date payd has.
func TestDisputeFollowsEvidenceDate(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		cust := w.customer(t)
		o := w.paidOrder(t, cust, "10.00")
		ch := w.charges(t, o.ID)[0]
		w.dispute(ch.ID, "10.00")
		pd := domain.ProviderDispute{ID: "dp_due_" + o.ID[:8], ChargeID: ch.ID, Amount: money("10.00"), Currency: "EUR",
			Status: domain.DisputeOpen, Reason: "fraudulent", CreatedAt: w.clock.Now().Add(-time.Minute)}
		dueOf := func() *time.Time {
			t.Helper()
			_, _, _, disputes := w.books(t, o.ID)
			if len(disputes) != 1 {
				t.Fatalf("disputes = %+v, want one", disputes)
			}
			return disputes[0].EvidenceDueBy
		}
		week := w.clock.Now().Add(7 * 24 * time.Hour).Truncate(time.Second)
		later := week.Add(48 * time.Hour)
		steps := []struct {
			name string
			due  time.Time // zero: the report names no date
			want time.Time // zero: none stored
		}{
			{"opened without a date", time.Time{}, time.Time{}},
			{"the date named", week, week},
			{"reported again without one", time.Time{}, week},
			{"the date moved", later, later},
		}
		for _, st := range steps {
			pd.EvidenceDueBy = st.due
			if _, err := w.disputes.Sync(ctx, pd, domain.SourceReconciliation); err != nil {
				t.Fatalf("%s: Sync = %v", st.name, err)
			}
			got := dueOf()
			if st.want.IsZero() != (got == nil) || (got != nil && !got.Equal(st.want.UTC())) {
				t.Errorf("%s: evidence due %v, want %v", st.name, got, st.want)
			}
		}
	})
}
