package e2e

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
)

// What happens to a key once its idempotency record is gone — expired (past
// expires_at, the purge job not run yet) or purged. The record is absent
// from the moment it expires, and every fallback that still resolves the
// key through a row it created (the order, the customer) compares the
// request's fingerprint with the one stored on that row.

// sqlTime is how payd writes timestamps (repository.timeLayout): both
// databases take it in a WHERE argument or a SET.
func sqlTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000000") }

// forget makes the record of key absent the way the test names it:
// "expired" moves its expiry into the past (the purge job has not run),
// "purged" deletes it as the purge job does.
func (s *stack) forget(how, key string) {
	s.t.Helper()
	q := "UPDATE idempotency_records SET expires_at = ? WHERE idem_key = ?"
	args := []any{sqlTime(time.Now().Add(-time.Minute)), key}
	if how == "purged" {
		q, args = "DELETE FROM idempotency_records WHERE idem_key = ?", []any{key}
	}
	if err := s.db.Gorm().Exec(q, args...).Error; err != nil {
		s.t.Fatalf("%s record %s: %v", how, key, err)
	}
}

// cart is a buyer's order of one unit of the product that costs price.
func (d *driver) cart(price string) map[string]any {
	return map[string]any{"items": []map[string]any{{"sku": d.priced(price), "quantity": 1}}}
}

// TestOrderKeyAfterExpiry: an order creation under a key whose record is
// gone gets the order that key created only for the same cart; another cart
// is 422 idempotency_key_reused and creates nothing. An expired record is
// not replayed and not shown.
func TestOrderKeyAfterExpiry(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		custID, token := s.register("keys-order@example.com")
		for _, how := range []string{"expired", "purged"} {
			t.Run(how, func(t *testing.T) {
				key := uuid.NewString()
				first := s.do(request{method: "POST", path: "/v1/orders", token: token, key: key, body: s.cart("4.50")})
				if first.Status != http.StatusCreated {
					t.Fatalf("create = %d %s, want 201", first.Status, first.Body)
				}
				id := first.json(t)["id"].(string)
				s.forget(how, key)

				if r := s.do(request{method: "GET", path: "/v1/requests/" + key, token: token}); r.Status != http.StatusNotFound {
					t.Errorf("GET /v1/requests/%s after the record %s = %d %s, want 404", key, how, r.Status, r.Body)
				}
				other := s.do(request{method: "POST", path: "/v1/orders", token: token, key: key, body: s.cart("9.00")})
				if other.Status != http.StatusUnprocessableEntity || other.code(t) != "idempotency_key_reused" {
					t.Errorf("old key, other cart = %d %s, want 422 idempotency_key_reused", other.Status, other.Body)
				}
				same := s.do(request{method: "POST", path: "/v1/orders", token: token, key: key, body: s.cart("4.50")})
				if same.Status != http.StatusCreated || same.json(t)["id"] != id {
					t.Errorf("old key, same cart = %d %s, want 201 with order %s", same.Status, same.Body, id)
				}
				if same.Header.Get("Idempotent-Replayed") != "" {
					t.Errorf("old key, same cart was replayed from the %s record, want it answered from the order", how)
				}
				if n := s.count("orders WHERE customer_id = ? AND create_request_id = ?", custID, key); n != 1 {
					t.Errorf("orders under key %s = %d, want 1", key, n)
				}
			})
		}

		// An order stored before fingerprints were kept: what can be
		// compared (currency and items) is compared.
		key := uuid.NewString()
		first := s.do(request{method: "POST", path: "/v1/orders", token: token, key: key, body: s.cart("3.00")})
		if first.Status != http.StatusCreated {
			t.Fatalf("create = %d %s, want 201", first.Status, first.Body)
		}
		s.forget("purged", key)
		s.db.Gorm().Exec("UPDATE orders SET create_fingerprint = NULL WHERE create_request_id = ?", key)
		if r := s.do(request{method: "POST", path: "/v1/orders", token: token, key: key, body: s.cart("3.01")}); r.Status != http.StatusUnprocessableEntity {
			t.Errorf("legacy order, other cart = %d %s, want 422", r.Status, r.Body)
		}
		if r := s.do(request{method: "POST", path: "/v1/orders", token: token, key: key, body: s.cart("3.00")}); r.Status != http.StatusCreated || r.json(t)["id"] != first.json(t)["id"] {
			t.Errorf("legacy order, same cart = %d %s, want 201 with the same order", r.Status, r.Body)
		}
	})
}

