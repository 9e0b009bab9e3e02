package service

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
)

// Tokens derives customer tokens from the server secret (PAYD_SECRET_KEY)
// through HMAC with a label of its own; the idempotency package derives
// the key that seals stored responses from the same secret under another.
type Tokens struct {
	key    []byte
	secret []byte // the key of orders' client secrets
}

// NewTokens derives the token key from secret.
func NewTokens(secret string) (*Tokens, error) {
	if len(secret) < 16 {
		return nil, errors.New("secret key must be at least 16 characters")
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("payd customer token v1"))
	key := m.Sum(nil)
	m = hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("payd client secret v1"))
	return &Tokens{key: key, secret: m.Sum(nil)}, nil
}

// clientSecretMark separates a client secret's order ID from its MAC.
const clientSecretMark = "_secret_"

// ClientSecret derives order id's client secret: the bearer credential of
// that one order, which the merchant's server hands the buyer's browser
// (ADR 0059). It names its order and carries an HMAC of it, so payd
// checks one without storing it, and a replayed creation answers the same
// one: no plaintext or hash of it rests anywhere.
func (t *Tokens) ClientSecret(orderID string) string {
	return orderID + clientSecretMark + t.clientMAC(orderID)
}

// OrderOfClientSecret returns the order a client secret is for, if it is
// one payd derived (compared in constant time).
func (t *Tokens) OrderOfClientSecret(secret string) (string, bool) {
	id, mac, ok := strings.Cut(secret, clientSecretMark)
	if !ok || len(id) != 36 || len(mac) != 43 {
		return "", false
	}
	want := t.clientMAC(id)
	return id, hmac.Equal([]byte(mac), []byte(want))
}

func (t *Tokens) clientMAC(orderID string) string {
	m := hmac.New(sha256.New, t.secret)
	m.Write([]byte(orderID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
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
