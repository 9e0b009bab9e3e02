package domain

import (
	"net/mail"
	"strings"
	"time"
)

// Customer is someone who buys through a checkout. Only a hash of their
// bearer token is ever stored.
type Customer struct {
	ID        string
	Email     string
	Name      string
	TokenHash string
	RequestID string // the idempotency key that registered the customer
	CreatedAt time.Time

	// RequestFingerprint is the fingerprint of the registration request
	// (empty for customers stored before it was kept): only the identical
	// request under RequestID may get the token back.
	RequestFingerprint string
}

// NormalizeEmail validates an address and returns the form used for
// uniqueness: trimmed and lower-cased.
func NormalizeEmail(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 254 {
		return "", &ValidationError{Field: "email", Reason: "must be an email address of at most 254 characters"}
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || a.Name != "" {
		return "", &ValidationError{Field: "email", Reason: "must be a plain email address such as ada@example.com"}
	}
	return strings.ToLower(s), nil
}
