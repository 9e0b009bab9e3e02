package service_test

import (
	"context"
	"errors"
	"testing"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// TestCustomersRegisterAndAuthenticate: a registration returns a token
// that authenticates as that customer; an unknown or malformed token is
// ErrUnauthorized.
func TestCustomersRegisterAndAuthenticate(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		c, token, err := w.customers.Register(ctx, service.Keyed{Key: newKey(), Fingerprint: "fp-ada"}, "ada@example.com", "  Ada Lovelace ")
		if err != nil {
			t.Fatalf("Register = %v", err)
		}
		if c.Email != "ada@example.com" || c.Name != "Ada Lovelace" || token == "" {
			t.Fatalf("Register = %+v, %q, want ada@example.com, the trimmed name and a token", c, token)
		}
		got, err := w.customers.Authenticate(ctx, token)
		if err != nil || got.ID != c.ID {
			t.Fatalf("Authenticate(token) = %s, %v, want %s", got.ID, err, c.ID)
		}
		other, otherToken, err := w.customers.Register(ctx, service.Keyed{Key: newKey(), Fingerprint: "fp-bob"}, "bob@example.com", "Bob")
		if err != nil || other.ID == c.ID || otherToken == token {
			t.Fatalf("Register(bob) = %s, %v, want another customer with another token", other.ID, err)
		}
		for _, bad := range []string{"", "ptk_nobody", token + "x", "Bearer " + token} {
			if _, err := w.customers.Authenticate(ctx, bad); !errors.Is(err, domain.ErrUnauthorized) {
				t.Errorf("Authenticate(%q) = %v, want ErrUnauthorized", bad, err)
			}
		}
		if _, _, err := w.customers.Register(ctx, service.Keyed{Key: newKey()}, "not an email", ""); err == nil {
			t.Error("Register(invalid) = nil, want a validation error")
		}
	})
}

// TestCustomersDuplicateEmail: the email under another key is
// ErrEmailTaken; the same registration repeated under its key resolves to
// the same customer and token; its key with another body is ErrKeyReused.
func TestCustomersDuplicateEmail(t *testing.T) {
	eachDialect(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		key := service.Keyed{Key: newKey(), Fingerprint: "fp-ada"}
		c, token, err := w.customers.Register(ctx, key, "ada@example.com", "Ada")
		if err != nil {
			t.Fatalf("Register = %v", err)
		}
		if _, _, err := w.customers.Register(ctx, service.Keyed{Key: newKey(), Fingerprint: "fp-ada"}, "ada@example.com", "Ada"); !errors.Is(err, domain.ErrEmailTaken) {
			t.Fatalf("Register, same email, other key = %v, want ErrEmailTaken", err)
		}
		again, againToken, err := w.customers.Register(ctx, key, "ada@example.com", "Ada")
		if err != nil || again.ID != c.ID || againToken != token {
			t.Fatalf("Register repeated = %s, %v, want the same customer %s and token", again.ID, err, c.ID)
		}
		if _, _, err := w.customers.Register(ctx, service.Keyed{Key: key.Key, Fingerprint: "fp-ada-2"}, "ada@example.com", "Ada L."); !errors.Is(err, domain.ErrKeyReused) {
			t.Fatalf("Register, same key, other body = %v, want ErrKeyReused", err)
		}
	})
}