// TestRegistrationKeyAfterExpiry: once the registration's record is gone,
// its key gives the token back only to an identical request (same email,
// same name) within the replay window; another name is 422 and no token, a
// customer stored without a fingerprint or older than the window never
// gives its token to a fallback.
func TestRegistrationKeyAfterExpiry(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		for _, how := range []string{"expired", "purged"} {
			t.Run(how, func(t *testing.T) {
				key := uuid.NewString()
				email := how + "-reg@example.com"
				body := map[string]string{"email": email, "name": "Hal"}
				first := s.do(request{method: "POST", path: "/v1/customers", key: key, body: body})
				if first.Status != http.StatusCreated {
					t.Fatalf("register = %d %s, want 201", first.Status, first.Body)
				}
				token := first.json(t)["token"].(string)
				custID := first.json(t)["customer"].(map[string]any)["id"].(string)
				s.forget(how, key)

				admin := s.do(request{method: "GET", path: "/v1/admin/idempotency/public/" + url.PathEscape(key), token: testAdminToken})
				if admin.Status != http.StatusNotFound {
					t.Errorf("admin record view after the record %s = %d %s, want 404", how, admin.Status, admin.Body)
				}
				other := s.do(request{method: "POST", path: "/v1/customers", key: key, body: map[string]string{"email": email, "name": "Mallory"}})
				if other.Status != http.StatusUnprocessableEntity || other.code(t) != "idempotency_key_reused" {
					t.Errorf("old key, same email, other name = %d %s, want 422 idempotency_key_reused", other.Status, other.Body)
				}
				if tok, _ := other.json(t)["token"].(string); tok != "" {
					t.Errorf("old key, other name got a token")
				}
				same := s.do(request{method: "POST", path: "/v1/customers", key: key, body: body})
				if same.Status != http.StatusCreated || same.json(t)["token"] != token {
					t.Errorf("old key, same body = %d %s, want 201 with the same token", same.Status, same.Body)
				}

				// Without a stored fingerprint nothing proves the request is
				// the one that registered: no token.
				s.forget("purged", key)
				s.db.Gorm().Exec("UPDATE customers SET request_fingerprint = NULL WHERE id = ?", custID)
				legacy := s.do(request{method: "POST", path: "/v1/customers", key: key, body: body})
				if legacy.Status != http.StatusConflict || legacy.code(t) != "email_taken" {
					t.Errorf("customer without fingerprint, same body = %d %s, want 409 email_taken", legacy.Status, legacy.Body)
				}
			})
		}

		// Past the replay window (the idempotency TTL from the
		// registration) the key is forgotten like any other: the same
		// request is a new registration of a taken email.
		key := uuid.NewString()
		body := map[string]string{"email": "old-reg@example.com", "name": "Hal"}
		first := s.do(request{method: "POST", path: "/v1/customers", key: key, body: body})
		if first.Status != http.StatusCreated {
			t.Fatalf("register = %d %s, want 201", first.Status, first.Body)
		}
		s.forget("purged", key)
		s.db.Gorm().Exec("UPDATE customers SET created_at = ? WHERE email = ?", sqlTime(time.Now().Add(-25*time.Hour)), "old-reg@example.com")
		if r := s.do(request{method: "POST", path: "/v1/customers", key: key, body: body}); r.Status != http.StatusConflict || r.code(t) != "email_taken" {
			t.Errorf("same body after the replay window = %d %s, want 409 email_taken", r.Status, r.Body)
		}
	})
}

// TestExpiredKeyIsFree: a key whose record expired (not yet purged) is a
// new key: a different request under it executes, and the record it leaves
// is the new one.
func TestExpiredKeyIsFree(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		key := uuid.NewString()
		r := s.do(request{method: "POST", path: "/v1/customers", key: key, body: map[string]string{"email": "first@example.com", "name": "A"}})
		if r.Status != http.StatusCreated {
			t.Fatalf("register = %d %s, want 201", r.Status, r.Body)
		}
		s.forget("expired", key)
		r = s.do(request{method: "POST", path: "/v1/customers", key: key, body: map[string]string{"email": "second@example.com", "name": "B"}})
		if r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("expired key, another registration = %d %s (replayed %q), want 201 executed", r.Status, r.Body, r.Header.Get("Idempotent-Replayed"))
		}
		if n := s.count("customers WHERE email = ?", "second@example.com"); n != 1 {
			t.Errorf("customers second@ = %d, want 1", n)
		}
		var fp string
		s.db.Gorm().Raw("SELECT fingerprint FROM idempotency_records WHERE scope = 'public' AND idem_key = ?", key).Scan(&fp)
		again := s.do(request{method: "POST", path: "/v1/customers", key: key, body: map[string]string{"email": "second@example.com", "name": "B"}})
		if again.Header.Get("Idempotent-Replayed") != "true" || fp == "" {
			t.Errorf("the new request's record was not kept (replayed %q, fingerprint %q)", again.Header.Get("Idempotent-Replayed"), fp)
		}
	})
}

// TestPayAfterKeyExpiry: a repeated pay under a key whose record expired or
// was purged resolves through the order's pay_request_id (docs/guarantees.md#key-expiry): the
// same outcome, no second charge.
func TestPayAfterKeyExpiry(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, token := s.register("keys-pay@example.com")
		for _, how := range []string{"expired", "purged"} {
			t.Run(how, func(t *testing.T) {
				id := s.order(token, "12.00")
				key := uuid.NewString()
				if r := s.pay(token, id, key, "pm_ok"); r.Status != http.StatusOK {
					t.Fatalf("pay = %d %s, want 200", r.Status, r.Body)
				}
				s.forget(how, key)
				r := s.pay(token, id, key, "pm_ok")
				if r.Status != http.StatusOK || r.json(t)["status"] != "paid" || r.Header.Get("Idempotent-Replayed") != "" {
					t.Errorf("pay again after the record %s = %d %s (replayed %q), want 200 paid from the order", how, r.Status, r.Body, r.Header.Get("Idempotent-Replayed"))
				}
				if n := s.charges(id); n != 1 {
					t.Errorf("charges = %d, want 1", n)
				}
				if r := s.pay(token, id, uuid.NewString(), "pm_ok"); r.Status != http.StatusConflict {
					t.Errorf("pay under another key = %d %s, want 409", r.Status, r.Body)
				}
			})
		}
	})
}
