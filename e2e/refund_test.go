package e2e

import (
	"bytes"
	"github.com/payd/payd/client"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestRefunds: partial refunds add up, the order becomes refunded exactly
// when nothing is left, and every refusal is a 4xx problem that reserves
// nothing and reaches the provider not at all.
func TestRefunds(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, tok := s.register("rae@example.com")
		id := s.paidOrder(tok, "10.00")
		charge := s.sandboxCharge(id, "succeeded")

		steps := []struct{ amount, refunded, status string }{
			{"2.50", "2.50", "paid"},
			{"0.01", "2.51", "paid"},
			{"7.48", "9.99", "paid"},
			{"0.01", "10.00", "refunded"},
		}
		for _, st := range steps {
			key := uuid.NewString()
			r := s.refund(id, key, st.amount)
			if r.Status != http.StatusOK {
				t.Fatalf("refund %s = %d %s, want 200", st.amount, r.Status, r.Body)
			}
			got := decode[client.RefundResult](t, r)
			if got.Refund.Amount != st.amount || got.Refund.Status != "succeeded" || got.Refund.Kind != "manual" ||
				got.Refund.ProviderChargeId != charge || got.Refund.RequestId == nil || *got.Refund.RequestId != key {
				t.Errorf("refund %s = %+v, want a succeeded manual refund of %s on %s under %s", st.amount, got.Refund, st.amount, charge, key)
			}
			if got.Order.RefundedAmount != st.refunded || string(got.Order.Status) != st.status {
				t.Errorf("after refunding %s: order refunded %s, %s; want %s, %s", st.amount, got.Order.RefundedAmount, got.Order.Status, st.refunded, st.status)
			}
			if n := s.auditRows("refund", key, 200); n != 1 {
				t.Errorf("audit rows for refund %s = %d, want 1", key, n)
			}
		}
		if got := s.providerRefunded(charge); got != "10.00" {
			t.Errorf("provider refunded %s, want 10.00", got)
		}

		// A second order, half refunded, refuses what exceeds the rest.
		other := s.paidOrder(tok, "5.00")
		if r := s.refund(other, uuid.NewString(), "3.00"); r.Status != http.StatusOK {
			t.Fatalf("refund 3.00 = %d %s", r.Status, r.Body)
		}
		pending := s.order(tok, "4.00")
		before := s.refundState()
		tooLargeKey := uuid.NewString()
		refusals := []struct {
			name   string
			req    request
			status int
			code   string
		}{
			{"more than is left", request{method: "POST", path: "/v1/admin/orders/" + other + "/refund", token: testAdminToken, key: tooLargeKey,
				body: `{"amount":"2.01","reason":"too much"}`}, 409, "refund_too_large"},
			{"more than was paid", request{method: "POST", path: "/v1/admin/orders/" + other + "/refund", token: testAdminToken, key: uuid.NewString(),
				body: `{"amount":"5.01","reason":"too much"}`}, 409, "refund_too_large"},
			{"fully refunded order", request{method: "POST", path: "/v1/admin/orders/" + id + "/refund", token: testAdminToken, key: uuid.NewString(),
				body: `{"reason":"again"}`}, 409, "order_not_refundable"},
			{"unpaid order", request{method: "POST", path: "/v1/admin/orders/" + pending + "/refund", token: testAdminToken, key: uuid.NewString(),
				body: `{"reason":"never paid"}`}, 409, "order_not_refundable"},
			{"unknown order", request{method: "POST", path: "/v1/admin/orders/" + uuid.NewString() + "/refund", token: testAdminToken, key: uuid.NewString(),
				body: `{"reason":"who"}`}, 404, "order_not_found"},
			{"no key", request{method: "POST", path: "/v1/admin/orders/" + other + "/refund", token: testAdminToken,
				body: `{"amount":"1.00","reason":"no key"}`}, 400, "idempotency_key_missing"},
			{"bad key", request{method: "POST", path: "/v1/admin/orders/" + other + "/refund", token: testAdminToken, key: "no spaces allowed",
				body: `{"amount":"1.00","reason":"bad key"}`}, 400, "idempotency_key_invalid"},
			{"no reason", request{method: "POST", path: "/v1/admin/orders/" + other + "/refund", token: testAdminToken, key: uuid.NewString(),
				body: `{"amount":"1.00"}`}, 400, "validation_failed"},
			{"zero", request{method: "POST", path: "/v1/admin/orders/" + other + "/refund", token: testAdminToken, key: uuid.NewString(),
				body: `{"amount":"0.00","reason":"zero"}`}, 400, "validation_failed"},
			{"negative", request{method: "POST", path: "/v1/admin/orders/" + other + "/refund", token: testAdminToken, key: uuid.NewString(),
				body: `{"amount":"-1.00","reason":"negative"}`}, 400, "validation_failed"},
			{"too precise", request{method: "POST", path: "/v1/admin/orders/" + other + "/refund", token: testAdminToken, key: uuid.NewString(),
				body: `{"amount":"1.001","reason":"precise"}`}, 400, "validation_failed"},
			{"amount as number", request{method: "POST", path: "/v1/admin/orders/" + other + "/refund", token: testAdminToken, key: uuid.NewString(),
				body: `{"amount":1,"reason":"number"}`}, 400, "validation_failed"},
			{"unknown field", request{method: "POST", path: "/v1/admin/orders/" + other + "/refund", token: testAdminToken, key: uuid.NewString(),
				body: `{"amount":"1.00","reason":"x","currency":"USD"}`}, 400, "validation_failed"},
		}
		for _, tt := range refusals {
			r := s.do(tt.req)
			if r.Status != tt.status || r.code(t) != tt.code {
				t.Errorf("%s: refund = %d %s, want %d %s", tt.name, r.Status, r.Body, tt.status, tt.code)
			}
		}
		if after := s.refundState(); after != before {
			t.Errorf("refusals changed refunds: before %v, after %v", before, after)
		}
		if got := s.providerRefunded(s.sandboxCharge(other, "succeeded")); got != "3.00" {
			t.Errorf("provider refunded %s of the second order, want 3.00", got)
		}
		if n := s.auditRows("refund", tooLargeKey, 409); n != 1 {
			t.Errorf("audit rows for the refused refund = %d, want 1", n)
		}
		// The rest is still refundable, in full, without an amount.
		r := s.refund(other, uuid.NewString(), "")
		if got := decode[client.RefundResult](t, r); r.Status != http.StatusOK || got.Refund.Amount != "2.00" || got.Order.Status != "refunded" {
			t.Errorf("refund the rest = %d %s, want 200 refunding 2.00, order refunded", r.Status, r.Body)
		}
	})
}

