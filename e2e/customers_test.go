package e2e

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/google/uuid"
)

// TestRegistrationReplay: a repeated registration returns the same token,
// byte for byte, yet the token rests nowhere in the database in plaintext.
func TestRegistrationReplay(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		key := uuid.NewString()
		body := map[string]string{"email": "Hal@Example.com", "name": "Hal"}
		first := s.do(request{method: "POST", path: "/v1/customers", key: key, body: body})
		if first.Status != http.StatusCreated {
			t.Fatalf("register = %d %s, want 201", first.Status, first.Body)
		}
		token := first.json(t)["token"].(string)
		again := s.do(request{method: "POST", path: "/v1/customers", key: key, body: body})
		if again.Status != http.StatusCreated || !bytes.Equal(again.Body, first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("replay = %d %s (replayed %q), want the first answer replayed", again.Status, again.Body, again.Header.Get("Idempotent-Replayed"))
		}
		if n := s.count("customers WHERE token_hash = ?", token); n != 0 {
			t.Error("the plaintext token is stored as the hash")
		}
		s.noStoredAnswerHolds(t, token)
		other := s.do(request{method: "POST", path: "/v1/customers", key: uuid.NewString(), body: body})
		if other.Status != http.StatusConflict || other.code(t) != "email_taken" {
			t.Errorf("same email, other key = %d %s, want 409 email_taken", other.Status, other.Body)
		}
		if r := s.do(request{method: "GET", path: "/v1/orders", token: token}); r.Status != http.StatusOK {
			t.Errorf("the token does not authenticate: %d %s", r.Status, r.Body)
		}

		// After the stored response is gone (expired and purged), the same
		// key still resolves to the same customer and token.
		s.db.Gorm().Exec("DELETE FROM idempotency_records")
		late := s.do(request{method: "POST", path: "/v1/customers", key: key, body: body})
		if late.Status != http.StatusCreated || late.json(t)["token"] != token {
			t.Errorf("registration after the record expired = %d %s, want 201 with the same token", late.Status, late.Body)
		}
	})
}
