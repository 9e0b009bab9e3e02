package stripefake_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/payd/payd/internal/stripefake"
)

func call(t *testing.T, f *stripefake.Fake, method, path string, form url.Values, out any) int {
	t.Helper()
	var body *strings.Reader
	if method == http.MethodPost {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
		if form != nil {
			path += "?" + form.Encode()
		}
	}
	req, err := http.NewRequest(method, f.URL()+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

// pay creates a succeeded PaymentIntent of 19.90 EUR for attempt.
func pay(t *testing.T, f *stripefake.Fake, attempt string) stripe.PaymentIntent {
	t.Helper()
	var pi stripe.PaymentIntent
	form := url.Values{"amount": {"1990"}, "currency": {"eur"}, "payment_method": {stripefake.PMVisa}, "confirm": {"true"},
		"metadata[payd_order]": {"ord-" + attempt}, "metadata[payd_attempt]": {attempt}}
	if st := call(t, f, http.MethodPost, "/v1/payment_intents", form, &pi); st != 200 || pi.Status != stripe.PaymentIntentStatusSucceeded {
		t.Fatalf("create = %d %+v", st, pi)
	}
	return pi
}

// types lists the types of the events about object id, in order, each
// checked to verify and to read as a stripe-go event of the pinned version.
func types(t *testing.T, f *stripefake.Fake, id string) []string {
	t.Helper()
	var out []string
	for _, e := range f.Events() {
		ev, err := webhook.ConstructEvent(e.Body, f.Sign(e.Body, time.Now()), f.Secret)
		if err != nil {
			t.Fatalf("event %s does not verify: %v", e.ID, err)
		}
		if ev.Data.Object["id"] == id {
			out = append(out, string(ev.Type))
		}
	}
	return out
}

func dispute(t *testing.T, f *stripefake.Fake, id string) stripe.Dispute {
	t.Helper()
	var d stripe.Dispute
	if st := call(t, f, http.MethodGet, "/v1/disputes/"+id, url.Values{"expand[0]": {"payment_intent"}}, &d); st != 200 {
		t.Fatalf("GET dispute %s = %d", id, st)
	}
	return d
}

// A chargeback withdraws its amount when it opens and gives it back when
// won, each a balance transaction of the dispute and an event, in
// Stripe's order; an inquiry moves no money unless it is escalated.
func TestDisputeLifecycle(t *testing.T) {
	f := stripefake.New(t.Cleanup)
	pi := pay(t, f, "att-1")
	dp := f.Dispute(pi.ID)
	if err := f.UpdateDispute(dp, "under_review"); err != nil {
		t.Fatal(err)
	}
	if err := f.CloseDispute(dp, "won"); err != nil {
		t.Fatal(err)
	}
	want := []string{"charge.dispute.created", "charge.dispute.funds_withdrawn", "charge.dispute.updated", "charge.dispute.closed", "charge.dispute.funds_reinstated"}
	if got := types(t, f, dp); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("events = %v, want %v", got, want)
	}
	d := dispute(t, f, dp)
	if d.Status != stripe.DisputeStatusWon || d.Amount != 1990 || d.Currency != "eur" || d.Reason != "fraudulent" ||
		d.PaymentIntent == nil || d.PaymentIntent.Metadata["payd_attempt"] != "att-1" || d.Charge == nil || d.Charge.ID != pi.LatestCharge.ID ||
		len(d.BalanceTransactions) != 2 || d.BalanceTransactions[0].Amount != -1990 || d.BalanceTransactions[1].Amount != 1990 {
		t.Fatalf("dispute = %+v", d)
	}
	if err := f.CloseDispute(dp, "lost"); err == nil {
		t.Fatal("a closed dispute closed again")
	}

	pi2 := pay(t, f, "att-2")
	inq := f.OpenDispute(pi2.ID, stripefake.DisputeOptions{Inquiry: true, Amount: 500, Reason: "general"})
	if err := f.CloseDispute(inq, "won"); err == nil {
		t.Fatal("an inquiry won without a chargeback")
	}
	if err := f.UpdateDispute(inq, "needs_response"); err != nil {
		t.Fatal(err)
	}
	if err := f.CloseDispute(inq, "warning_closed"); err == nil {
		t.Fatal("a chargeback closed as an inquiry")
	}
	if err := f.CloseDispute(inq, "lost"); err != nil {
		t.Fatal(err)
	}
	want = []string{"charge.dispute.created", "charge.dispute.updated", "charge.dispute.funds_withdrawn", "charge.dispute.closed"}
	if got := types(t, f, inq); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("inquiry's events = %v, want %v", got, want)
	}
	if d := dispute(t, f, inq); d.Status != stripe.DisputeStatusLost || len(d.BalanceTransactions) != 1 || d.BalanceTransactions[0].Amount != -500 {
		t.Fatalf("escalated inquiry = %+v", d)
	}

	closed := f.OpenDispute(pay(t, f, "att-3").ID, stripefake.DisputeOptions{Inquiry: true})
	if err := f.CloseDispute(closed, "warning_closed"); err != nil {
		t.Fatal(err)
	}
	if d := dispute(t, f, closed); d.Status != stripe.DisputeStatusWarningClosed || len(d.BalanceTransactions) != 0 || f.DisputeStatus(closed) != "warning_closed" {
		t.Fatalf("closed inquiry = %+v", d)
	}
	if err := f.UpdateDispute("dp_nope", "under_review"); err == nil {
		t.Fatal("an unknown dispute updated")
	}
}

