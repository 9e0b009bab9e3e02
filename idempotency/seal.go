package idempotency

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

// Sealer encrypts stored responses that carry a secret (a registration's
// token) with AES-256-GCM, so no plaintext token rests in the database. Its
// key is derived from the server secret (PAYD_SECRET_KEY) through HMAC with
// a label of its own; service.Tokens derives the customer-token key from
// the same secret under another label.
type Sealer struct {
	aead cipher.AEAD
}

// NewSealer derives the sealing key from secret.
func NewSealer(secret string) (*Sealer, error) {
	if len(secret) < 16 {
		return nil, errors.New("secret key must be at least 16 characters")
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("payd response seal v1"))
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
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
