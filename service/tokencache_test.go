package service_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// tokenStore is a CustomerStore that knows customers by token hash and
// counts its lookups; fail makes every lookup fail.
type tokenStore struct {
	byHash  map[string]domain.Customer
	lookups atomic.Int64
	fail    atomic.Bool
}

func (s *tokenStore) Create(context.Context, domain.Customer) error { return errors.ErrUnsupported }

func (s *tokenStore) FindByEmail(context.Context, string) (domain.Customer, error) {
	return domain.Customer{}, domain.ErrCustomerNotFound
}

func (s *tokenStore) FindByTokenHash(_ context.Context, hash string) (domain.Customer, error) {
	s.lookups.Add(1)
	if s.fail.Load() {
		return domain.Customer{}, errors.New("database down")
	}
	c, ok := s.byHash[hash]
	if !ok {
		return domain.Customer{}, domain.ErrCustomerNotFound
	}
	return c, nil
}

// tokenWorld is a Customers with a cache on a clock the test moves, and n
// customers whose tokens are tokens[i].
type tokenWorld struct {
	customers *service.Customers
	store     *tokenStore
	tokens    []string
	ids       []string
	clock     *atomic.Int64 // nanoseconds since an epoch
}

func newTokenWorld(t testing.TB, n, size int) *tokenWorld {
	t.Helper()
	tokens, err := service.NewTokens("a secret key for tests only")
	if err != nil {
		t.Fatal(err)
	}
	w := &tokenWorld{store: &tokenStore{byHash: map[string]domain.Customer{}}, clock: new(atomic.Int64)}
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { return epoch.Add(time.Duration(w.clock.Load())) }
	for i := range n {
		id := fmt.Sprintf("cust-%d", i)
		tok := tokens.CustomerToken(id)
		w.store.byHash[service.HashToken(tok)] = domain.Customer{ID: id, Email: id + "@example.com", TokenHash: service.HashToken(tok)}
		w.tokens, w.ids = append(w.tokens, tok), append(w.ids, id)
	}
	w.customers = &service.Customers{Store: w.store, Tokens: tokens, Now: now,
		Cache: service.NewTokenCache(service.TokenCacheTTL, size, now)}
	return w
}

func (w *tokenWorld) authenticate(t testing.TB, i int) {
	t.Helper()
	got, err := w.customers.Authenticate(context.Background(), w.tokens[i])
	if err != nil || got.ID != w.ids[i] {
		t.Fatalf("Authenticate(token %d) = %q, %v, want %q", i, got.ID, err, w.ids[i])
	}
}

// TestTokenCacheRemembersVerifiedTokens: a verified token authenticates
// again without a lookup until TokenCacheTTL has passed, then is looked up
// again.
func TestTokenCacheRemembersVerifiedTokens(t *testing.T) {
	w := newTokenWorld(t, 1, 10)
	w.authenticate(t, 0)
	w.authenticate(t, 0)
	w.clock.Add(int64(service.TokenCacheTTL - time.Millisecond))
	w.authenticate(t, 0)
	if n := w.store.lookups.Load(); n != 1 {
		t.Errorf("lookups within the TTL = %d, want 1", n)
	}
	w.clock.Add(int64(time.Millisecond))
	w.authenticate(t, 0)
	if n := w.store.lookups.Load(); n != 2 {
		t.Errorf("lookups once the TTL has passed = %d, want 2", n)
	}
}

// TestTokenCacheNeverRemembersFailures: an unknown token, a malformed one
// and a lookup that failed are never remembered as valid.
func TestTokenCacheNeverRemembersFailures(t *testing.T) {
	w := newTokenWorld(t, 1, 10)
	ctx := context.Background()
	for range 3 {
		if _, err := w.customers.Authenticate(ctx, "ptk_unknown"); !errors.Is(err, domain.ErrUnauthorized) {
			t.Fatalf("Authenticate(unknown) = %v, want ErrUnauthorized", err)
		}
	}
	if n := w.store.lookups.Load(); n != 3 {
		t.Errorf("lookups of an unknown token asked 3 times = %d, want 3: it must not be cached", n)
	}
	w.store.fail.Store(true)
	if _, err := w.customers.Authenticate(ctx, w.tokens[0]); err == nil || errors.Is(err, domain.ErrUnauthorized) {
		t.Errorf("Authenticate with the store down = %v, want the store's error", err)
	}
	if n := w.customers.Cache.Len(); n != 0 {
		t.Errorf("cache entries after failures only = %d, want 0", n)
	}
	w.store.fail.Store(false)
	w.authenticate(t, 0)
	if n := w.customers.Cache.Len(); n != 1 {
		t.Errorf("cache entries after one success = %d, want 1", n)
	}
}

// TestTokenCacheIsBounded: more customers than the cache holds all
// authenticate, and the cache never holds more than its size.
func TestTokenCacheIsBounded(t *testing.T) {
	w := newTokenWorld(t, 50, 8)
	for round := range 3 {
		for i := range w.tokens {
			w.authenticate(t, i)
			if n := w.customers.Cache.Len(); n > 8 {
				t.Fatalf("round %d, token %d: cache holds %d entries, want at most 8", round, i, n)
			}
		}
	}
}

// TestTokenCacheConcurrent: many goroutines authenticating many tokens
// (run with -race) each get their own customer.
func TestTokenCacheConcurrent(t *testing.T) {
	w := newTokenWorld(t, 40, 16)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				w.authenticate(t, (g*7+i)%len(w.tokens))
				if i%50 == 0 {
					w.clock.Add(int64(time.Second))
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkAuthenticate compares a token answered from the cache with one
// looked up every time (the store here is an in-memory map: the database
// round trip the cache saves is not in these figures).
//
//	go test -run '^$' -bench BenchmarkAuthenticate -benchmem ./service
func BenchmarkAuthenticate(b *testing.B) {
	b.Run("cached", func(b *testing.B) {
		w := newTokenWorld(b, 1, 10)
		b.ReportAllocs()
		for b.Loop() {
			w.authenticate(b, 0)
		}
	})
	b.Run("uncached", func(b *testing.B) {
		w := newTokenWorld(b, 1, 10)
		w.customers.Cache = nil
		b.ReportAllocs()
		for b.Loop() {
			w.authenticate(b, 0)
		}
	})
}