// A Charge is read by its ID, disputed and refunded as it stands, its
// PaymentIntent expanded when asked; it carries none of the PaymentIntent's
// metadata, as on Stripe. A PaymentIntent's latest_charge expands to it.
func TestChargeAndExpand(t *testing.T) {
	f := stripefake.New(t.Cleanup)
	pi := pay(t, f, "att-c")
	if _, err := f.RefundOutside(pi.ID, 300); err != nil {
		t.Fatal(err)
	}
	f.Dispute(pi.ID)
	var ch stripe.Charge
	if st := call(t, f, http.MethodGet, "/v1/charges/"+pi.LatestCharge.ID, url.Values{"expand[]": {"payment_intent"}}, &ch); st != 200 ||
		ch.AmountRefunded != 300 || !ch.Disputed || ch.Status != stripe.ChargeStatusSucceeded || len(ch.Metadata) != 0 ||
		ch.PaymentIntent == nil || ch.PaymentIntent.Metadata["payd_order"] != "ord-att-c" {
		t.Fatalf("GET charge = %d %+v", st, ch)
	}
	var got stripe.PaymentIntent
	if st := call(t, f, http.MethodGet, "/v1/payment_intents/"+pi.ID, url.Values{"expand[0]": {"latest_charge"}}, &got); st != 200 ||
		got.LatestCharge == nil || got.LatestCharge.AmountRefunded != 300 || !got.LatestCharge.Disputed {
		t.Fatalf("GET payment intent expanded = %d %+v", st, got.LatestCharge)
	}
	if st := call(t, f, http.MethodGet, "/v1/charges/ch_nope", nil, nil); st != 404 {
		t.Fatalf("GET unknown charge = %d, want 404", st)
	}
}

// Refunds and disputes list newest first, by created range, charge or
// PaymentIntent, a page at a time, expanded as asked.
func TestLists(t *testing.T) {
	f := stripefake.New(t.Cleanup)
	base := time.Unix(1_800_000_000, 0)
	clock := base
	f.SetNow(func() time.Time { return clock })
	var pis []string
	for i := range 5 {
		clock = base.Add(time.Duration(i) * time.Second)
		pi := pay(t, f, "att-l"+string(rune('a'+i)))
		pis = append(pis, pi.ID)
		if _, err := f.RefundOutside(pi.ID, 100); err != nil {
			t.Fatal(err)
		}
		f.Dispute(pi.ID)
	}
	if _, err := f.RefundOutside(pis[0], 100); err != nil {
		t.Fatal(err)
	}
	if _, err := f.RefundOutside(pis[0], 99999); err == nil {
		t.Fatal("a refund beyond the charge was made")
	}
	for _, path := range []string{"/v1/refunds", "/v1/disputes"} {
		var page struct {
			HasMore bool `json:"has_more"`
			Data    []struct {
				ID            string          `json:"id"`
				Created       int64           `json:"created"`
				PaymentIntent json.RawMessage `json:"payment_intent"`
			} `json:"data"`
		}
		q := url.Values{"created[gte]": {itoa(base.Add(time.Second).Unix())}, "created[lt]": {itoa(base.Add(4 * time.Second).Unix())},
			"limit": {"2"}, "expand[0]": {"data.payment_intent"}}
		call(t, f, http.MethodGet, path, q, &page)
		if len(page.Data) != 2 || !page.HasMore || page.Data[0].Created != base.Add(3*time.Second).Unix() ||
			!strings.Contains(string(page.Data[0].PaymentIntent), `"payd_attempt":"att-ld"`) {
			t.Fatalf("%s first page = %+v", path, page)
		}
		q.Set("starting_after", page.Data[1].ID)
		call(t, f, http.MethodGet, path, q, &page)
		if len(page.Data) != 1 || page.HasMore || page.Data[0].Created != base.Add(time.Second).Unix() {
			t.Fatalf("%s second page = %+v", path, page)
		}
		call(t, f, http.MethodGet, path, url.Values{"payment_intent": {pis[0]}}, &page)
		if want := map[string]int{"/v1/refunds": 2, "/v1/disputes": 1}[path]; len(page.Data) != want || string(page.Data[0].PaymentIntent) != `"`+pis[0]+`"` {
			t.Fatalf("%s of %s = %+v, want %d", path, pis[0], page, want)
		}
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// GET /v1/disputes/{id} answers one dispute, its PaymentIntent expanded
// (with payd's metadata) when asked and an id otherwise; an unknown id is
// Stripe's 404 resource_missing.
func TestDisputeByID(t *testing.T) {
	f := stripefake.New(t.Cleanup)
	pi := pay(t, f, "att-get")
	dp := f.Dispute(pi.ID)
	d := dispute(t, f, dp)
	if d.ID != dp || d.PaymentIntent == nil || d.PaymentIntent.ID != pi.ID ||
		d.PaymentIntent.Metadata["payd_attempt"] != "att-get" || d.PaymentIntent.Metadata["payd_order"] != "ord-att-get" ||
		d.Status != stripe.DisputeStatusNeedsResponse || d.Amount != 1990 {
		t.Errorf("GET dispute (expanded) = %+v", d)
	}
	var plain map[string]any
	if st := call(t, f, http.MethodGet, "/v1/disputes/"+dp, nil, &plain); st != 200 || plain["payment_intent"] != pi.ID {
		t.Errorf("GET dispute = %d %v, want payment_intent %s unexpanded", st, plain, pi.ID)
	}
	var e struct {
		Error struct {
			Type, Code string
		} `json:"error"`
	}
	for _, id := range []string{"dp_nope", pi.ID} {
		if st := call(t, f, http.MethodGet, "/v1/disputes/"+id, nil, &e); st != 404 || e.Error.Code != "resource_missing" || e.Error.Type != "invalid_request_error" {
			t.Errorf("GET dispute %s = %d %+v, want 404 resource_missing", id, st, e)
		}
	}
}
