package domain

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

// TestNext walks every (status, event) pair of the state machine: the legal
// ones must lead where docs/guarantees.md#order-state-machine says, every other pair must be refused.
func TestNext(t *testing.T) {
	legal := map[OrderStatus]map[Event]OrderStatus{
		StatusPending:    {EventClaim: StatusProcessing, EventCancel: StatusCancelled, EventExpire: StatusExpired},
		StatusProcessing: {EventSucceed: StatusPaid, EventRelease: StatusPending, EventAuthorize: StatusAuthorized},
		StatusAuthorized: {EventCapture: StatusPaid, EventVoid: StatusCancelled, EventLapse: StatusExpired},
		StatusPaid:       {EventRefundPartial: StatusPaid, EventRefundFull: StatusRefunded, EventRefundReversed: StatusPaid},
		StatusRefunded:   {EventRefundReversed: StatusPaid},
	}
	for _, from := range Statuses {
		for _, ev := range Events {
			want, ok := legal[from][ev]
			got, err := Next(from, ev)
			switch {
			case ok && (err != nil || got != want):
				t.Errorf("Next(%s, %s) = %q, %v; want %q, nil", from, ev, got, err, want)
			case !ok && !errors.Is(err, ErrInvalidTransition):
				t.Errorf("Next(%s, %s) = %q, %v; want ErrInvalidTransition", from, ev, got, err)
			}
		}
	}
}

// TestFromTo checks that an event's From and To say what Next says: the
// repository builds its guards from them.
func TestFromTo(t *testing.T) {
	for _, ev := range Events {
		if len(ev.From()) == 0 || !ev.To().Valid() {
			t.Errorf("%s: From() = %v, To() = %q; want some statuses and a valid one", ev, ev.From(), ev.To())
		}
		for _, from := range Statuses {
			to, err := Next(from, ev)
			if allowed := slices.Contains(ev.From(), from); allowed != (err == nil) || (allowed && to != ev.To()) {
				t.Errorf("Next(%s, %s) = %q, %v; From() = %v, To() = %q", from, ev, to, err, ev.From(), ev.To())
			}
		}
	}
	// One UPDATE performs both refunds (repository's AddRefund): they must
	// share the statuses they start from.
	if full, partial := EventRefundFull.From(), EventRefundPartial.From(); !slices.Equal(full, partial) {
		t.Errorf("a full refund starts from %v, a partial one from %v; want the same", full, partial)
	}
	if got := Event("nope").From(); len(got) != 0 {
		t.Errorf("From() of an unknown event = %v, want none", got)
	}
}

func TestStatusPredicates(t *testing.T) {
	for _, s := range Statuses {
		if !s.Valid() {
			t.Errorf("%q.Valid() = false, want true", s)
		}
	}
	if OrderStatus("").Valid() || OrderStatus("PAID").Valid() {
		t.Error("zero or unknown status reported valid")
	}
	final := map[OrderStatus]bool{StatusRefunded: true, StatusCancelled: true, StatusExpired: true}
	for _, s := range Statuses {
		if s.Final() != final[s] {
			t.Errorf("%q.Final() = %v, want %v", s, s.Final(), final[s])
		}
	}
}

func TestPayOutcome(t *testing.T) {
	tests := []struct {
		status  OrderStatus
		claimer string
		want    error
	}{
		{StatusPending, "", nil},
		{StatusProcessing, "k1", nil},
		{StatusProcessing, "other", ErrPaymentInProgress},
		{StatusPaid, "k1", nil},
		{StatusPaid, "other", ErrOrderAlreadyPaid},
		{StatusRefunded, "other", ErrOrderAlreadyPaid},
		{StatusCancelled, "", ErrOrderNotPayable},
		{StatusExpired, "", ErrOrderNotPayable},
	}
	for _, tt := range tests {
		o := Order{Status: tt.status, PayRequestID: tt.claimer}
		if got := o.PayOutcome("k1"); !errors.Is(got, tt.want) || (tt.want == nil && got != nil) {
			t.Errorf("Order{%s, %q}.PayOutcome(k1) = %v, want %v", tt.status, tt.claimer, got, tt.want)
		}
	}
}

func TestTotalIsExact(t *testing.T) {
	items := []Item{
		{Quantity: 1, UnitPrice: decimal.RequireFromString("0.10")},
		{Quantity: 1, UnitPrice: decimal.RequireFromString("0.20")},
		{Quantity: 3, UnitPrice: decimal.RequireFromString("19.99")},
	}
	if got, want := Total(items), decimal.RequireFromString("60.27"); !got.Equal(want) {
		t.Errorf("Total = %s, want %s", got, want)
	}
}

func TestRefundable(t *testing.T) {
	o := Order{Status: StatusPaid, Amount: decimal.RequireFromString("10.00"), RefundedAmount: decimal.RequireFromString("2.50")}
	if got := o.Refundable(); !got.Equal(decimal.RequireFromString("7.50")) {
		t.Errorf("Refundable() = %s, want 7.50", got)
	}
	o.Status = StatusPending
	if got := o.Refundable(); !got.IsZero() {
		t.Errorf("Refundable() of pending = %s, want 0", got)
	}
}

// TestStatusReason: a status payd does not know is refused with the list
// of those it does, so the caller can correct the request.
func TestStatusReason(t *testing.T) {
	got := StatusReason("declined")
	if !strings.HasPrefix(got, `"declined" is not an order status`) {
		t.Errorf("StatusReason = %q", got)
	}
	for _, s := range Statuses {
		if !strings.Contains(got, string(s)) {
			t.Errorf("StatusReason = %q, does not list %s", got, s)
		}
	}
}
