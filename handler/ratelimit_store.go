package handler

import (
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/time/rate"
)

// maxLimiterKeys bounds the callers one rate limit keeps a bucket for.
// A bucket is about 250 bytes with its bookkeeping: 100,000 keys are
// about 25 MB per limit at worst.
const maxLimiterKeys = 100_000

// maxIdle bounds how long an idle bucket is kept, for a limit that would
// take longer to refill.
const maxIdle = 24 * time.Hour

// buckets is one rate limit's token buckets (x/time/rate), one per key,
// in bounded memory. A bucket left alone for idle (the time it takes to
// refill from empty) is full again, the same as a new one: it is dropped
// whenever a new key arrives, so forgetting it changes no answer. Beyond
// max keys the least recently used bucket goes even if it is not full
// yet: a flood of made-up keys (millions of client addresses) costs
// memory up to max and no more. The recency order is golang-lru's.
type buckets struct {
	rate  rate.Limit
	burst int
	idle  time.Duration
	max   int

	mu  sync.Mutex
	lru *simplelru.LRU[string, *bucket]
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time // last use
}

func newBuckets(r rate.Limit, burst, size int) *buckets {
	refill := min(float64(burst)/float64(r), maxIdle.Seconds()) // a burst of days over a trickle is kept no longer than maxIdle
	idle := time.Duration(refill * float64(time.Second))
	size = max(size, 1)
	lru, _ := simplelru.NewLRU[string, *bucket](size, nil) // errors only for a size below 1
	return &buckets{rate: r, burst: burst, idle: max(idle, time.Second), max: size, lru: lru}
}

// get is key's bucket, made (full) if it has none, marked used at now.
func (b *buckets) get(key string, now time.Time) *rate.Limiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	if bk, ok := b.lru.Get(key); ok {
		bk.seen = now
		return bk.lim
	}
	b.evict(now)
	bk := &bucket{lim: rate.NewLimiter(b.rate, b.burst), seen: now}
	b.lru.Add(key, bk)
	return bk.lim
}

// lookup is key's bucket, or nil if it has none (it would be full). It
// does not count as a use.
func (b *buckets) lookup(key string) *rate.Limiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	if bk, ok := b.lru.Peek(key); ok {
		return bk.lim
	}
	return nil
}

// evict drops, from the least recently used end, every bucket idle long
// enough to be full again, and the oldest ones while there is no room for
// one more.
func (b *buckets) evict(now time.Time) {
	for {
		_, bk, ok := b.lru.GetOldest()
		if !ok || (b.lru.Len() < b.max && now.Sub(bk.seen) < b.idle) {
			return
		}
		b.lru.RemoveOldest()
	}
}

// len is how many buckets are kept.
func (b *buckets) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lru.Len()
}
