package stripeprovider_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/stripefake"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/provider/stripeprovider"
)

// attempts is a tiny attempt store standing in for payd's: what payd
// recorded of each attempt, which it hands GetCharge.
type attempts struct {
	mu sync.Mutex
	m  map[string]domain.Attempt
}

func (s *attempts) put(a domain.Attempt) { s.mu.Lock(); s.m[a.ID] = a; s.mu.Unlock() }

// record is payd's record of attempt id, or only its id (no status) when
// payd has none, as the service passes a key a provider event names.
func (s *attempts) record(id string) domain.Attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.m[id]; ok {
		return a
	}
	return domain.Attempt{ID: id}
}

type env struct {
	fake  *stripefake.Fake
	c     *stripeprovider.Client
	store *attempts
	now   time.Time
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{fake: stripefake.New(t.Cleanup), store: &attempts{m: map[string]domain.Attempt{}}, now: time.Now().UTC()}
	c, err := stripeprovider.New(stripeprovider.Config{SecretKey: "sk_test_fake", APIBase: e.fake.URL(), Timeout: 2 * time.Second,
		Now: func() time.Time { return e.now }})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	return e
}

func (e *env) attempt(id, pm string) (domain.Attempt, domain.ChargeRequest) {
	a := domain.Attempt{ID: id, OrderID: "ord-" + id, PaymentMethod: pm, Amount: decimal.RequireFromString("19.90"),
		Currency: "EUR", CreatedAt: e.now, Status: domain.AttemptStarted}
	e.store.put(a)
	return a, domain.ChargeRequest{IdempotencyKey: a.ID, OrderID: a.OrderID, Amount: a.Amount, Currency: "EUR", PaymentMethod: pm}
}

