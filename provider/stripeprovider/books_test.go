package stripeprovider_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/stripefake"
	"github.com/payd/payd/provider/stripeprovider"
)

// paid charges a new attempt with pm_card_visa and returns its PaymentIntent.
func (e *env) paid(t *testing.T, id string) string {
	t.Helper()
	_, req := e.attempt(id, stripefake.PMVisa)
	ch, err := e.c.Charge(context.Background(), req)
	if err != nil || ch.Status != domain.ChargeSucceeded {
		t.Fatalf("Charge(%s) = %+v, %v", id, ch, err)
	}
	return ch.ID
}

func money(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func chargeIDOf(t *testing.T, e *env, pi string) string {
	t.Helper()
	for _, ev := range e.fake.Events() {
		if ev.Type == "payment_intent.succeeded" {
			var body struct {
				Data struct {
					Object struct {
						ID           string `json:"id"`
						LatestCharge string `json:"latest_charge"`
					} `json:"object"`
				} `json:"data"`
			}
			if err := json.Unmarshal(ev.Body, &body); err == nil && body.Data.Object.ID == pi {
				return body.Data.Object.LatestCharge
			}
		}
	}
	t.Fatalf("no charge of %s", pi)
	return ""
}

// FindCharge is Stripe's record of a charge, by the PaymentIntent ID payd
// stores or by its Charge ID: payd's order and attempt from the metadata,
// the money, what is refunded (by payd or elsewhere) and what disputes
// took and did not give back.
func TestFindCharge(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pi := e.paid(t, "att-find")
	check := func(what, id string, refunded, disputed string) {
		t.Helper()
		ch, err := e.c.FindCharge(ctx, id)
		if err != nil || ch.ID != pi || ch.OrderID != "ord-att-find" || ch.IdempotencyKey != "att-find" ||
			!ch.Amount.Equal(money("19.90")) || ch.Currency != "EUR" || ch.Status != domain.ChargeSucceeded ||
			!ch.RefundedAmount.Equal(money(refunded)) || !ch.DisputedAmount.Equal(money(disputed)) {
			t.Fatalf("%s: FindCharge(%s) = %+v, %v; want refunded %s, disputed %s", what, id, ch, err, refunded, disputed)
		}
	}
	check("paid", pi, "0", "0")
	check("by its Charge ID", chargeIDOf(t, e, pi), "0", "0")

	if _, err := e.c.Refund(ctx, domain.ProviderRefundRequest{IdempotencyKey: "rk-find", ChargeID: pi, Amount: money("5.00"), Currency: "EUR"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fake.RefundOutside(pi, 200); err != nil {
		t.Fatal(err)
	}
	check("refunded by payd and in the Dashboard", pi, "7.00", "0")

	inquiry := e.fake.OpenDispute(pi, stripefake.DisputeOptions{Amount: 1000, Inquiry: true})
	check("an inquiry takes no money", pi, "7.00", "0")
	if err := e.fake.UpdateDispute(inquiry, "needs_response"); err != nil {
		t.Fatal(err)
	}
	check("the inquiry escalated to a chargeback", pi, "7.00", "10.00")
	if err := e.fake.CloseDispute(inquiry, "won"); err != nil {
		t.Fatal(err)
	}
	check("won: the money came back", pi, "7.00", "0")

	lost := e.fake.OpenDispute(pi, stripefake.DisputeOptions{Amount: 300})
	if err := e.fake.CloseDispute(lost, "lost"); err != nil {
		t.Fatal(err)
	}
	check("lost: the money is gone", pi, "7.00", "3.00")

	for _, id := range []string{"pi_nope", "ch_nope"} {
		if _, err := e.c.FindCharge(ctx, id); !errors.Is(err, domain.ErrChargeNotFound) {
			t.Errorf("FindCharge(%s) = %v, want ErrChargeNotFound", id, err)
		}
	}
	_, bad := e.attempt("att-find-declined", stripefake.PMDeclined)
	declined, err := e.c.Charge(ctx, bad)
	if err != nil {
		t.Fatal(err)
	}
	if ch, err := e.c.FindCharge(ctx, declined.ID); err != nil || ch.Status != domain.ChargeFailed || ch.OrderID != "ord-att-find-declined" {
		t.Fatalf("FindCharge(declined) = %+v, %v", ch, err)
	}
	e.fake.SetDown(true)
	if _, err := e.c.FindCharge(ctx, pi); !errors.Is(err, domain.ErrProviderUnavailable) {
		t.Fatalf("FindCharge(Stripe down) = %v, want ErrProviderUnavailable", err)
	}
}

// ListRefunds lists every refund created in the window, payd's and the
// Dashboard's, oldest first, across pages, each with payd's charge and
// order; only payd's carry its refund key.
func TestListRefunds(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	base := time.Now().UTC().Truncate(time.Second)
	clock := base
	e.fake.SetNow(func() time.Time { return clock })
	pi := e.paid(t, "att-lr")
	clock = base.Add(-time.Hour)
	if _, err := e.fake.RefundOutside(pi, 100); err != nil { // before the window
		t.Fatal(err)
	}
	clock = base.Add(time.Second)
	if _, err := e.c.Refund(ctx, domain.ProviderRefundRequest{IdempotencyKey: "rk-lr", ChargeID: pi, Amount: money("5.00"), Currency: "EUR"}); err != nil {
		t.Fatal(err)
	}
	clock = base.Add(2 * time.Second)
	outside, err := e.fake.RefundOutside(pi, 250)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 101 { // past one page of 100
		clock = base.Add(3 * time.Second)
		pi := e.paid(t, fmt.Sprintf("att-lr-%03d", i))
		if _, err := e.fake.RefundOutside(pi, 1); err != nil {
			t.Fatal(err)
		}
	}
	clock = base.Add(time.Hour)
	if _, err := e.fake.RefundOutside(pi, 100); err != nil { // after the window
		t.Fatal(err)
	}

	got, err := e.c.ListRefunds(ctx, base, base.Add(time.Minute))
	if err != nil || len(got) != 103 {
		t.Fatalf("ListRefunds = %d refunds, %v, want 103", len(got), err)
	}
	if r := got[0]; r.IdempotencyKey != "rk-lr" || r.ChargeID != pi || r.OrderID != "ord-att-lr" || !r.Amount.Equal(money("5.00")) ||
		r.Currency != "EUR" || r.Status != domain.ChargeSucceeded || !r.CreatedAt.Equal(base.Add(time.Second)) {
		t.Fatalf("payd's refund = %+v", r)
	}
	if r := got[1]; r.ID != outside || r.IdempotencyKey != "" || r.ChargeID != pi || r.OrderID != "ord-att-lr" || !r.Amount.Equal(money("2.50")) {
		t.Fatalf("the Dashboard's refund = %+v", r)
	}
	if r := got[102]; r.OrderID != "ord-att-lr-100" || r.IdempotencyKey != "" {
		t.Fatalf("the newest refund = %+v", r)
	}
	if pages := e.fake.Count("GET /v1/refunds"); pages != 2 {
		t.Fatalf("refund pages requested = %d, want 2", pages)
	}
}

// ListDisputes lists the disputes opened in the window, oldest first,
// with payd's charge, order and attempt, open until Stripe decides them;
// an inquiry closed without a chargeback is reported closed with nothing
// lost (won).
func TestListDisputes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	base := time.Now().UTC().Truncate(time.Second)
	clock := base
	e.fake.SetNow(func() time.Time { return clock })
	e.now = base.Add(time.Minute)
	open := e.fake.Dispute(e.paid(t, "att-ld-open"))
	clock = base.Add(time.Second)
	won := e.fake.OpenDispute(e.paid(t, "att-ld-won"), stripefake.DisputeOptions{Reason: "product_not_received"})
	lost := e.fake.OpenDispute(e.paid(t, "att-ld-lost"), stripefake.DisputeOptions{Amount: 500})
	inquiry := e.fake.OpenDispute(e.paid(t, "att-ld-inq"), stripefake.DisputeOptions{Inquiry: true})
	closedInquiry := e.fake.OpenDispute(e.paid(t, "att-ld-inq-closed"), stripefake.DisputeOptions{Inquiry: true})
	for id, st := range map[string]string{won: "won", lost: "lost", closedInquiry: "warning_closed"} {
		if err := e.fake.CloseDispute(id, st); err != nil {
			t.Fatal(err)
		}
	}
	clock = base.Add(-time.Hour)
	e.fake.Dispute(e.paid(t, "att-ld-before"))

	got, err := e.c.ListDisputes(ctx, base, base.Add(time.Minute))
	if err != nil || len(got) != 5 {
		t.Fatalf("ListDisputes = %+v, %v, want 5", got, err)
	}
	want := []struct {
		id, attempt string
		status      domain.DisputeStatus
		amount      string
		reason      string
	}{
		{open, "att-ld-open", domain.DisputeOpen, "19.90", "fraudulent"},
		{won, "att-ld-won", domain.DisputeWon, "19.90", "product_not_received"},
		{lost, "att-ld-lost", domain.DisputeLost, "5.00", "fraudulent"},
		{inquiry, "att-ld-inq", domain.DisputeOpen, "19.90", "fraudulent"},
		{closedInquiry, "att-ld-inq-closed", domain.DisputeWon, "19.90", "fraudulent"},
	}
	for i, w := range want {
		d := got[i]
		if d.ID != w.id || d.IdempotencyKey != w.attempt || d.OrderID != "ord-"+w.attempt || d.ChargeID != e.fake.PaymentIntentOf("ord-"+w.attempt) ||
			d.Status != w.status || !d.Amount.Equal(money(w.amount)) || d.Currency != "EUR" || d.Reason != w.reason {
			t.Errorf("dispute %d = %+v, want %+v", i, d, w)
		}
		if closed := !d.ClosedAt.IsZero(); closed != (w.status != domain.DisputeOpen) {
			t.Errorf("dispute %d closed at %v, status %s", i, d.ClosedAt, d.Status)
		}
		if due := d.CreatedAt.Add(7 * 24 * time.Hour); !d.EvidenceDueBy.Equal(due) {
			t.Errorf("dispute %d: evidence due %v, want evidence_details.due_by %v", i, d.EvidenceDueBy, due)
		}
	}
}

// DisputeURL is the dispute in Stripe's dashboard, under /test/ for a
// test-mode key (secret or restricted) and at the root for a live one.
func TestDisputeURL(t *testing.T) {
	for key, want := range map[string]string{
		"sk_test_abc": "https://dashboard.stripe.com/test/disputes/dp_1",
		"rk_test_abc": "https://dashboard.stripe.com/test/disputes/dp_1",
		"sk_live_abc": "https://dashboard.stripe.com/disputes/dp_1",
		"rk_live_abc": "https://dashboard.stripe.com/disputes/dp_1",
	} {
		c, err := stripeprovider.New(stripeprovider.Config{SecretKey: key})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.DisputeURL("dp_1"); got != want {
			t.Errorf("key %s…: DisputeURL = %q, want %q", key[:8], got, want)
		}
		if got := c.DisputeURL("dp/../x"); got != strings.TrimSuffix(want, "dp_1")+"dp%2F..%2Fx" {
			t.Errorf("key %s…: DisputeURL(with a slash) = %q, want it escaped", key[:8], got)
		}
	}
}

// FindDispute is Stripe's record of one dispute by its id, read as
// ListDisputes reads it (payd's charge, order and attempt, the status
// mapped the same way); an id Stripe does not know is
// domain.ErrDisputeNotFound, and Stripe down leaves it open.
func TestFindDispute(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	base := time.Now().UTC().Truncate(time.Second)
	e.fake.SetNow(func() time.Time { return base })
	e.now = base.Add(time.Minute)
	open := e.fake.Dispute(e.paid(t, "att-fd-open"))
	won := e.fake.OpenDispute(e.paid(t, "att-fd-won"), stripefake.DisputeOptions{Reason: "product_not_received"})
	lost := e.fake.OpenDispute(e.paid(t, "att-fd-lost"), stripefake.DisputeOptions{Amount: 500})
	inquiry := e.fake.OpenDispute(e.paid(t, "att-fd-inq"), stripefake.DisputeOptions{Inquiry: true})
	closedInquiry := e.fake.OpenDispute(e.paid(t, "att-fd-inq-closed"), stripefake.DisputeOptions{Inquiry: true})
	review := e.fake.Dispute(e.paid(t, "att-fd-review"))
	for id, st := range map[string]string{won: "won", lost: "lost", closedInquiry: "warning_closed"} {
		if err := e.fake.CloseDispute(id, st); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.fake.UpdateDispute(review, "under_review"); err != nil {
		t.Fatal(err)
	}
	listed, err := e.c.ListDisputes(ctx, base, base.Add(time.Minute))
	if err != nil || len(listed) != 6 {
		t.Fatalf("ListDisputes = %+v, %v, want 6", listed, err)
	}
	wantStatus := map[string]domain.DisputeStatus{open: domain.DisputeOpen, won: domain.DisputeWon, lost: domain.DisputeLost,
		inquiry: domain.DisputeOpen, closedInquiry: domain.DisputeWon, review: domain.DisputeOpen}
	for _, want := range listed {
		got, err := e.c.FindDispute(ctx, want.ID)
		if err != nil || fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
			t.Errorf("FindDispute(%s) = %+v, %v; want %+v", want.ID, got, err, want)
		}
		if got.Status != wantStatus[want.ID] || got.OrderID == "" || got.IdempotencyKey == "" || got.OrderID != "ord-"+got.IdempotencyKey ||
			got.ChargeID != e.fake.PaymentIntentOf(got.OrderID) || got.Currency != "EUR" {
			t.Errorf("FindDispute(%s) = %+v, want %s with payd's order, attempt and PaymentIntent", want.ID, got, wantStatus[want.ID])
		}
	}
	if got, _ := e.c.FindDispute(ctx, lost); !got.Amount.Equal(money("5.00")) || got.ClosedAt.IsZero() {
		t.Errorf("FindDispute(lost) = %+v, want 5.00 closed", got)
	}

	for _, id := range []string{"dp_nope", e.fake.PaymentIntentOf("ord-att-fd-open")} {
		_, err := e.c.FindDispute(ctx, id)
		if !errors.Is(err, domain.ErrDisputeNotFound) || errors.Is(err, domain.ErrChargeNotFound) || errors.Is(err, domain.ErrProviderUnavailable) ||
			!domain.IsProviderRequestError(err, "resource_missing") {
			t.Errorf("FindDispute(%s) = %v, want ErrDisputeNotFound (resource_missing)", id, err)
		}
	}
	e.fake.SetDown(true)
	if _, err := e.c.FindDispute(ctx, open); !errors.Is(err, domain.ErrProviderUnavailable) || errors.Is(err, domain.ErrDisputeNotFound) {
		t.Errorf("FindDispute(Stripe down) = %v, want ErrProviderUnavailable", err)
	}
}
