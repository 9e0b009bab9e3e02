package handler

import (
	lists "container/list"
	"sync"
	"time"

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
// memory up to max and no more.
type buckets struct {
	rate  rate.Limit
	burst int
	idle  time.Duration
	max   int

	mu    sync.Mutex
	byKey map[string]*lists.Element // of *bucket
	lru   lists.List                // front: the most recently used
}

type bucket struct {
	key  string
	lim  *rate.Limiter
	seen time.Time // last use
}

func newBuckets(r rate.Limit, burst, size int) *buckets {
	refill := min(float64(burst)/float64(r), maxIdle.Seconds()) // a burst of days over a trickle is kept no longer than maxIdle
	idle := time.Duration(refill * float64(time.Second))
	return &buckets{rate: r, burst: burst, idle: max(idle, time.Second), max: size, byKey: map[string]*lists.Element{}}
}

// get is key's bucket, made (full) if it has none, marked used at now.
func (b *buckets) get(key string, now time.Time) *rate.Limiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	if el, ok := b.byKey[key]; ok {
		bk := el.Value.(*bucket)
		bk.seen = now
		b.lru.MoveToFront(el)
		return bk.lim
	}
	b.evict(now)
	bk := &bucket{key: key, lim: rate.NewLimiter(b.rate, b.burst), seen: now}
	b.byKey[key] = b.lru.PushFront(bk)
	return bk.lim
}

// lookup is key's bucket, or nil if it has none (it would be full).
func (b *buckets) lookup(key string) *rate.Limiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	if el, ok := b.byKey[key]; ok {
		return el.Value.(*bucket).lim
	}
	return nil
}

// evict drops, from the least recently used end, every bucket idle long
// enough to be full again, and the oldest ones while there is no room for
// one more.
func (b *buckets) evict(now time.Time) {
	for el := b.lru.Back(); el != nil; el = b.lru.Back() {
		bk := el.Value.(*bucket)
		if len(b.byKey) < b.max && now.Sub(bk.seen) < b.idle {
			return
		}
		b.lru.Remove(el)
		delete(b.byKey, bk.key)
	}
}

// len is how many buckets are kept.
func (b *buckets) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.byKey)
}
