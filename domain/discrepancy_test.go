package domain

import (
	"errors"
	"slices"
	"testing"
)

// TestDiscrepancyActions: the actions that may resolve a discrepancy, per
// type and status, as the resolver refuses the others and as a refusal
// names them. Written out by hand: a change to the table must be a change
// to this test too.
func TestDiscrepancyActions(t *testing.T) {
	open := map[DiscrepancyType][]string{ // naming an attempt and a charge
		MissingLocalPayment:     {ActionApply, ActionRefund, ActionIgnore},
		MissingProviderCharge:   {ActionIgnore},
		AmountMismatch:          {ActionApply, ActionRefund, ActionIgnore},
		DuplicateCharge:         {ActionRefund, ActionIgnore},
		StuckProcessing:         {ActionApply, ActionIgnore},
		PaidAfterClose:          {ActionRefund, ActionIgnore},
		Disputed:                {ActionIgnore},
		RefundMissingLocally:    {ActionIgnore},
		RefundMissingAtProvider: {ActionIgnore},
		RefundAmountMismatch:    {ActionIgnore},
		UnconfirmedPayment:      {ActionRefund, ActionIgnore},
		RefundReversed:          {ActionIgnore},
		OrderBooksRepaired:      {ActionIgnore},
		DisputeExceedsRemaining: {ActionIgnore},
	}
	noAttempt := map[DiscrepancyType][]string{ // a charge no attempt of payd's names
		MissingLocalPayment: {ActionRefund, ActionIgnore},
		AmountMismatch:      {ActionRefund, ActionIgnore},
		StuckProcessing:     {ActionIgnore},
	}
	noCharge := map[DiscrepancyType][]string{ // nothing at the provider to give back
		MissingLocalPayment: {ActionApply, ActionIgnore},
		AmountMismatch:      {ActionApply, ActionIgnore},
		DuplicateCharge:     {ActionIgnore},
		PaidAfterClose:      {ActionIgnore},
		UnconfirmedPayment:  {ActionIgnore},
	}
	if len(open) != len(DiscrepancyTypes) {
		t.Fatalf("the test names %d types, domain has %d", len(open), len(DiscrepancyTypes))
	}
	for _, typ := range DiscrepancyTypes {
		for _, st := range DiscrepancyStatuses {
			for _, shape := range []string{"attempt and charge", "no attempt", "no charge"} {
				d := Discrepancy{Type: typ, Status: st, AttemptID: "a1", ChargeID: "ch_1"}
				want := open[typ]
				switch shape {
				case "no attempt":
					d.AttemptID = ""
					if w, ok := noAttempt[typ]; ok {
						want = w
					}
				case "no charge":
					d.ChargeID = ""
					if w, ok := noCharge[typ]; ok {
						want = w
					}
				}
				if st != DiscrepancyOpen {
					want = []string{}
				}
				got := d.Actions()
				if got == nil || !slices.Equal(got, want) {
					t.Errorf("%s %s (%s): Actions() = %#v, want %#v", st, typ, shape, got, want)
				}
				for _, a := range ResolutionActions {
					// Fits ignores the status: a repeat of the action a
					// discrepancy is being resolved with still fits it.
					d.Status = DiscrepancyOpen
					if fits := slices.Contains(d.Actions(), a); d.Fits(a) != fits {
						t.Errorf("%s (%s): Fits(%s) = %v, Actions() lists it: %v", typ, shape, a, d.Fits(a), fits)
					}
					d.Status = st
				}
			}
		}
	}
	if (Discrepancy{Type: MissingLocalPayment, Status: DiscrepancyOpen, AttemptID: "a", ChargeID: "c"}).Fits("delete") {
		t.Error(`Fits("delete") = true, want false`)
	}
}

// TestUnfit: a refusal names the actions that may still resolve the
// discrepancy, never the one just refused, and is still the refusal it
// wraps for errors.Is.
func TestUnfit(t *testing.T) {
	d := Discrepancy{Type: DuplicateCharge, Status: DiscrepancyOpen, ChargeID: "ch_1"}
	e := Unfit(d, ActionRefund, ErrResolutionNotApplicable)
	if !errors.Is(e, ErrResolutionNotApplicable) || !slices.Equal(e.Actions, []string{ActionIgnore}) {
		t.Errorf("Unfit(refused refund) = %v %#v, want ErrResolutionNotApplicable naming ignore", e, e.Actions)
	}
	if e := Unfit(d, ActionApply, ErrResolutionNotApplicable); !slices.Equal(e.Actions, []string{ActionRefund, ActionIgnore}) {
		t.Errorf("Unfit(apply) names %#v, want refund and ignore", e.Actions)
	}
	d.Status = DiscrepancyResolved
	if e := Unfit(d, ActionIgnore, ErrAlreadyResolved); !errors.Is(e, ErrAlreadyResolved) || e.Actions == nil || len(e.Actions) != 0 {
		t.Errorf("Unfit(resolved) = %v %#v, want ErrAlreadyResolved naming none (an empty list)", e, e.Actions)
	}
}
