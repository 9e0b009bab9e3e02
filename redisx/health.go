package redisx

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// cooldown is how long payd leaves Redis alone after a failure before it
// tries again: while Redis is down, requests go to the database without
// first waiting for a timeout each.
const cooldown = 500 * time.Millisecond

// openAfter is how many failures in a row open the breaker.
const openAfter = 3

// calm is how long Redis must answer without a failure before an outage
// counts as over (and is logged as such).
const calm = time.Second

// health watches Redis for payd. It logs an outage once: its first failure
// starts it ("redis unavailable"), a second of answers without a failure
// ends it ("redis is back"), whatever the number of requests in between;
// this holds for a whole Redis down and for one cluster node down alike.
// It is also a small circuit breaker: a few failures in a row open it,
// and requests skip Redis until cooldown has passed and one probe (one
// caller, the others still skip) succeeds.
type health struct {
	log     *slog.Logger
	metrics *Metrics

	mu          sync.Mutex
	down        bool // breaker open
	failures    int  // in a row
	retryAt     time.Time
	outage      bool // logged as unavailable, not yet as back
	lastFailure time.Time
}

// allow reports whether a command may go to Redis now.
func (h *health) allow() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.down {
		return true
	}
	now := time.Now()
	if now.Before(h.retryAt) {
		h.metrics.skipped.Inc()
		return false
	}
	// Half open: this caller is the one probe. The others keep skipping
	// until it reports (a success closes the breaker, a failure starts a
	// new cooldown), or for another cooldown should it never report.
	h.retryAt = now.Add(cooldown)
	return true
}

// result records how a command went: err == nil or redis.Nil is a success.
func (h *health) result(err error) {
	now := time.Now()
	if err == nil || errors.Is(err, redis.Nil) {
		h.mu.Lock()
		h.down, h.failures = false, 0
		over := h.outage && now.Sub(h.lastFailure) >= calm
		if over {
			h.outage = false
		}
		h.mu.Unlock()
		if over {
			h.metrics.up.Set(1)
			h.log.Info("redis is back: using it again")
		}
		return
	}
	h.metrics.errors.Inc()
	h.mu.Lock()
	h.lastFailure = now
	// One slow answer on a busy machine is not reason to stop asking: the
	// breaker opens on a few failures in a row, or at once when half open.
	if h.failures++; h.down || h.failures >= openAfter {
		h.down, h.retryAt = true, now.Add(cooldown)
	}
	began := !h.outage
	h.outage = true
	h.mu.Unlock()
	if began {
		h.metrics.up.Set(0)
		h.log.Warn("redis unavailable: serving from the database until it returns", "err", err)
	}
}

// inOutage reports whether an outage is logged and not yet over.
func (h *health) inOutage() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.outage
}

// isUp reports whether the breaker is closed (payd is using Redis).
func (h *health) isUp() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.down
}

// bounded returns a context that keeps ctx's values but not its
// cancellation (a client hanging up must not leave a lock behind) and
// ends after Timeout.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), Timeout)
}
