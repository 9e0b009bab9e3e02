package e2e

import (
	"encoding/json"
	"github.com/payd/payd/client"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payd/payd/handler"
)

// adminRoutes lists every operator route the server registers, read from
// the Echo router itself, so a route added later is covered too.
func adminRoutes(t *testing.T) []string {
	t.Helper()
	e := handler.New(handler.Deps{Log: slog.New(slog.DiscardHandler), Admin: &handler.Admin{}})
	var out []string
	for _, r := range e.Routes() {
		if strings.HasPrefix(r.Path, "/v1/admin") {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	slices.Sort(out)
	// The operator routes docs/guarantees.md#operators lists, all of which
	// must be among them.
	for _, want := range []string{
		"GET /v1/admin/orders", "GET /v1/admin/orders/:id", "POST /v1/admin/orders/:id/refund",
		"POST /v1/admin/reconciliations", "GET /v1/admin/reconciliations/:id",
		"POST /v1/admin/reconciliations/:id/discrepancies/:did/resolve", "GET /v1/admin/idempotency/:scope/:key",
	} {
		if !slices.Contains(out, want) {
			t.Errorf("admin routes %v lack %s", out, want)
		}
	}
	return out
}

// TestAdminRoutesNeedAdminToken: every operator route answers 401 without
// a token or with a wrong one, 403 with a customer's, and acts on nothing.
func TestAdminRoutesNeedAdminToken(t *testing.T) {
	routes := adminRoutes(t)
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, tok := s.register("sal@example.com")
		id := s.paidOrder(tok, "10.00")
		fill := strings.NewReplacer(":id", id, ":did", uuid.NewString(), ":scope", "admin", ":key", uuid.NewString())
		bodies := map[string]string{
			"refund": `{"amount":"1.00","reason":"x"}`, "reconciliations": `{"from":"2026-01-01T00:00:00Z","to":"2026-01-02T00:00:00Z"}`,
			"resolve": `{"action":"ignore","note":"x"}`,
		}
		before := s.adminState()
		for _, rt := range routes {
			method, path, _ := strings.Cut(rt, " ")
			path = fill.Replace(path)
			var body any
			if method == "POST" {
				body = bodies[path[strings.LastIndex(path, "/")+1:]]
			}
			for _, who := range []struct{ name, token string }{
				{"no token", ""}, {"wrong token", testAdminToken + "x"}, {"customer token", tok}, {"empty bearer", " "},
			} {
				r := s.do(request{method: method, path: path, token: who.token, key: uuid.NewString(), body: body})
				// A customer's token is valid, but not here: 403; anything else 401.
				wantStatus, wantCode := http.StatusUnauthorized, "unauthorized"
				if who.name == "customer token" {
					wantStatus, wantCode = http.StatusForbidden, "forbidden"
				}
				if r.Status != wantStatus {
					t.Errorf("%s %s with %s = %d %s, want %d", method, path, who.name, r.Status, r.Body, wantStatus)
					continue
				}
				if c := r.code(t); c != wantCode {
					t.Errorf("%s %s with %s: code %q, want %s", method, path, who.name, c, wantCode)
				}
				if r.Status == http.StatusUnauthorized && r.Header.Get("WWW-Authenticate") == "" {
					t.Errorf("%s %s with %s: 401 without WWW-Authenticate", method, path, who.name)
				}
			}
		}
		if after := s.adminState(); after != before {
			t.Errorf("unauthenticated admin calls changed the database: %v → %v", before, after)
		}
		if o := s.timeline(id).Order; o.RefundedAmount != "0.00" {
			t.Errorf("order refunded %s by unauthenticated calls, want 0.00", o.RefundedAmount)
		}
	})
}

// adminState counts what an operator action could write.
func (s *stack) adminState() [6]int64 {
	return [6]int64{s.count("audit_log"), s.count("refunds"), s.count("reconciliation_runs"),
		s.count("discrepancies"), s.count("idempotency_records"), s.count("orders WHERE status = 'refunded'")}
}

