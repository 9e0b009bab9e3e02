package service

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
)

// Sealer encrypts stored responses that carry a secret (a registration's
// token) with AES-256-GCM, so no plaintext token rests in the database, and
// derives customer tokens. Both keys come from one server secret
// (PAYD_SECRET_KEY) through HMAC with distinct labels.
type Sealer struct {
	aead     cipher.AEAD
	tokenKey []byte
}

// NewSealer derives the sealing and token keys from secret.
func NewSealer(secret string) (*Sealer, error) {
	if len(secret) < 16 {
		return nil, errors.New("secret key must be at least 16 characters")
	}
	block, err := aes.NewCipher(derive(secret, "payd response seal v1"))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead, tokenKey: derive(secret, "payd customer token v1")}, nil
}

func derive(secret, label string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(label))
	return m.Sum(nil)
}

// Seal encrypts plaintext; the nonce travels in front of the ciphertext.
func (s *Sealer) Seal(plaintext []byte) ([]byte, error) {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return s.aead.Seal(nonce, nonce, plaintext, nil), nil
}

// Open decrypts what Seal produced. It fails if the secret key changed.
func (s *Sealer) Open(sealed []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("sealed response too short")
	}
	out, err := s.aead.Open(nil, sealed[:n], sealed[n:], nil)
	if err != nil {
		return nil, fmt.Errorf("sealed response cannot be opened (was PAYD_SECRET_KEY changed?): %w", err)
	}
	return out, nil
}

// CustomerToken derives the bearer token of a customer. Deriving it (rather
// than drawing it at random) lets a repeated registration return the same
// token after its stored response expired, while only its hash is stored.
func (s *Sealer) CustomerToken(customerID string) string {
	m := hmac.New(sha256.New, s.tokenKey)
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
