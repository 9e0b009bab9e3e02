package service

import (
	"sync"
	"time"

	"github.com/payd/payd/domain"
)

// TokenCacheTTL is how long a verified customer token is trusted without
// asking the database again. Customers are never changed or removed, so
// nothing goes stale today; should tokens ever be revoked, a revoked one
// keeps working on each payd process for at most this long.
const TokenCacheTTL = 5 * time.Second

// TokenCacheSize bounds how many verified tokens one process remembers.
const TokenCacheSize = 10_000

// TokenCache remembers, briefly, which customer a verified token belongs
// to, so a busy client's requests skip the lookup by token hash. It is
// keyed by the token's SHA-256 (never the token itself) and holds only
// tokens the database confirmed: an unknown token is never remembered, so
// it costs a lookup every time, as it did before. It is safe for
// concurrent use; the zero value is not, use NewTokenCache.
type TokenCache struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu      sync.RWMutex
	entries map[[32]byte]tokenEntry
}

type tokenEntry struct {
	customer domain.Customer
	expires  time.Time
}

// NewTokenCache returns a cache that trusts an entry for ttl and holds at
// most size entries. now is the clock (time.Now when nil).
func NewTokenCache(ttl time.Duration, size int, now func() time.Time) *TokenCache {
	if now == nil {
		now = time.Now
	}
	return &TokenCache{ttl: ttl, max: max(size, 1), now: now, entries: make(map[[32]byte]tokenEntry)}
}

// get returns the customer remembered for the token hashing to sum, if its
// entry has not expired.
func (t *TokenCache) get(sum [32]byte) (domain.Customer, bool) {
	t.mu.RLock()
	e, ok := t.entries[sum]
	t.mu.RUnlock()
	if !ok || !t.now().Before(e.expires) {
		return domain.Customer{}, false
	}
	return e.customer, true
}

// put remembers that the token hashing to sum is c's. A full cache drops
// one entry first, chosen at random (Go's map order): the bound holds
// whatever the load, each put stays O(1), and a dropped token costs one
// lookup. Expired entries are replaced as they are met or dropped so.
func (t *TokenCache) put(sum [32]byte, c domain.Customer) {
	expires := t.now().Add(t.ttl)
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.entries[sum]; !ok && len(t.entries) >= t.max {
		for k := range t.entries {
			delete(t.entries, k)
			break
		}
	}
	t.entries[sum] = tokenEntry{customer: c, expires: expires}
}

// Len is the number of entries held, expired ones included.
func (t *TokenCache) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.entries)
}
