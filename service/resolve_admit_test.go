package service_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// errActed stands for everything past the resolver's decision: a stub
// store or provider answering it means the action was admitted.
var errActed = errors.New("acted")

// oneDiscrepancy is a store holding d only; every step past the decision
// answers errActed (a call it does not define panics, which the test
// counts as admitted too: the resolver went on to act).
type oneDiscrepancy struct {
	service.DiscrepancyStore
	d domain.Discrepancy
}

func (s oneDiscrepancy) FindByID(context.Context, string) (domain.Discrepancy, error) {
	return s.d, nil
}
func (s oneDiscrepancy) Claim(context.Context, string, string, time.Time) (bool, error) {
	return false, errActed
}
func (s oneDiscrepancy) Settle(context.Context, string, string, string, time.Time) (bool, error) {
	return false, errActed
}
func (s oneDiscrepancy) Unclaim(context.Context, string, string) (bool, error) { return false, nil }

type actedCharges struct{}

func (actedCharges) FindCharge(context.Context, string) (domain.Charge, error) {
	return domain.Charge{}, errActed
}

// admitted reports whether Resolve took action on d past its decision:
// answered it as done, or went on to carry it out.
func admitted(d domain.Discrepancy, action string) (ok bool, err error) {
	r := &service.Resolver{Discrepancies: oneDiscrepancy{d: d}, Charges: actedCharges{}, Now: time.Now}
	defer func() {
		if p := recover(); p != nil {
			ok, err = true, fmt.Errorf("panicked past the decision: %v", p)
		}
	}()
	_, err = r.Resolve(context.Background(), "d1", action, "note")
	switch {
	case errors.Is(err, domain.ErrResolutionNotApplicable), errors.Is(err, domain.ErrAlreadyResolved):
		return false, err
	case err == nil, errors.Is(err, errActed):
		return true, err
	}
	return true, err
}

// TestActionsAreWhatResolveAdmits: for every discrepancy type, status,
// resolution and shape (naming an attempt, a charge), the actions a
// discrepancy lists are exactly those Resolve lets be carried out; a
// resolved discrepancy lists none, and Resolve answers only its own
// resolution, as done.
func TestActionsAreWhatResolveAdmits(t *testing.T) {
	resolutions := append([]string{""}, domain.ResolutionActions...)
	resolutions = append(resolutions, service.ResolveAuto)
	shapes := []struct{ name, attempt, charge string }{
		{"attempt and charge", "a1", "ch_1"}, {"no attempt", "", "ch_1"}, {"no charge", "a1", ""}, {"neither", "", ""},
	}
	for _, typ := range domain.DiscrepancyTypes {
		for _, st := range domain.DiscrepancyStatuses {
			for _, res := range resolutions {
				if st == domain.DiscrepancyOpen && res != "" || st != domain.DiscrepancyOpen && res == "" ||
					st == domain.DiscrepancyResolving && res == service.ResolveAuto {
					continue // no such discrepancy
				}
				for _, sh := range shapes {
					d := domain.Discrepancy{ID: "d1", Type: typ, Status: st, Resolution: res, AttemptID: sh.attempt, ChargeID: sh.charge}
					listed := d.Actions()
					for _, a := range domain.ResolutionActions {
						ok, err := admitted(d, a)
						done := err == nil
						if carried := ok && !done; carried != slices.Contains(listed, a) {
							t.Errorf("%s %s (resolution %q, %s): Actions() = %v, Resolve(%s) = %v", st, typ, res, sh.name, listed, a, err)
						}
						if done && (st != domain.DiscrepancyResolved || (res != a && !(res == service.ResolveAuto && a == service.ResolveRefund))) {
							t.Errorf("%s %s (resolution %q): Resolve(%s) answered as done", st, typ, res, a)
						}
					}
				}
			}
		}
	}
}
