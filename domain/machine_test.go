package domain

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// machineCheck walks every (status, event) pair of m: Next agrees with
// From and To, every event leaves from some status to a status of the
// machine, and the initial statuses are the machine's.
func machineCheck[S ~string, E ~string](t *testing.T, m *Machine[S, E], events []E, statuses []S) {
	t.Helper()
	if !slices.Equal(m.Events(), events) || !slices.Equal(m.Statuses(), statuses) {
		t.Errorf("%s machine: events %v, statuses %v; want %v, %v", m.Name(), m.Events(), m.Statuses(), events, statuses)
	}
	if len(m.Initial()) == 0 {
		t.Errorf("%s machine: no initial status", m.Name())
	}
	for _, s := range m.Initial() {
		if !m.Valid(s) {
			t.Errorf("%s machine: initial status %q is not one of its statuses", m.Name(), s)
		}
	}
	for _, e := range m.Events() {
		if len(m.From(e)) == 0 || !m.Valid(m.To(e)) {
			t.Errorf("%s machine: %s From() = %v, To() = %q", m.Name(), e, m.From(e), m.To(e))
		}
		for _, s := range m.Statuses() {
			to, ok := m.Next(s, e)
			if allowed := slices.Contains(m.From(e), s); allowed != ok || (ok && to != m.To(e)) {
				t.Errorf("%s machine: Next(%s, %s) = %q, %v; From() = %v, To() = %q", m.Name(), s, e, to, ok, m.From(e), m.To(e))
			}
		}
	}
	if _, ok := m.Next(m.Statuses()[0], E("nope")); ok || len(m.From(E("nope"))) != 0 || m.To(E("nope")) != "" {
		t.Errorf("%s machine: an unknown event moves something", m.Name())
	}
	if m.Valid(S("")) || m.Valid(S("NOPE")) {
		t.Errorf("%s machine: the zero or an unknown status is valid", m.Name())
	}
}

func TestMachines(t *testing.T) {
	machineCheck(t, OrderMachine, Events, Statuses)
	machineCheck(t, AttemptMachine, AttemptEvents, AttemptStatuses)
	machineCheck(t, RefundMachine, []RefundEvent{RefundEventSucceed, RefundEventFail, RefundEventIdentify, RefundEventReverse}, RefundStatuses)
	machineCheck(t, DiscrepancyMachine, []DiscrepancyEvent{DiscrepancyEventResolve, DiscrepancyEventClaim,
		DiscrepancyEventSettle, DiscrepancyEventUnclaim}, DiscrepancyStatuses)
	machineCheck(t, RecordMachine, []RecordEvent{RecordEventSucceed, RecordEventFail, RecordEventRetry,
		RecordEventTakeOver, RecordEventRelease, RecordEventReplace}, RecordStatuses)
	machineCheck(t, DisputeMachine, DisputeEvents, DisputeStatuses)
	machineCheck(t, FulfillmentMachine, []FulfillmentEvent{FulfillmentShipPart, FulfillmentShipAll}, FulfillmentStatuses)
	machineCheck(t, HoldActionMachine, HoldActionEvents, HoldActionStatuses)
}

// TestSharedGuards: the events one store statement performs together must
// leave from the same statuses (the statement has one guard).
func TestSharedGuards(t *testing.T) {
	if a, b := RefundMachine.From(RefundEventSucceed), RefundMachine.From(RefundEventFail); !slices.Equal(a, b) {
		t.Errorf("a refund succeeds from %v and fails from %v; Finish has one guard", a, b)
	}
	if a, b := RecordMachine.From(RecordEventSucceed), RecordMachine.From(RecordEventFail); !slices.Equal(a, b) {
		t.Errorf("a record succeeds from %v and fails from %v; Complete has one guard", a, b)
	}
	if a, b := RecordMachine.From(RecordEventTakeOver), RecordMachine.From(RecordEventRelease); !slices.Equal(a, b) {
		t.Errorf("a lease is taken over from %v and released from %v", a, b)
	}
	if !slices.Equal(RecordMachine.From(RecordEventReplace), RecordStatuses) {
		t.Errorf("a gone record is replaced from %v; want every status (Gone decides)", RecordMachine.From(RecordEventReplace))
	}
	for _, s := range RecordStatuses {
		if s.Locking() != slices.Contains(RecordMachine.From(RecordEventTakeOver), s) {
			t.Errorf("%s.Locking() = %v, but a lease on it can be taken over: %v", s, s.Locking(), !s.Locking())
		}
	}
}

func TestFinishAndCompleteEvents(t *testing.T) {
	for _, s := range RefundStatuses {
		e, ok := FinishEvent(s)
		if ok != (s != RefundPending) || (ok && RefundMachine.To(e) != s) {
			t.Errorf("FinishEvent(%s) = %s, %v", s, e, ok)
		}
	}
	for _, s := range RecordStatuses {
		e, ok := CompleteEvent(s)
		if ok != (s != RecordProcessing) || (ok && RecordMachine.To(e) != s) {
			t.Errorf("CompleteEvent(%s) = %s, %v", s, e, ok)
		}
	}
}

func TestDiscrepancyStatusValid(t *testing.T) {
	for _, s := range []DiscrepancyStatus{DiscrepancyOpen, DiscrepancyResolving, DiscrepancyResolved} {
		if !s.Valid() {
			t.Errorf("%q.Valid() = false", s)
		}
	}
	if DiscrepancyStatus("closed").Valid() || DiscrepancyStatus("").Valid() {
		t.Error("an unknown discrepancy status is valid")
	}
}

