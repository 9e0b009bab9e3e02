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

// health is a small circuit breaker around Redis: a few failures in a row
// log once and open it, requests then skip Redis until cooldown has passed,
// and the first success after that closes it (logged once too).
type health struct {
	log     *slog.Logger
	metrics *Metrics

	mu       sync.Mutex
	down     bool
	failures int // in a row
	retryAt  time.Time
}

// allow reports whether a command may go to Redis now.
func (h *health) allow() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down && time.Now().Before(h.retryAt) {
		h.metrics.skipped.Inc()
		return false
	}
	return true
}

// result records how a command went: err == nil or redis.Nil is a success.
func (h *health) result(err error) {
	if err == nil || errors.Is(err, redis.Nil) {
		h.mu.Lock()
		wasDown := h.down
		h.down, h.failures = false, 0
		h.mu.Unlock()
		if wasDown {
			h.metrics.up.Set(1)
			h.log.Info("redis is back: using it again")
		}
		return
	}
	h.metrics.errors.Inc()
	h.mu.Lock()
	wasDown := h.down
	h.failures++
	// One slow answer on a busy machine is not an outage: the breaker
	// opens on a few failures in a row, or at once when it was half open.
	if wasDown || h.failures >= openAfter {
		h.down, h.retryAt = true, time.Now().Add(cooldown)
	}
	down := h.down
	h.mu.Unlock()
	if !wasDown && down {
		h.metrics.up.Set(0)
		h.log.Warn("redis unavailable: serving from the database until it returns", "err", err)
	}
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
