package e2e

import (
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// problemFields checks what every problem answer carries for the caller
// (RFC 9457): instance is the request's path (no query), request_id is the
// X-Request-ID the answer was sent with, and type resolves to a page that
// describes the code.
func (s *stack) problemFields(t *testing.T, name string, r reply, wantInstance string) map[string]any {
	t.Helper()
	p := r.json(t)
	if got := p["instance"]; got != wantInstance {
		t.Errorf("%s: instance = %v, want %q (body %s)", name, got, wantInstance, r.Body)
	}
	rid := r.Header.Get("X-Request-ID")
	if got := p["request_id"]; rid == "" || got != rid {
		t.Errorf("%s: request_id = %v, want the X-Request-ID %q", name, got, rid)
	}
	typ, _ := p["type"].(string)
	if typ != "/problems/"+r.code(t) {
		t.Errorf("%s: type = %q, want /problems/%s", name, typ, r.code(t))
	}
	resp, err := http.Get(s.base + typ) // no token: the pages are public
	if err != nil {
		t.Fatalf("GET %s: %v", typ, err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), r.code(t)) {
		t.Errorf("%s: GET %s = %d %s, want 200 describing the code", name, typ, resp.StatusCode, page)
	}
	return p
}

// fieldErrors returns the params of a validation problem's errors list,
// sorted, and checks that each entry has a detail.
func fieldErrors(t *testing.T, p map[string]any) []string {
	t.Helper()
	list, _ := p["errors"].([]any)
	var params []string
	for _, e := range list {
		m, _ := e.(map[string]any)
		param, _ := m["param"].(string)
		detail, _ := m["detail"].(string)
		if param == "" || detail == "" {
			t.Errorf("errors entry %v: want a param and a detail", e)
		}
		params = append(params, param)
	}
	sort.Strings(params)
	return params
}

// TestProblemsNameOccurrenceAndEveryField: a refused request says where
// (instance), which request (request_id), what the code means (type, a page
// that exists) and every field that is wrong, not only the first.
func TestProblemsNameOccurrenceAndEveryField(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, token := s.register("pia@example.com")
		before := s.snapshot()

		bad := map[string]any{"currency": "EURO", "items": []map[string]any{
			{"sku": "a", "name": "A", "quantity": 1, "unit_price": "12.3x"},
			{"sku": "b", "name": " ", "quantity": 1, "unit_price": "1.00"},
		}}
		r := s.do(request{method: "POST", path: "/v1/orders", token: testMerchantKey, body: bad}) // custom lines: the merchant's
		if r.Status != http.StatusBadRequest || r.code(t) != "validation_failed" {
			t.Fatalf("create order with three bad fields = %d %s, want 400 validation_failed", r.Status, r.Body)
		}
		p := s.problemFields(t, "create order", r, "/v1/orders")
		want := []string{"currency", "items[0].unit_price", "items[1].name"}
		if got := fieldErrors(t, p); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("create order errors = %v, want %v", got, want)
		}
		if d, _ := p["detail"].(string); !strings.Contains(d, "currency") || !strings.Contains(d, "items[1].name") {
			t.Errorf("create order detail = %q, want a summary naming every field", d)
		}

		r = s.do(request{method: "POST", path: "/v1/customers", key: uuid.NewString(), body: `{"email":"nope","name":""}`})
		if r.Status != http.StatusBadRequest {
			t.Fatalf("register with two bad fields = %d %s, want 400", r.Status, r.Body)
		}
		p = s.problemFields(t, "register", r, "/v1/customers")
		if got := fieldErrors(t, p); strings.Join(got, ",") != "email,name" {
			t.Errorf("register errors = %v, want [email name]", got)
		}

		// Wrong JSON types and unknown fields are all listed too.
		r = s.do(request{method: "POST", path: "/v1/orders", token: token,
			body: `{"currency":1,"items":[{"sku":"a","name":"A","quantity":"1","unit_price":1.5}],"coupon":"x"}`})
		p = s.problemFields(t, "wrong types", r, "/v1/orders")
		want = []string{"coupon", "currency", "items[0].quantity", "items[0].unit_price"}
		if got := fieldErrors(t, p); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("wrong types errors = %v, want %v", got, want)
		}

		r = s.do(request{method: "GET", path: "/v1/orders?limit=1000&status=lost", token: token})
		p = s.problemFields(t, "list", r, "/v1/orders")
		if got := fieldErrors(t, p); strings.Join(got, ",") != "limit,status" {
			t.Errorf("list errors = %v, want [limit status]", got)
		}

		missing := "/v1/orders/" + uuid.NewString() + "/pay"
		r = s.do(request{method: "POST", path: missing, token: token, key: uuid.NewString(), body: `{"payment_method":"pm_ok"}`})
		if r.Status != http.StatusNotFound {
			t.Fatalf("pay unknown order = %d %s, want 404", r.Status, r.Body)
		}
		s.problemFields(t, "pay unknown order", r, missing)

		r = s.do(request{method: "GET", path: "/v1/orders", token: "ptk_nope"})
		s.problemFields(t, "bad token", r, "/v1/orders")

		if after := s.snapshot(); after != before {
			t.Errorf("refused requests changed the database: %v → %v", before, after)
		}

		// Operators' requests too.
		id := s.order(token, "5.00")
		before = s.snapshot()
		refund := "/v1/admin/orders/" + id + "/refund"
		r = s.do(request{method: "POST", path: refund, token: testAdminToken, key: uuid.NewString(), body: `{"amount":"1,00","reason":" "}`})
		p = s.problemFields(t, "refund", r, refund)
		if got := fieldErrors(t, p); strings.Join(got, ",") != "amount,reason" {
			t.Errorf("refund errors = %v, want [amount reason]", got)
		}
		resolve := "/v1/admin/reconciliations/" + uuid.NewString() + "/discrepancies/" + uuid.NewString() + "/resolve"
		r = s.do(request{method: "POST", path: resolve, token: testAdminToken, key: uuid.NewString(),
			body: map[string]string{"action": "delete", "note": strings.Repeat("n", 1001)}})
		p = s.problemFields(t, "resolve", r, resolve)
		if got := fieldErrors(t, p); strings.Join(got, ",") != "action,note" {
			t.Errorf("resolve errors = %v, want [action note]", got)
		}
		r = s.do(request{method: "GET", path: "/v1/admin/orders?limit=0&status=lost&from=yesterday&to=2026-01-01", token: testAdminToken})
		p = s.problemFields(t, "admin search", r, "/v1/admin/orders")
		if got := fieldErrors(t, p); strings.Join(got, ",") != "from,limit,status,to" {
			t.Errorf("admin search errors = %v, want [from limit status to]", got)
		}
		if after := s.snapshot(); after != before {
			t.Errorf("refused requests changed the database: %v → %v", before, after)
		}
	})
}