// TestCustomerIsolation: one customer can neither see nor act on another's
// orders, nor read another's request results — not even by sending the
// very key the other used; keys are scoped to their caller.
func TestCustomerIsolation(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, ann := s.register("ann@example.com")
		_, ben := s.register("ben@example.com")
		paid, open := s.order(ann, "10.00"), s.order(ann, "3.00")
		annKey := uuid.NewString()
		if r := s.pay(ann, paid, annKey, "pm_ok"); r.Status != http.StatusOK {
			t.Fatalf("pay = %d %s", r.Status, r.Body)
		}
		before := s.snapshot()
		for _, tt := range []struct {
			name string
			req  request
			code string
		}{
			{"read", request{method: "GET", path: "/v1/orders/" + paid, token: ben}, "order_not_found"},
			{"pay with ann's key", request{method: "POST", path: "/v1/orders/" + paid + "/pay", token: ben, key: annKey, body: `{"payment_method":"pm_ok"}`}, "order_not_found"},
			{"pay", request{method: "POST", path: "/v1/orders/" + open + "/pay", token: ben, key: uuid.NewString(), body: `{"payment_method":"pm_ok"}`}, "order_not_found"},
			{"cancel", request{method: "POST", path: "/v1/orders/" + open + "/cancel", token: ben, key: uuid.NewString()}, "order_not_found"},
			{"events", request{method: "GET", path: "/v1/orders/" + paid + "/events", token: ben}, "order_not_found"},
			{"request result", request{method: "GET", path: "/v1/requests/" + annKey, token: ben}, "request_not_found"},
		} {
			r := s.do(tt.req)
			if r.Status != http.StatusNotFound || r.code(t) != tt.code {
				t.Errorf("ben %s ann's = %d %s, want 404 %s", tt.name, r.Status, r.Body, tt.code)
			}
			// instance echoes ben's own request path (which holds the id he
			// sent), and only that: nothing else in the reply names ann's
			// order, and it reads exactly as the reply for an order that
			// does not exist.
			p := r.json(t)
			if p["instance"] != tt.req.path {
				t.Errorf("ben %s ann's: instance = %v, want his own path %s", tt.name, p["instance"], tt.req.path)
			}
			delete(p, "instance")
			if b, _ := json.Marshal(p); strings.Contains(string(b), paid) || strings.Contains(string(b), open) {
				t.Errorf("ben %s ann's: the reply names ann's order: %s", tt.name, r.Body)
			}
			ghost := tt.req
			ghost.path = strings.NewReplacer(paid, uuid.NewString(), open, uuid.NewString(), annKey, uuid.NewString()).Replace(ghost.path)
			g := s.do(ghost)
			q := g.json(t)
			delete(q, "instance")
			delete(p, "request_id")
			delete(q, "request_id")
			if g.Status != r.Status || !reflect.DeepEqual(p, q) {
				t.Errorf("ben %s ann's = %d %v, unknown = %d %v: want the same answer", tt.name, r.Status, p, g.Status, q)
			}
		}
		if after := s.snapshot(); after != before {
			t.Errorf("ben's attempts changed the database: %v → %v", before, after)
		}
		if n := s.charges(open); n != 0 {
			t.Errorf("ann's open order was charged %d times", n)
		}
		page := s.do(request{method: "GET", path: "/v1/orders", token: ben})
		if p := decode[client.OrderPage](t, page); page.Status != http.StatusOK || len(p.Data) != 0 {
			t.Errorf("ben's order list = %d %s, want empty", page.Status, page.Body)
		}

		// Ben's own request under the same key is his, and executes.
		own := s.order(ben, "2.00")
		if r := s.pay(ben, own, annKey, "pm_ok"); r.Status != http.StatusOK || r.Header.Get("Idempotent-Replayed") != "" {
			t.Errorf("ben pays his order with ann's key = %d (replayed %q) %s, want a fresh 200", r.Status, r.Header.Get("Idempotent-Replayed"), r.Body)
		}
		for _, c := range []struct{ token, order string }{{ann, paid}, {ben, own}} {
			r := s.do(request{method: "GET", path: "/v1/requests/" + annKey, token: c.token})
			if r.Status != http.StatusOK || !strings.Contains(string(r.Body), "/v1/orders/"+c.order+"/pay") {
				t.Errorf("GET /v1/requests/{key} = %d %s, want the record of the pay of %s", r.Status, r.Body, c.order)
			}
		}
	})
}

// TestAdminIdempotencyInspect: operators can inspect any caller's record;
// a registration's response stays sealed, so no token is shown.
func TestAdminIdempotencyInspect(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		regKey := uuid.NewString()
		reg := s.do(request{method: "POST", path: "/v1/customers", key: regKey, body: map[string]string{"email": "ida@example.com", "name": "Ida"}})
		if reg.Status != http.StatusCreated {
			t.Fatalf("register = %d %s", reg.Status, reg.Body)
		}
		m := reg.json(t)
		token, custID := m["token"].(string), m["customer"].(map[string]any)["id"].(string)
		id, payKey := s.order(token, "6.00"), uuid.NewString()
		if r := s.pay(token, id, payKey, "pm_ok"); r.Status != http.StatusOK {
			t.Fatalf("pay = %d %s", r.Status, r.Body)
		}

		r := s.admin("GET", "/v1/admin/idempotency/customer:"+custID+"/"+payKey, "", nil)
		rec := r.json(t)
		resp, _ := rec["response"].(map[string]any)
		if r.Status != http.StatusOK || rec["key"] != payKey || rec["scope"] != "customer:"+custID || rec["status"] != "succeeded" ||
			rec["path"] != "/v1/orders/"+id+"/pay" || rec["fingerprint"] == "" || resp == nil || resp["status"] != float64(200) {
			t.Errorf("inspect the pay record = %d %s, want it succeeded with its 200 response", r.Status, r.Body)
		} else if body, _ := resp["body"].(map[string]any); body["id"] != id || body["status"] != "paid" {
			t.Errorf("inspected response body = %v, want the paid order %s", resp["body"], id)
		}

		r = s.admin("GET", "/v1/admin/idempotency/public/"+regKey, "", nil)
		rec = r.json(t)
		resp, _ = rec["response"].(map[string]any)
		if r.Status != http.StatusOK || rec["status"] != "succeeded" || resp == nil || resp["sealed"] != true || resp["body"] != nil {
			t.Errorf("inspect the registration = %d %s, want succeeded, sealed, no body", r.Status, r.Body)
		}
		if strings.Contains(string(r.Body), token) || strings.Contains(string(r.Body), strings.TrimPrefix(token, "ptk_")) {
			t.Errorf("the inspected registration shows the customer's token: %s", r.Body)
		}
		for _, path := range []string{"/v1/admin/idempotency/admin/" + payKey, "/v1/admin/idempotency/customer:" + uuid.NewString() + "/" + payKey} {
			if r := s.admin("GET", path, "", nil); r.Status != http.StatusNotFound || r.code(t) != "request_not_found" {
				t.Errorf("GET %s = %d %s, want 404 request_not_found", path, r.Status, r.Body)
			}
		}
	})
}