func TestChargeOutcomes(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		pm       string
		status   domain.ChargeStatus
		code     string
		wantErr  string
		intended bool
	}{
		{pm: stripefake.PMVisa, status: domain.ChargeSucceeded},
		{pm: stripefake.PMDeclined, status: domain.ChargeFailed, code: "generic_decline"},
		{pm: stripefake.PMInsufficient, status: domain.ChargeFailed, code: "insufficient_funds"},
		{pm: stripefake.PM3DS, status: domain.ChargePending},
		{pm: stripefake.PMProcessing, status: domain.ChargePending},
		{pm: "pm_nope", wantErr: "unknown_payment_method"},
	}
	for i, tt := range tests {
		t.Run(tt.pm, func(t *testing.T) {
			_, req := e.attempt("att-"+string(rune('a'+i)), tt.pm)
			ch, err := e.c.Charge(context.Background(), req)
			if tt.wantErr != "" {
				if !domain.IsProviderRequestError(err, tt.wantErr) {
					t.Fatalf("Charge(%s) = %v, want refusal %s", tt.pm, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Charge(%s) = %v", tt.pm, err)
			}
			if ch.Status != tt.status || ch.FailureCode != tt.code || !strings.HasPrefix(ch.ID, "pi_") {
				t.Fatalf("Charge(%s) = %+v, want status %s code %q", tt.pm, ch, tt.status, tt.code)
			}
			if ch.IdempotencyKey != req.IdempotencyKey || ch.OrderID != req.OrderID || !ch.Amount.Equal(req.Amount) || ch.Currency != "EUR" {
				t.Fatalf("Charge(%s) = %+v, want the attempt's key, order and money", tt.pm, ch)
			}
		})
	}
}

// A reply lost after Stripe charged: asking (without a stored
// PaymentIntent id) repeats the create under the same key and gets the
// first result, never a second PaymentIntent.
func TestLostReplyAskedByReplay(t *testing.T) {
	e := newEnv(t)
	_, req := e.attempt("att-lost", stripefake.PMVisa)
	e.fake.DropReplies(1)
	if _, err := e.c.Charge(context.Background(), req); !errors.Is(err, domain.ErrProviderUnavailable) {
		t.Fatalf("Charge with a lost reply = %v, want ErrProviderUnavailable", err)
	}
	ch, err := e.c.GetCharge(context.Background(), e.store.record(req.IdempotencyKey))
	if err != nil || ch.Status != domain.ChargeSucceeded {
		t.Fatalf("GetCharge = %+v, %v, want succeeded", ch, err)
	}
	if n := e.fake.Created(req.OrderID); n != 1 {
		t.Fatalf("PaymentIntents for the order = %d, want 1", n)
	}
}

// Stripe replays the first response under a key, a snapshot of the
// PaymentIntent as the create left it: asked by replay after the bank (or
// the customer) finished a PaymentIntent that the create left pending, the
// adapter answers its state now, not the snapshot, and it names the
// PaymentIntent, so payd can store its id.
func TestLostReplyPendingThenFinished(t *testing.T) {
	for _, tt := range []struct {
		pm     string
		finish func(f *stripefake.Fake, id string)
	}{
		{stripefake.PMProcessing, func(f *stripefake.Fake, id string) { f.Finish(id, true) }},
		{stripefake.PM3DS, func(f *stripefake.Fake, id string) { f.Authenticate(id, true) }},
	} {
		t.Run(tt.pm, func(t *testing.T) {
			e := newEnv(t)
			a, req := e.attempt("att-pending", tt.pm)
			e.fake.DropReplies(1)
			if _, err := e.c.Charge(context.Background(), req); !errors.Is(err, domain.ErrProviderUnavailable) {
				t.Fatalf("Charge with a lost reply = %v, want ErrProviderUnavailable", err)
			}
			a.Status = domain.AttemptUnknown
			e.store.put(a)
			pi := e.fake.PaymentIntentOf(req.OrderID)
			tt.finish(e.fake, pi)
			ch, err := e.c.GetCharge(context.Background(), e.store.record(a.ID))
			if err != nil || ch.Status != domain.ChargeSucceeded || ch.ID != pi {
				t.Fatalf("GetCharge after Stripe finished %s = %+v, %v, want %s succeeded", pi, ch, err, pi)
			}
			if n := e.fake.Created(req.OrderID); n != 1 {
				t.Fatalf("PaymentIntents for the order = %d, want 1", n)
			}
		})
	}
}

// With a stored PaymentIntent id the adapter retrieves it: 3-D Secure then
// completed reads as succeeded.
func TestGetChargeByStoredID(t *testing.T) {
	e := newEnv(t)
	a, req := e.attempt("att-3ds", stripefake.PM3DS)
	ch, err := e.c.Charge(context.Background(), req)
	if err != nil || ch.Status != domain.ChargePending {
		t.Fatalf("Charge(3DS) = %+v, %v", ch, err)
	}
	a.ProviderChargeID = ch.ID
	e.store.put(a)
	e.fake.Authenticate(ch.ID, true)
	got, err := e.c.GetCharge(context.Background(), e.store.record(a.ID))
	if err != nil || got.Status != domain.ChargeSucceeded || got.ID != ch.ID {
		t.Fatalf("GetCharge after 3DS = %+v, %v, want %s succeeded", got, err, ch.ID)
	}
	calls := strings.Join(e.fake.Calls(), "\n")
	if !strings.Contains(calls, "GET /v1/payment_intents/"+ch.ID) {
		t.Fatalf("calls = %s, want a retrieve by id", calls)
	}
}

// Past the replay window the adapter searches by metadata instead of
// repeating a create Stripe may no longer recognise; none found is
// ErrChargeNotFound, and nothing is created.
func TestPastReplayWindowSearches(t *testing.T) {
	e := newEnv(t)
	_, req := e.attempt("att-old-charged", stripefake.PMVisa)
	if _, err := e.c.Charge(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	e.attempt("att-old-never", stripefake.PMVisa)
	e.now = e.now.Add(stripeprovider.ReplayWindow + time.Minute)
	if _, err := e.c.GetCharge(context.Background(), e.store.record("att-old-never")); !errors.Is(err, domain.ErrProviderUnavailable) {
		t.Fatalf("GetCharge(old, never sent) within the search lag = %v, want ErrProviderUnavailable", err)
	}
	e.now = e.now.Add(stripeprovider.SearchLag)
	if ch, err := e.c.GetCharge(context.Background(), e.store.record("att-old-charged")); err != nil || ch.Status != domain.ChargeSucceeded {
		t.Fatalf("GetCharge(old, charged) = %+v, %v", ch, err)
	}
	if _, err := e.c.GetCharge(context.Background(), e.store.record("att-old-never")); !errors.Is(err, domain.ErrChargeNotFound) {
		t.Fatalf("GetCharge(old, never sent) = %v, want ErrChargeNotFound", err)
	}
	if n := e.fake.Created("ord-att-old-never"); n != 0 {
		t.Fatalf("PaymentIntents created by asking = %d, want 0", n)
	}
}

// A settled attempt is never replayed: asking about one payd failed
// without a PaymentIntent id searches, and creates nothing.
func TestSettledAttemptNotReplayed(t *testing.T) {
	e := newEnv(t)
	a, _ := e.attempt("att-failed", stripefake.PMVisa)
	a.Status = domain.AttemptFailed
	e.store.put(a)
	if _, err := e.c.GetCharge(context.Background(), e.store.record(a.ID)); !errors.Is(err, domain.ErrChargeNotFound) {
		t.Fatalf("GetCharge(failed, never sent) = %v, want ErrChargeNotFound", err)
	}
	if n := e.fake.Created(a.OrderID); n != 0 {
		t.Fatalf("PaymentIntents created by asking about a settled attempt = %d, want 0", n)
	}
}

func TestUnavailable(t *testing.T) {
	e := newEnv(t)
	_, req := e.attempt("att-down", stripefake.PMVisa)
	e.fake.SetDown(true)
	if _, err := e.c.Charge(context.Background(), req); !errors.Is(err, domain.ErrProviderUnavailable) {
		t.Fatalf("Charge while Stripe is down = %v, want ErrProviderUnavailable", err)
	}
}

func TestRefundOwnKey(t *testing.T) {
	e := newEnv(t)
	_, req := e.attempt("att-refund", stripefake.PMVisa)
	ch, err := e.c.Charge(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	rr := domain.ProviderRefundRequest{IdempotencyKey: "refund-1", ChargeID: ch.ID, Amount: decimal.RequireFromString("5.00"), Currency: "EUR", Reason: "x"}
	for range 2 { // the same key twice refunds once
		r, err := e.c.Refund(context.Background(), rr)
		if err != nil || r.Status != domain.ChargeSucceeded || r.ChargeID != ch.ID || r.IdempotencyKey != "refund-1" || !r.Amount.Equal(rr.Amount) {
			t.Fatalf("Refund = %+v, %v", r, err)
		}
	}
	rr.IdempotencyKey, rr.Amount = "refund-2", decimal.RequireFromString("15.00")
	if _, err := e.c.Refund(context.Background(), rr); !domain.IsProviderRequestError(err, "") {
		t.Fatalf("Refund beyond the charge = %v, want a refusal", err)
	}
}

// ListCharges hands out Stripe's pages of 100, each from where the last
// ended.
func TestListChargesPaginates(t *testing.T) {
	e := newEnv(t)
	from := e.now.Add(-time.Second)
	for i := range 105 {
		_, req := e.attempt("att-list-"+strings.Repeat("x", i%3)+string(rune('A'+i%26))+string(rune('a'+i/26)), stripefake.PMVisa)
		if _, err := e.c.Charge(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	got, err := provider.AllCharges(context.Background(), e.c, from, e.now.Add(2*time.Second))
	if err != nil || len(got) != 105 {
		t.Fatalf("ListCharges = %d charges, %v, want 105", len(got), err)
	}
	pages := 0
	for _, c := range e.fake.Calls() {
		if c == "GET /v1/payment_intents" {
			pages++
		}
	}
	if pages != 2 {
		t.Fatalf("list pages requested = %d, want 2", pages)
	}
}

// A PaymentIntent payd stored the id of existed: Stripe answering 404 for
// it (another account's key, a restored test-mode account, Stripe's own
// fault) proves nothing about whether it charged, so it is an unknown
// outcome for an operator, never "never charged" (which would release the
// order and let it be paid twice).
func TestStoredIDNotFoundIsUnknown(t *testing.T) {
	e := newEnv(t)
	a, _ := e.attempt("att-gone", stripefake.PMVisa)
	a.ProviderChargeID, a.Status = "pi_not_on_this_account", domain.AttemptUnknown
	e.store.put(a)
	_, err := e.c.GetCharge(context.Background(), e.store.record(a.ID))
	if !errors.Is(err, domain.ErrProviderUnavailable) || errors.Is(err, domain.ErrChargeNotFound) {
		t.Fatalf("GetCharge(stored id Stripe does not know) = %v, want ErrProviderUnavailable only", err)
	}
	if n := e.fake.Created(a.OrderID); n != 0 {
		t.Fatalf("PaymentIntents created = %d, want 0", n)
	}
}

// CancelCharge cancels a PaymentIntent not yet final under its own key, so
// it can no longer be confirmed; one that succeeded is reported succeeded,
// one already cancelled stays failed.
func TestCancelCharge(t *testing.T) {
	e := newEnv(t)
	a, req := e.attempt("att-cancel-3ds", stripefake.PM3DS)
	ch, err := e.c.Charge(context.Background(), req)
	if err != nil || ch.Status != domain.ChargePending {
		t.Fatalf("Charge(3DS) = %+v, %v", ch, err)
	}
	for range 2 {
		got, err := e.c.CancelCharge(context.Background(), a, ch.ID)
		if err != nil || got.Status != domain.ChargeFailed || got.ID != ch.ID {
			t.Fatalf("CancelCharge(requires_action) = %+v, %v; want failed", got, err)
		}
	}
	if st := e.fake.Status(ch.ID); st != "canceled" {
		t.Fatalf("PaymentIntent = %s, want canceled", st)
	}
	if err := e.fake.Confirm(ch.ID, stripefake.PMVisa); err == nil {
		t.Fatal("a cancelled PaymentIntent was confirmed again")
	}

	a, req = e.attempt("att-cancel-paid", stripefake.PMVisa)
	ch, err = e.c.Charge(context.Background(), req)
	if err != nil || ch.Status != domain.ChargeSucceeded {
		t.Fatalf("Charge(visa) = %+v, %v", ch, err)
	}
	got, err := e.c.CancelCharge(context.Background(), a, ch.ID)
	if err != nil || got.Status != domain.ChargeSucceeded {
		t.Fatalf("CancelCharge(succeeded) = %+v, %v; want succeeded", got, err)
	}
	if !slices.Contains(e.fake.Calls(), "POST /v1/payment_intents/"+ch.ID+"/cancel") {
		t.Fatalf("calls = %v, want a cancel", e.fake.Calls())
	}
}

// A key payd recorded no attempt under (one an event names) has no
// PaymentIntent payd created: the adapter says so without asking Stripe,
// and creates nothing.
func TestUnrecordedAttemptNotFound(t *testing.T) {
	e := newEnv(t)
	_, err := e.c.GetCharge(context.Background(), domain.Attempt{ID: "att-stranger", OrderID: "ord-att-stranger"})
	if !errors.Is(err, domain.ErrChargeNotFound) {
		t.Fatalf("GetCharge(unrecorded) = %v, want ErrChargeNotFound", err)
	}
	if calls := e.fake.Calls(); len(calls) != 0 {
		t.Fatalf("calls = %v, want none", calls)
	}
}

// A Stripe nobody answers at is unreachable (payd answers 503), as the
// sandbox's client reports it.
func TestConnectionRefusedIsUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := stripeprovider.New(stripeprovider.Config{SecretKey: "sk_test_fake", APIBase: "http://" + addr, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.FindCharge(context.Background(), "pi_1")
	if !errors.Is(err, domain.ErrProviderUnavailable) || !errors.Is(err, domain.ErrProviderUnreachable) {
		t.Fatalf("FindCharge(nobody listening) = %v, want ErrProviderUnavailable and ErrProviderUnreachable", err)
	}
}
