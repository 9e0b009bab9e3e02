package repository

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/payd/payd/domain"
)

// customerRow is a row of customers.
type customerRow struct {
	ID        string         `gorm:"column:id"`
	Email     string         `gorm:"column:email"`
	Name      string         `gorm:"column:name"`
	TokenHash string         `gorm:"column:token_hash"`
	RequestID sql.NullString `gorm:"column:request_id"`
	RequestFP sql.NullString `gorm:"column:request_fingerprint"`
	CreatedAt utcTime        `gorm:"column:created_at"`
}

// TableName tells GORM the table.
func (customerRow) TableName() string { return "customers" }

func customerFromDomain(c domain.Customer) customerRow {
	return customerRow{ID: c.ID, Email: c.Email, Name: c.Name, TokenHash: c.TokenHash, RequestID: nullString(c.RequestID),
		RequestFP: nullString(c.RequestFingerprint), CreatedAt: ts(c.CreatedAt)}
}

func (r customerRow) toDomain() domain.Customer {
	return domain.Customer{ID: r.ID, Email: r.Email, Name: r.Name, TokenHash: r.TokenHash, RequestID: r.RequestID.String,
		RequestFingerprint: r.RequestFP.String, CreatedAt: r.CreatedAt.time()}
}

// CustomerStore keeps customers.
type CustomerStore struct{ db *DB }

// NewCustomerStore returns a CustomerStore on db.
func NewCustomerStore(db *DB) *CustomerStore { return &CustomerStore{db: db} }

// Create stores c. The unique index on email decides races between two
// registrations of one address: the loser gets domain.ErrEmailTaken.
func (s *CustomerStore) Create(ctx context.Context, c domain.Customer) error {
	row := customerFromDomain(c)
	if err := s.db.create(ctx, &row); err != nil {
		if violatesIndex(err, "customers", "email") {
			return domain.ErrEmailTaken
		}
		return fmt.Errorf("create customer %s: %w", c.ID, err)
	}
	return nil
}

// FindByTokenHash returns the customer whose token hashes to hash, or
// domain.ErrCustomerNotFound.
func (s *CustomerStore) FindByTokenHash(ctx context.Context, hash string) (domain.Customer, error) {
	return s.findBy(ctx, "token_hash", findCustomerByTokenHash, hash)
}

// FindByEmail returns the customer with that (normalized) email, or
// domain.ErrCustomerNotFound.
func (s *CustomerStore) FindByEmail(ctx context.Context, email string) (domain.Customer, error) {
	return s.findBy(ctx, "email", findCustomerByEmail, email)
}

// FindByID returns the customer with that ID, or domain.ErrCustomerNotFound.
func (s *CustomerStore) FindByID(ctx context.Context, id string) (domain.Customer, error) {
	return s.findBy(ctx, "id", findCustomerByID, id)
}

// The reads of one customer by a unique column, written out and scanned
// by hand (customerRow.fields): authentication runs the first on every
// request the token cache does not answer, and GORM's Take would reflect
// on the row each time.
const (
	findCustomerByTokenHash = `SELECT id, email, name, token_hash, request_id, request_fingerprint, created_at
		FROM customers WHERE token_hash = ?`
	findCustomerByEmail = `SELECT id, email, name, token_hash, request_id, request_fingerprint, created_at
		FROM customers WHERE email = ?`
	findCustomerByID = `SELECT id, email, name, token_hash, request_id, request_fingerprint, created_at
		FROM customers WHERE id = ?`
)

// fields are the scan destinations of the findCustomerBy statements.
func (r *customerRow) fields() []any {
	return []any{&r.ID, &r.Email, &r.Name, &r.TokenHash, &r.RequestID, &r.RequestFP, &r.CreatedAt}
}

// findBy loads one customer with query, a read by column. Errors name the
// column, never the value: it is personal data or a credential hash.
func (s *CustomerStore) findBy(ctx context.Context, column, query, value string) (domain.Customer, error) {
	var r customerRow
	if err := s.db.queryRow(ctx, query, value).Scan(r.fields()...); err != nil {
		return domain.Customer{}, fmt.Errorf("find customer by %s: %w", column, notFound(err, domain.ErrCustomerNotFound))
	}
	return r.toDomain(), nil
}
