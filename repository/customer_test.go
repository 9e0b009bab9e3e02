package repository_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

func TestCustomerRoundTrip(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewCustomerStore(db)
		c := newCustomer(t, db)

		byHash, err := s.FindByTokenHash(t.Context(), c.TokenHash)
		if err != nil || byHash != c {
			t.Errorf("FindByTokenHash(%q) = %+v, %v, want %+v", c.TokenHash, byHash, err, c)
		}
		byEmail, err := s.FindByEmail(t.Context(), c.Email)
		if err != nil || byEmail != c {
			t.Errorf("FindByEmail(%q) = %+v, %v, want %+v", c.Email, byEmail, err, c)
		}
		if _, err := s.FindByEmail(t.Context(), "nobody@example.com"); !errors.Is(err, domain.ErrCustomerNotFound) {
			t.Errorf("FindByEmail(unknown) = %v, want %v", err, domain.ErrCustomerNotFound)
		}
		if _, err := s.FindByTokenHash(t.Context(), "nope"); !errors.Is(err, domain.ErrCustomerNotFound) {
			t.Errorf("FindByTokenHash(unknown) = %v, want %v", err, domain.ErrCustomerNotFound)
		}
	})
}

func TestCustomerUniqueness(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewCustomerStore(db)
		c := newCustomer(t, db)

		again := c
		again.ID, again.TokenHash = newID(), "other-hash"
		if err := s.Create(t.Context(), again); !errors.Is(err, domain.ErrEmailTaken) {
			t.Errorf("Create(same email) = %v, want %v", err, domain.ErrEmailTaken)
		}
		// Another index's violation is a bug, not a taken email.
		sameHash := c
		sameHash.ID, sameHash.Email = newID(), "other@example.com"
		if err := s.Create(t.Context(), sameHash); err == nil || errors.Is(err, domain.ErrEmailTaken) {
			t.Errorf("Create(same token hash) = %v, want a non-email error", err)
		}
	})
}

// TestCustomerConcurrentRegistration: of many registrations of one email at
// once, the unique index lets exactly one in.
func TestCustomerConcurrentRegistration(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewCustomerStore(dbtest.Open(t, d))
		const n = 20
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				c := domain.Customer{ID: newID(), Email: "race@example.com", Name: "R", TokenHash: newID(), CreatedAt: t0}
				errs[i] = s.Create(t.Context(), c)
			})
		}
		wg.Wait()
		created := 0
		for _, err := range errs {
			switch {
			case err == nil:
				created++
			case !errors.Is(err, domain.ErrEmailTaken):
				t.Errorf("Create(race@example.com) = %v, want nil or %v", err, domain.ErrEmailTaken)
			}
		}
		if created != 1 {
			t.Errorf("%d concurrent registrations succeeded, want 1", created)
		}
	})
}
