package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestSearchShowsLastAttempt: the operators' search shows each order's
// newest payment attempt, a decline with the provider's reason, and
// ?attempt=failed lists the orders a card was declined for, whether paid
// since or not, and no other; an attempt status payd does not know is
// refused with the list of those it does. `payd admin orders search
// -attempt failed` shows the same.
func TestSearchShowsLastAttempt(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, tok := s.register(newEmail())
		declined := s.order(tok, "4.00")
		if r := s.pay(tok, declined, uuid.NewString(), "pm_insufficient_funds"); r.Status != http.StatusPaymentRequired {
			t.Fatalf("pay with pm_insufficient_funds = %d %s, want 402", r.Status, r.Body)
		}
		retried := s.order(tok, "5.00")
		if r := s.pay(tok, retried, uuid.NewString(), "pm_declined"); r.Status != http.StatusPaymentRequired {
			t.Fatalf("pay with pm_declined = %d %s, want 402", r.Status, r.Body)
		}
		if r := s.pay(tok, retried, uuid.NewString(), "pm_ok"); r.Status != http.StatusOK {
			t.Fatalf("pay again with pm_ok = %d %s, want 200", r.Status, r.Body)
		}
		paid := s.paidOrder(tok, "6.00")
		untried := s.order(tok, "7.00")

		type attempt struct {
			Status      string  `json:"status"`
			FailureCode *string `json:"failure_code"`
		}
		type page struct {
			Data []struct {
				ID          string   `json:"id"`
				Status      string   `json:"status"`
				LastAttempt *attempt `json:"last_attempt"`
			} `json:"data"`
		}
		search := func(query string) map[string]*attempt {
			t.Helper()
			r := s.do(request{method: "GET", path: "/v1/admin/orders?" + query, token: testAdminToken})
			if r.Status != http.StatusOK {
				t.Fatalf("search %s = %d %s", query, r.Status, r.Body)
			}
			out := map[string]*attempt{}
			for _, o := range decode[page](t, r).Data {
				out[o.ID] = o.LastAttempt
			}
			return out
		}
		all := search("limit=100")
		if a := all[declined]; a == nil || a.Status != "failed" || a.FailureCode == nil || *a.FailureCode != "insufficient_funds" {
			t.Errorf("the declined order's last attempt = %+v, want failed (insufficient_funds)", a)
		}
		if a := all[retried]; a == nil || a.Status != "succeeded" || a.FailureCode != nil {
			t.Errorf("the order paid after a decline: last attempt %+v, want succeeded", a)
		}
		if a, ok := all[untried]; !ok || a != nil {
			t.Errorf("the order nobody paid for: last attempt %+v (listed %v), want null", a, ok)
		}
		failed := search("attempt=failed")
		if _, ok := failed[declined]; !ok || len(failed) != 2 {
			t.Errorf("attempt=failed lists %v, want the two orders with a decline", failed)
		}
		if _, ok := failed[retried]; !ok {
			t.Error("attempt=failed leaves out the order paid after its decline")
		}
		if _, ok := failed[paid]; ok {
			t.Error("attempt=failed lists an order never declined")
		}
		r := s.do(request{method: "GET", path: "/v1/admin/orders?attempt=declined", token: testAdminToken})
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "failed") || !strings.Contains(string(r.Body), "succeeded") {
			t.Errorf("attempt=declined = %d %s, want 400 listing the attempt statuses", r.Status, r.Body)
		}
		// A status an order never has (declined is an attempt's) is
		// refused with the statuses an order has.
		r = s.do(request{method: "GET", path: "/v1/admin/orders?status=declined", token: testAdminToken})
		if body := string(r.Body); r.Status != http.StatusBadRequest || !strings.Contains(body, "validation_failed") ||
			!strings.Contains(body, "pending, processing, authorized, paid, refunded, cancelled, expired") {
			t.Errorf("status=declined = %d %s, want 400 validation_failed listing the order statuses", r.Status, r.Body)
		}
		out := s.mustCLI("orders", "search", "-attempt", "failed")
		wantLines(t, "orders search -attempt failed", out, declined, `failed \(insufficient_funds\)`, retried)
		if strings.Contains(out, paid) {
			t.Errorf("orders search -attempt failed lists the order never declined:\n%s", out)
		}
	})
}
