package service

import (
	"context"
	"errors"
	"strings"

	"github.com/payd/payd/domain"
)

// RunLister lists reconciliation runs for operators.
type RunLister interface {
	// List returns one page of runs, newest first, without their findings.
	List(ctx context.Context, f domain.RunFilter) (domain.RunPage, error)
}

// CustomerLister lists customers for operators.
type CustomerLister interface {
	// List returns one page of customers, newest first.
	List(ctx context.Context, f domain.CustomerFilter) (domain.CustomerPage, error)
	// FindByEmail returns the customer with that (normalized) email, or domain.ErrCustomerNotFound.
	FindByEmail(ctx context.Context, email string) (domain.Customer, error)
}

// ListRuns lists reconciliation runs, manual and scheduled alike.
func (s *Admin) ListRuns(ctx context.Context, f domain.RunFilter) (domain.RunPage, error) {
	if err := checkCursor(f.Cursor); err != nil {
		return domain.RunPage{}, err
	}
	return s.RunList.List(ctx, f)
}

// ListDiscrepancies lists discrepancies whoever found them: webhooks, pay
// replies, the recoverer and reconciliation runs all record into one store.
func (s *Admin) ListDiscrepancies(ctx context.Context, f domain.DiscrepancyFilter) (domain.DiscrepancyPage, error) {
	var invalid domain.ValidationErrors
	if f.Status != "" && !f.Status.Valid() {
		invalid = append(invalid, &domain.ValidationError{Field: "status", Reason: "must be open, resolving or resolved"})
	}
	if f.Type != "" && !f.Type.Valid() {
		invalid = append(invalid, &domain.ValidationError{Field: "type", Reason: "must be a discrepancy type: " + typeNames()})
	}
	if f.OrderID != "" && !domain.ValidID(f.OrderID) {
		invalid = append(invalid, &domain.ValidationError{Field: "order", Reason: "must be an order ID (a UUID)"})
	}
	_ = invalid.Add(checkCursor(f.Cursor))
	if err := invalid.Err(); err != nil {
		return domain.DiscrepancyPage{}, err
	}
	return s.Discrepancies.List(ctx, f)
}

// ListCustomers lists customers; an email filter is normalized as registration
// normalizes it, so "Ada@Example.com " finds ada@example.com.
func (s *Admin) ListCustomers(ctx context.Context, f domain.CustomerFilter) (domain.CustomerPage, error) {
	var invalid domain.ValidationErrors
	if f.Email != "" {
		email, err := domain.NormalizeEmail(f.Email)
		_ = invalid.Add(err)
		f.Email = email
	}
	_ = invalid.Add(checkCursor(f.Cursor))
	if err := invalid.Err(); err != nil {
		return domain.CustomerPage{}, err
	}
	return s.CustomerList.List(ctx, f)
}

// customerRef resolves the search's customer= to a customer ID: an ID is
// taken as it is; an email names the customer registered with it (an email
// nobody registered matches no order, and says so by an empty page, as an
// unknown ID does); anything else is a validation error rather than a
// search that silently finds nothing.
func (s *Admin) customerRef(ctx context.Context, ref string) (string, bool, error) {
	if ref == "" || domain.ValidID(ref) {
		return ref, true, nil
	}
	if !strings.Contains(ref, "@") {
		return "", false, &domain.ValidationError{Field: "customer", Reason: "must be a customer ID (a UUID) or an email address"}
	}
	email, err := domain.NormalizeEmail(ref)
	if err != nil {
		return "", false, &domain.ValidationError{Field: "customer", Reason: "must be a customer ID (a UUID) or an email address"}
	}
	c, err := s.CustomerList.FindByEmail(ctx, email)
	if err != nil {
		if errors.Is(err, domain.ErrCustomerNotFound) {
			return "", false, nil
		}
		return "", false, err
	}
	return c.ID, true, nil
}

// checkCursor refuses a cursor payd cannot have issued: every list's cursor
// is the ID of a row.
func checkCursor(cursor string) error {
	if cursor != "" && !domain.ValidID(cursor) {
		return &domain.ValidationError{Field: "cursor", Reason: "must be the next_cursor of an earlier page"}
	}
	return nil
}

func typeNames() string {
	names := make([]string, len(domain.DiscrepancyTypes))
	for i, t := range domain.DiscrepancyTypes {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}
