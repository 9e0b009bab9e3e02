package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestAdminProducts: GET /v1/admin/products shows operators the whole
// catalogue by SKU, inactive products too, a page at a time; the
// storefront's list still shows only the active ones; a merchant key or a
// customer token is 403, no token 401.
func TestAdminProducts(t *testing.T) {
	s := start(t)
	s.newProduct("a-tea", "4.95", nil)
	s.newProduct("b-mug", "12.00", 0)
	s.newProduct("c-honey", "7.50", 3)
	if r := s.merchant(testMerchantKey, "PATCH", "/v1/products/c-honey", uuid.NewString(), map[string]any{"active": false}); r.Status != http.StatusOK {
		t.Fatalf("deactivate = %d %s", r.Status, r.Body)
	}
	type page struct {
		Data       []product `json:"data"`
		NextCursor *string   `json:"next_cursor"`
	}
	var all []product
	path := "/v1/admin/products?limit=2"
	for range 3 {
		r := s.do(request{method: "GET", path: path, token: testAdminToken})
		if r.Status != http.StatusOK {
			t.Fatalf("GET %s = %d %s, want 200", path, r.Status, r.Body)
		}
		p := decode[page](t, r)
		all = append(all, p.Data...)
		if p.NextCursor == nil {
			break
		}
		path = "/v1/admin/products?limit=2&cursor=" + *p.NextCursor
	}
	var got []string
	for _, p := range all {
		got = append(got, p.SKU)
	}
	if strings.Join(got, ",") != "a-tea,b-mug,c-honey" || all[2].Active || all[1].Stock == nil || *all[1].Stock != 0 || all[0].Stock != nil {
		t.Errorf("admin list = %+v, want a-tea (unlimited), b-mug (0), c-honey (inactive)", all)
	}
	if list := decode[page](t, s.do(request{method: "GET", path: "/v1/products"})); len(list.Data) != 2 {
		t.Errorf("public list = %+v, want the two active products", list.Data)
	}
	_, customer := s.register("buyer@example.com")
	for _, c := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {testMerchantKey, http.StatusForbidden}, {customer, http.StatusForbidden}} {
		if r := s.do(request{method: "GET", path: "/v1/admin/products", token: c.token}); r.Status != c.want {
			t.Errorf("GET /v1/admin/products with %.6s… = %d, want %d", c.token, r.Status, c.want)
		}
	}
	if r := s.do(request{method: "GET", path: "/v1/admin/products?limit=0", token: testAdminToken}); r.Status != http.StatusBadRequest || r.problemCode() != "validation_failed" {
		t.Errorf("limit=0 = %d %s, want 400 validation_failed", r.Status, r.Body)
	}
}