// TestOrderApply: Apply moves an order in memory as the store's guard
// moves its row, and refuses what the guard refuses.
func TestOrderApply(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	base := Order{ID: "o", Amount: decimal.NewFromInt(5), Version: 3, ExpiresAt: now.Add(time.Hour), UpdatedAt: now.Add(-time.Minute)}
	at := func(s OrderStatus, req string) Order { o := base; o.Status, o.PayRequestID = s, req; return o }

	got, err := at(StatusPending, "").Apply(EventClaim, "r1", now)
	if err != nil || got.Status != StatusProcessing || got.PayRequestID != "r1" || got.Version != 4 || !got.UpdatedAt.Equal(now) {
		t.Errorf("claim = %+v, %v", got, err)
	}
	got, err = at(StatusProcessing, "r1").Apply(EventSucceed, "r1", now)
	if err != nil || got.Status != StatusPaid || got.PaidAt == nil || !got.PaidAt.Equal(now) || got.Version != 4 || got.PayRequestID != "r1" {
		t.Errorf("succeed = %+v, %v", got, err)
	}
	got, err = at(StatusProcessing, "r1").Apply(EventRelease, "r1", now)
	if err != nil || got.Status != StatusPending || got.PayRequestID != "" || got.Version != 4 {
		t.Errorf("release = %+v, %v", got, err)
	}
	for _, e := range []Event{EventCancel, EventExpire} {
		got, err = at(StatusPending, "").Apply(e, "", now)
		if err != nil || got.Status != e.To() || got.Version != 4 {
			t.Errorf("%s = %+v, %v", e, got, err)
		}
	}
	refused := []struct {
		o    Order
		e    Event
		req  string
		want error
	}{
		{at(StatusPaid, "r1"), EventClaim, "r2", ErrInvalidTransition},
		{at(StatusProcessing, "r1"), EventSucceed, "r2", ErrInvalidTransition}, // another request's success
		{at(StatusProcessing, "r1"), EventRelease, "r2", ErrInvalidTransition},
		{at(StatusPending, ""), EventSucceed, "", ErrInvalidTransition},
		{at(StatusPaid, "r1"), EventRefundFull, "", ErrInvalidTransition}, // amounts are the store's
		{func() Order { o := at(StatusPending, ""); o.ExpiresAt = now; return o }(), EventClaim, "r1", ErrOrderExpired},
	}
	for _, tt := range refused {
		got, err := tt.o.Apply(tt.e, tt.req, now)
		if !errors.Is(err, tt.want) || got.Version != tt.o.Version || got.Status != tt.o.Status {
			t.Errorf("%s from %s by %q = %+v, %v; want the order unchanged and %v", tt.e, tt.o.Status, tt.req, got, err, tt.want)
		}
	}
}

func TestPaidBy(t *testing.T) {
	a := Attempt{RequestID: "r1", Status: AttemptSucceeded}
	for _, s := range Statuses {
		o := Order{Status: s, PayRequestID: "r1"}
		if o.PaidBy(a) != slices.Contains(PaidStatuses(), s) || o.Status.WasPaid() != o.PaidBy(a) {
			t.Errorf("%s: PaidBy = %v, WasPaid = %v", s, o.PaidBy(a), s.WasPaid())
		}
		if o.ClaimedBy(a) != (s == StatusProcessing) {
			t.Errorf("%s: ClaimedBy = %v", s, o.ClaimedBy(a))
		}
		other := Order{Status: s, PayRequestID: "r2"}
		if other.PaidBy(a) || other.ClaimedBy(a) || PaidByAttempt(other, a) {
			t.Errorf("%s: another request's order is paid or claimed by a", s)
		}
	}
	paid := Order{Status: StatusPaid, PayRequestID: "r1"}
	if !PaidByAttempt(paid, a) || PaidByAttempt(paid, Attempt{RequestID: "r1", Status: AttemptFailed}) {
		t.Error("PaidByAttempt does not hold the attempt to succeeded")
	}
}

func TestRefundApply(t *testing.T) {
	r := Refund{ID: "rf", Status: RefundPending}
	got, ok := r.Apply(RefundEventIdentify, "re_1")
	if !ok || got.Status != RefundPending || got.ProviderRefundID != "re_1" {
		t.Errorf("identify = %+v, %v", got, ok)
	}
	got, ok = got.Apply(RefundEventSucceed, "")
	if !ok || got.Status != RefundSucceeded || got.ProviderRefundID != "re_1" {
		t.Errorf("succeed = %+v, %v; want succeeded, the ID kept", got, ok)
	}
	if again, ok := got.Apply(RefundEventFail, "re_2"); ok || again != got {
		t.Errorf("fail after succeeded = %+v, %v; want refused, unchanged", again, ok)
	}
}

func TestAttemptSucceededWith(t *testing.T) {
	a := Attempt{Status: AttemptSucceeded, ProviderChargeID: "ch_1"}
	if !a.SucceededWith("ch_1") || a.SucceededWith("ch_2") || a.SucceededWith("") {
		t.Error("SucceededWith does not hold the charge ID")
	}
	a.Status = AttemptHeld
	if a.SucceededWith("ch_1") {
		t.Error("a held attempt succeeded with its charge")
	}
}