// refundState is what a refused refund must not change: the orders'
// refunded totals and statuses, and the refunds recorded.
func (s *stack) refundState() [3]int64 {
	s.t.Helper()
	var refunded int64
	if err := s.db.Gorm().Raw("SELECT COALESCE(SUM(refunded_minor), 0) FROM orders").Scan(&refunded).Error; err != nil {
		s.t.Fatal(err)
	}
	return [3]int64{refunded, s.count("orders WHERE status = 'refunded'"), s.count("refunds")}
}

// providerRefunded is how much the sandbox says it gave back of a charge.
func (s *stack) providerRefunded(chargeID string) string {
	s.t.Helper()
	all, err := s.sandbox.Charges(s.t.Context())
	if err != nil {
		s.t.Fatal(err)
	}
	for _, c := range all {
		if c.ID == chargeID {
			return c.RefundedAmount.StringFixed(2)
		}
	}
	s.t.Fatalf("no sandbox charge %s", chargeID)
	return ""
}

// TestConcurrentRefunds: ten operators refund one order at once, each with
// their own key. The guarded reservation lets through exactly what was
// paid and not a cent more, at payd and at the provider.
func TestConcurrentRefunds(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, tok := s.register("cid@example.com")
		for _, tt := range []struct{ total, each, refunded, status string }{
			{"10.00", "2.00", "10.00", "refunded"}, // five fit exactly
			{"10.00", "3.00", "9.00", "paid"},      // three fit, 1.00 stays
		} {
			id := s.paidOrder(tok, tt.total)
			replies := parallel(10, func(int) reply { return s.refund(id, uuid.NewString(), tt.each) })
			ok := 0
			for _, r := range replies {
				switch {
				case r.Status == http.StatusOK:
					ok++
				case r.Status == http.StatusConflict && (r.code(t) == "refund_too_large" || r.code(t) == "order_not_refundable"):
				default:
					t.Errorf("concurrent refund = %d %s, want 200 or 409", r.Status, r.Body)
				}
			}
			o := s.timeline(id).Order
			if o.RefundedAmount != tt.refunded || string(o.Status) != tt.status {
				t.Errorf("%s×10 of %s: order refunded %s, %s; want %s, %s", tt.each, tt.total, o.RefundedAmount, o.Status, tt.refunded, tt.status)
			}
			wantOK := map[string]int{"2.00": 5, "3.00": 3}[tt.each]
			if ok != wantOK {
				t.Errorf("%s×10 of %s: %d refunds succeeded, want %d", tt.each, tt.total, ok, wantOK)
			}
			if n := s.count("refunds WHERE order_id = ? AND status = 'succeeded'", id); n != int64(wantOK) {
				t.Errorf("succeeded refund rows = %d, want %d", n, wantOK)
			}
			if n := s.count("refunds WHERE order_id = ? AND status <> 'succeeded'", id); n != 0 {
				t.Errorf("refund rows not succeeded = %d, want 0", n)
			}
			charge := s.sandboxCharge(id, "succeeded")
			if got := s.providerRefunded(charge); got != tt.refunded {
				t.Errorf("provider refunded %s of %s, want %s", got, charge, tt.refunded)
			}
			if n := s.settlementRefunds(charge); n != wantOK {
				t.Errorf("provider refund lines for %s = %d, want %d", charge, n, wantOK)
			}
		}
	})
}

