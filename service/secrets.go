package service

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
)

// Tokens derives customer tokens from the server secret (PAYD_SECRET_KEY)
// through HMAC with a label of its own; the idempotency package derives
// the key that seals stored responses from the same secret under another.
type Tokens struct {
	key []byte
}

// NewTokens derives the token key from secret.
func NewTokens(secret string) (*Tokens, error) {
	if len(secret) < 16 {
		return nil, errors.New("secret key must be at least 16 characters")
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("payd customer token v1"))
	return &Tokens{key: m.Sum(nil)}, nil
}

// CustomerToken derives the bearer token of a customer. Deriving it (rather
// than drawing it at random) lets a repeated registration return the same
// token after its stored response expired, while only its hash is stored.
func (t *Tokens) CustomerToken(customerID string) string {
	m := hmac.New(sha256.New, t.key)
	m.Write([]byte(customerID))
	return "ptk_" + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// HashToken is how a token is stored and looked up: hex SHA-256. Tokens are
// 256-bit random-looking values, so a fast hash is enough (no password
// stretching needed).
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
