package service

import (
	"context"
	"crypto/subtle"
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
	Sealer *Sealer
	Now    func() time.Time
}

// Register creates a customer for email and name under the registration's
// idempotency key and returns it with its token. A repeated registration
// with the same key resolves to the same customer and token even when its
// idempotency record is gone; the same email under another key is
// domain.ErrEmailTaken.
func (s *Customers) Register(ctx context.Context, requestID, email, name string) (domain.Customer, string, error) {
	email, err := domain.NormalizeEmail(email)
	if err != nil {
		return domain.Customer{}, "", err
	}
	name = strings.TrimSpace(name)
	if name == "" || utf8.RuneCountInString(name) > 200 {
		return domain.Customer{}, "", &domain.ValidationError{Field: "name", Reason: "must be 1 to 200 characters"}
	}
	c := domain.Customer{ID: newID(), Email: email, Name: name, RequestID: requestID, CreatedAt: s.Now().UTC()}
	token := s.Sealer.CustomerToken(c.ID)
	c.TokenHash = HashToken(token)
	err = s.Store.Create(ctx, c)
	if errors.Is(err, domain.ErrEmailTaken) {
		return s.resolveTaken(ctx, requestID, email)
	}
	if err != nil {
		return domain.Customer{}, "", err
	}
	return c, token, nil
}

// resolveTaken decides a registration whose email exists: it is ours when the
// stored request ID is this key (a retry after a crash or after the record
// expired), and the derived token still matches the stored hash.
func (s *Customers) resolveTaken(ctx context.Context, requestID, email string) (domain.Customer, string, error) {
	c, err := s.Store.FindByEmail(ctx, email)
	if err != nil {
		return domain.Customer{}, "", err
	}
	token := s.Sealer.CustomerToken(c.ID)
	if c.RequestID != requestID || subtle.ConstantTimeCompare([]byte(HashToken(token)), []byte(c.TokenHash)) != 1 {
		return domain.Customer{}, "", domain.ErrEmailTaken
	}
	return c, token, nil
}

// Authenticate returns the customer a bearer token belongs to, or domain.ErrUnauthorized.
func (s *Customers) Authenticate(ctx context.Context, token string) (domain.Customer, error) {
	if !strings.HasPrefix(token, "ptk_") || len(token) > 100 {
		return domain.Customer{}, domain.ErrUnauthorized
	}
	c, err := s.Store.FindByTokenHash(ctx, HashToken(token))
	if errors.Is(err, domain.ErrCustomerNotFound) {
		return domain.Customer{}, domain.ErrUnauthorized
	}
	return c, err
}

// newID returns a UUIDv7: time-ordered, so primary keys append to InnoDB's
// clustered index and cursor pagination by ID follows creation order.
func newID() string { return uuid.Must(uuid.NewV7()).String() }