// TestRefundReplay: the same key refunds once however often, and however
// concurrently, it is sent — even after its idempotency record is gone,
// since the refund itself remembers the request ID.
func TestRefundReplay(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, tok := s.register("rex@example.com")
		id := s.paidOrder(tok, "9.00")
		charge := s.sandboxCharge(id, "succeeded")
		key := uuid.NewString()

		replies := parallel(10, func(int) reply { return s.refund(id, key, "4.00") })
		var first reply
		for _, r := range replies {
			if r.Status == http.StatusConflict && r.code(t) == "idempotency_key_in_use" {
				continue
			}
			if r.Status != http.StatusOK {
				t.Fatalf("refund with one key = %d %s, want 200", r.Status, r.Body)
			}
			if first.Body == nil {
				first = r
			} else if !bytes.Equal(first.Body, r.Body) {
				t.Errorf("replies differ:\n%s\n%s", first.Body, r.Body)
			}
		}
		again := s.refund(id, key, "4.00")
		if again.Status != http.StatusOK || !bytes.Equal(again.Body, first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("replay = %d %s (replayed %q), want the first answer replayed", again.Status, again.Body, again.Header.Get("Idempotent-Replayed"))
		}
		if r := s.refund(id, key, "1.00"); r.Status != http.StatusUnprocessableEntity || r.code(t) != "idempotency_key_reused" {
			t.Errorf("same key, other amount = %d %s, want 422 idempotency_key_reused", r.Status, r.Body)
		}
		if r := s.refund(s.paidOrder(tok, "9.00"), key, "4.00"); r.Status != http.StatusUnprocessableEntity || r.code(t) != "idempotency_key_reused" {
			t.Errorf("same key, other order = %d %s, want 422 idempotency_key_reused", r.Status, r.Body)
		}

		// The record expires; the refund still knows its request ID.
		if err := s.db.Gorm().Exec("DELETE FROM idempotency_records WHERE scope = 'admin'").Error; err != nil {
			t.Fatal(err)
		}
		late := s.refund(id, key, "4.00")
		if late.Status != http.StatusOK || decode[client.RefundResult](t, late).Refund.Id != decode[client.RefundResult](t, first).Refund.Id {
			t.Errorf("refund after the record expired = %d %s, want 200 with refund %s", late.Status, late.Body, decode[client.RefundResult](t, first).Refund.Id)
		}

		if got := s.providerRefunded(charge); got != "4.00" {
			t.Errorf("provider refunded %s, want 4.00", got)
		}
		if n := s.settlementRefunds(charge); n != 1 {
			t.Errorf("provider refunds = %d, want 1", n)
		}
		if n := s.count("refunds WHERE order_id = ?", id); n != 1 {
			t.Errorf("refund rows = %d, want 1", n)
		}
		if o := s.timeline(id).Order; o.RefundedAmount != "4.00" {
			t.Errorf("order refunded %s, want 4.00", o.RefundedAmount)
		}
		if n := s.count("audit_log WHERE action = 'refund' AND request_id = ? AND detail LIKE ?", key, `%"replayed":true%`); n < 1 {
			t.Errorf("audit rows for the replays = %d, want at least 1", n)
		}
	})
}

// settlementRefunds counts the refund lines of a charge in the sandbox's
// settlement files for the days the test ran: the provider's own count of
// refunds.
func (s *stack) settlementRefunds(chargeID string) int {
	s.t.Helper()
	n := 0
	for _, line := range strings.Split(s.settlementCSV(), "\n") {
		f := strings.Split(line, ",")
		if len(f) >= 8 && f[0] == chargeID && f[3] == "refund" {
			n++
		}
	}
	return n
}
