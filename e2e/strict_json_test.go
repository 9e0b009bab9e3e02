package e2e

import (
	"net/http"
	"testing"

	"github.com/google/uuid"
)

// TestStrictJSON sends bodies that encoding/json would read leniently
// (a member twice, invalid UTF-8, a lone surrogate, control characters)
// to several endpoints: each is a 400 validation_failed naming the field,
// with nothing written and the key left free.
func TestStrictJSON(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, token := s.register(newEmail())
		id := s.order(token, "10.00")
		paid := s.paidOrder(token, "10.00")
		line := func(name string) string {
			return `{"currency":"USD","items":[{"sku":"a","name":"` + name + `","quantity":1,"unit_price":"1.00"}]}`
		}
		pay := "/v1/orders/" + id + "/pay"
		refund := "/v1/admin/orders/" + paid + "/refund"
		payKey := uuid.NewString()
		tests := []struct {
			name  string
			req   request
			field string
		}{
			{"currency twice", request{method: "POST", path: "/v1/orders", token: token, body: `{"currency":"EUR","items":[{"sku":"a","name":"A","quantity":1,"unit_price":"1.00"}],"currency":"USD"}`}, "currency"},
			{"sku twice in a line", request{method: "POST", path: "/v1/orders", token: token, body: `{"currency":"USD","items":[{"sku":"a","name":"A","quantity":1,"unit_price":"1.00","sku":"b"}]}`}, "items[0].sku"},
			{"invalid UTF-8 in a name", request{method: "POST", path: "/v1/orders", token: token, body: line("A\xff\xfeB")}, "items[0].name"},
			{"lone surrogate in a name", request{method: "POST", path: "/v1/orders", token: token, body: line(`A\ud800B`)}, "items[0].name"},
			{"NUL in a name", request{method: "POST", path: "/v1/orders", token: token, body: line(`A\u0000B`)}, "items[0].name"},
			{"line break in a name", request{method: "POST", path: "/v1/orders", token: token, body: line(`A\nB`)}, "items[0].name"},
			{"C1 control in a name", request{method: "POST", path: "/v1/orders", token: token, body: line("A\u0085B")}, "items[0].name"},
			{"NUL in a customer's name", request{method: "POST", path: "/v1/customers", key: uuid.NewString(), body: `{"email":"nul@example.com","name":"X\u0000"}`}, "name"},
			{"email twice", request{method: "POST", path: "/v1/customers", key: uuid.NewString(), body: `{"email":"a@example.com","name":"X","email":"b@example.com"}`}, "email"},
			{"payment method twice", request{method: "POST", path: pay, token: token, key: payKey, body: `{"payment_method":"pm_declined","payment_method":"pm_ok"}`}, "payment_method"},
			{"bell in a refund reason", request{method: "POST", path: refund, token: testAdminToken, key: uuid.NewString(), body: `{"reason":"asked\u0007"}`}, "reason"},
			{"amount twice in a refund", request{method: "POST", path: refund, token: testAdminToken, key: uuid.NewString(), body: `{"amount":"1.00","reason":"asked","amount":"9.00"}`}, "amount"},
		}
		before := s.snapshot()
		for _, tt := range tests {
			r := s.do(tt.req)
			if r.Status != http.StatusBadRequest || r.problemCode() != "validation_failed" {
				t.Errorf("%s: %s %s = %d %s, want 400 validation_failed", tt.name, tt.req.method, tt.req.path, r.Status, r.Body)
				continue
			}
			if got := problemFields(t, r); len(got) != 1 || got[0] != tt.field {
				t.Errorf("%s: fields = %v, want [%s] (%s)", tt.name, got, tt.field, r.Body)
			}
		}
		if after := s.snapshot(); after != before {
			t.Errorf("database changed by refused bodies: before %v, after %v", before, after)
		}
		// The refused pay left its key free.
		if r := s.pay(token, id, payKey, "pm_ok"); r.Status != http.StatusOK {
			t.Errorf("pay with the refused key, corrected = %d %s, want 200", r.Status, r.Body)
		}
		// A tab and a line break are writing in a free-text reason.
		if r := s.admin("POST", refund, uuid.NewString(), `{"amount":"1.00","reason":"customer asked:\n\tdamaged box"}`); r.Status != http.StatusOK {
			t.Errorf("refund with a two-line reason = %d %s, want 200", r.Status, r.Body)
		}
	})
}

// problemFields lists the params a validation_failed problem names.
func problemFields(t *testing.T, r reply) []string {
	t.Helper()
	var out []string
	errs, _ := r.json(t)["errors"].([]any)
	for _, e := range errs {
		if m, ok := e.(map[string]any); ok {
			p, _ := m["param"].(string)
			out = append(out, p)
		}
	}
	return out
}