// TestWrongKindOfToken: a valid token of the wrong kind is 403 forbidden (the
// caller is known, the route is not theirs); a missing or unknown token
// stays 401 with WWW-Authenticate.
func TestWrongKindOfToken(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, token := s.register("quin@example.com")
		id := s.order(token, "3.00")
		tests := []struct {
			name, method, path, token string
			status                    int
			code                      string
		}{
			{"customer token on an admin route", "GET", "/v1/admin/orders", token, 403, "forbidden"},
			{"customer token on an admin order", "GET", "/v1/admin/orders/" + id, token, 403, "forbidden"},
			{"admin token on a customer route", "GET", "/v1/orders", testAdminToken, 403, "forbidden"},
			{"admin token on a customer order", "GET", "/v1/orders/" + id, testAdminToken, 403, "forbidden"},
			{"unknown token on an admin route", "GET", "/v1/admin/orders", "ptk_nope", 401, "unauthorized"},
			{"unknown token on a customer route", "GET", "/v1/orders", "ptk_nope", 401, "unauthorized"},
			{"no token on an admin route", "GET", "/v1/admin/orders", "", 401, "unauthorized"},
		}
		for _, tt := range tests {
			r := s.do(request{method: tt.method, path: tt.path, token: tt.token})
			if r.Status != tt.status || r.code(t) != tt.code {
				t.Errorf("%s: %s %s = %d %s, want %d %s", tt.name, tt.method, tt.path, r.Status, r.Body, tt.status, tt.code)
				continue
			}
			s.problemFields(t, tt.name, r, tt.path)
			if r.Status == http.StatusUnauthorized && r.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: 401 without WWW-Authenticate", tt.name)
			}
		}
	})
}

// TestProblemPages: /problems/{code} is public; an unknown code is a 404
// problem.
func TestProblemPages(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		for _, code := range []string{"validation_failed", "forbidden", "card_declined", "idempotency_key_reused", "service_unavailable"} {
			r := s.do(request{method: "GET", path: "/problems/" + code})
			if r.Status != http.StatusOK || !strings.Contains(string(r.Body), code) {
				t.Errorf("GET /problems/%s = %d %s, want 200 describing it", code, r.Status, r.Body)
			}
		}
		r := s.do(request{method: "GET", path: "/problems/no_such_code"})
		if r.Status != http.StatusNotFound || r.code(t) != "not_found" {
			t.Errorf("GET /problems/no_such_code = %d %s, want 404 not_found", r.Status, r.Body)
		}
	})
}

// TestStoredProblemKeepsItsOccurrence: a problem stored under a key (a
// failed pay) is the answer of the request that produced it: looked up by
// key, it keeps that request's request_id, the one payd's logs know it by;
// a retry that runs again answers with its own.
func TestStoredProblemKeepsItsOccurrence(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, token := s.register("rue@example.com")
		id := s.order(token, "7.00")
		if r := s.pay(token, id, uuid.NewString(), "pm_ok"); r.Status != http.StatusOK {
			t.Fatalf("pay = %d %s, want 200", r.Status, r.Body)
		}
		key := uuid.NewString()
		first := s.pay(token, id, key, "pm_ok")
		if first.Status != http.StatusConflict || first.code(t) != "order_already_paid" {
			t.Fatalf("pay a paid order = %d %s, want 409 order_already_paid", first.Status, first.Body)
		}
		s.problemFields(t, "pay a paid order", first, "/v1/orders/"+id+"/pay")
		rec := s.do(request{method: "GET", path: "/v1/requests/" + key, token: token})
		if rec.Status != http.StatusOK {
			t.Fatalf("GET /v1/requests/%s = %d %s, want 200", key, rec.Status, rec.Body)
		}
		stored, _ := rec.json(t)["response"].(map[string]any)
		body, _ := stored["body"].(map[string]any)
		if got := body["request_id"]; got != first.Header.Get("X-Request-ID") {
			t.Errorf("stored problem request_id = %v, want the request's %q (record %s)", got, first.Header.Get("X-Request-ID"), rec.Body)
		}
		again := s.pay(token, id, key, "pm_ok")
		if rid := again.Header.Get("X-Request-ID"); again.json(t)["request_id"] != rid || rid == first.Header.Get("X-Request-ID") {
			t.Errorf("retry = %s with X-Request-ID %q, want its own request_id", again.Body, rid)
		}
	})
}
