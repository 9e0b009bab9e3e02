package service

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
)

// Customers registers customers and authenticates their bearer tokens.
type Customers struct {
	Store  CustomerStore
	Tokens *Tokens
	Now    func() time.Time
	// ReplayWindow is how long after a registration its key may still give
	// the token back once its idempotency record is gone (PAYD_IDEMPOTENCY_TTL,
	// the time the record itself would have replayed it). Zero: never.
	ReplayWindow time.Duration
	// Cache, when set, remembers verified tokens for TokenCacheTTL, so a
	// client's requests skip the lookup by token hash. Nil: every request
	// looks its token up.
	Cache *TokenCache
}

// Register creates a customer for email and name under the registration's
// key (req) and returns it with its token. A repeated registration — the
// same key and the same request — resolves to the same customer and token
// even when its idempotency record is gone, within ReplayWindow; the same
// email under another key is domain.ErrEmailTaken, under the same key with
// another body domain.ErrKeyReused (see resolveTaken).
func (s *Customers) Register(ctx context.Context, req Keyed, email, name string) (domain.Customer, string, error) {
	var invalid domain.ValidationErrors // both fields are checked: the caller corrects them at once
	email, err := domain.NormalizeEmail(email)
	_ = invalid.Add(err)
	name = strings.TrimSpace(name)
	if name == "" || utf8.RuneCountInString(name) > 200 {
		invalid = append(invalid, &domain.ValidationError{Field: "name", Reason: "must be 1 to 200 characters"})
	}
	if err := invalid.Err(); err != nil {
		return domain.Customer{}, "", err
	}
	c := domain.Customer{ID: newID(), Email: email, Name: name, RequestID: req.Key, RequestFingerprint: req.Fingerprint, CreatedAt: s.Now().UTC()}
	token := s.Tokens.CustomerToken(c.ID)
	c.TokenHash = HashToken(token)
	err = s.Store.Create(ctx, c)
	if errors.Is(err, domain.ErrEmailTaken) {
		return s.resolveTaken(ctx, req, email)
	}
	if err != nil {
		return domain.Customer{}, "", err
	}
	return c, token, nil
}

// resolveTaken decides a registration whose email exists. The token is a
// permanent credential, so it goes back only to the request that
// registered: the stored key is this key, the stored fingerprint (email and
// name, canonical) is this request's, the registration is within
// ReplayWindow, and the derived token still matches the stored hash (a
// retry after a crash or after the record expired). Past the window, or for
// a customer stored before fingerprints were kept, the key is forgotten and
// the request is a new registration of a taken email. See ADR 0011.
func (s *Customers) resolveTaken(ctx context.Context, req Keyed, email string) (domain.Customer, string, error) {
	c, err := s.Store.FindByEmail(ctx, email)
	if err != nil {
		return domain.Customer{}, "", err
	}
	switch {
	case c.RequestID != req.Key, c.RequestFingerprint == "", !s.Now().Before(c.CreatedAt.Add(s.ReplayWindow)):
		return domain.Customer{}, "", domain.ErrEmailTaken
	case subtle.ConstantTimeCompare([]byte(c.RequestFingerprint), []byte(req.Fingerprint)) != 1:
		return domain.Customer{}, "", domain.ErrKeyReused
	}
	token := s.Tokens.CustomerToken(c.ID)
	if subtle.ConstantTimeCompare([]byte(HashToken(token)), []byte(c.TokenHash)) != 1 {
		return domain.Customer{}, "", domain.ErrEmailTaken
	}
	return c, token, nil
}

// Authenticate returns the customer a bearer token belongs to, or
// domain.ErrUnauthorized. A token verified within TokenCacheTTL is answered
// from Cache; only a token the store found is remembered.
func (s *Customers) Authenticate(ctx context.Context, token string) (domain.Customer, error) {
	if !strings.HasPrefix(token, "ptk_") || len(token) > 100 {
		return domain.Customer{}, domain.ErrUnauthorized
	}
	sum := sha256.Sum256([]byte(token))
	if s.Cache != nil {
		if c, ok := s.Cache.get(sum); ok {
			return c, nil
		}
	}
	c, err := s.Store.FindByTokenHash(ctx, hex.EncodeToString(sum[:]))
	if errors.Is(err, domain.ErrCustomerNotFound) {
		return domain.Customer{}, domain.ErrUnauthorized
	}
	if err != nil {
		return domain.Customer{}, err
	}
	if s.Cache != nil {
		s.Cache.put(sum, c)
	}
	return c, nil
}

// newID returns a UUIDv7: time-ordered, so primary keys append to InnoDB's
// clustered index and cursor pagination by ID follows creation order.
func newID() string { return uuid.Must(uuid.NewV7()).String() }
