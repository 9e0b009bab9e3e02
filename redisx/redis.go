package redisx

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Channels of payd's notifications. Plain PUBLISH reaches every
// subscriber of a Redis Cluster, whichever node it is connected to.
const (
	doneChannel   = "payd:done"   // payload: scope "\n" key — a request finished with the key
	ordersChannel = "payd:orders" // payload: order ID — the order changed
)

// Local is this process's own order-event fan-out (service.Changes): the
// Redis layer hands it the changes other replicas announce.
type Local interface {
	OrderChanged(orderID string)
	// Resync signals every subscriber: changes may have been missed while
	// notifications were not flowing.
	Resync()
}

// Redis is payd's Redis layer: the idempotency engine's Gate and Replays,
// and an Observer of order changes that announces them to every replica.
// Build it with New, then run Listen until shutdown.
type Redis struct {
	client  redis.UniversalClient
	log     *slog.Logger
	health  *health
	metrics *Metrics
	local   Local
	id      string // this process, in its lock tokens

	listening atomic.Bool // subscribed to the channels right now

	mu       sync.Mutex
	watchers map[string]map[chan struct{}]struct{} // scope "\n" key → watchers
}

// New returns the Redis layer over client; local receives the order changes
// of other replicas (nil: none).
func New(client redis.UniversalClient, log *slog.Logger, local Local) *Redis {
	m := newMetrics()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &Redis{client: client, log: log, metrics: m, local: local, id: hex.EncodeToString(b),
		health:   &health{log: log, metrics: m},
		watchers: make(map[string]map[chan struct{}]struct{})}
}

// Metrics returns the layer's metrics.
func (r *Redis) Metrics() *Metrics { return r.metrics }

// Close closes the client.
func (r *Redis) Close() error { return r.client.Close() }

// do runs one command unless Redis is known to be down, with the short
// timeout, and records how it went. It reports false when the command was
// skipped or failed (the caller falls back to the database).
func (r *Redis) do(ctx context.Context, cmd func(ctx context.Context) error) bool {
	if !r.health.allow() {
		return false
	}
	ctx, cancel := bounded(ctx)
	defer cancel()
	err := cmd(ctx)
	r.health.result(err)
	return err == nil || err == redis.Nil
}

// Listen receives the notifications of every replica until ctx ends,
// resubscribing after Redis comes back. While it is not subscribed the
// gate reports itself not live, and the event streams poll the database.
func (r *Redis) Listen(ctx context.Context) {
	for ctx.Err() == nil {
		ps := r.client.Subscribe(ctx, doneChannel, ordersChannel)
		stop := context.AfterFunc(ctx, func() { _ = ps.Close() }) // a blocked receive ends at once
		r.receive(ctx, ps)
		stop()
		_ = ps.Close()
		r.listening.Store(false)
		select {
		case <-ctx.Done():
		case <-time.After(cooldown):
		}
	}
}

// receive handles one subscription until it fails. An idle subscription
// is pinged; one that answers nothing, not even the pong, has lost Redis.
func (r *Redis) receive(ctx context.Context, ps *redis.PubSub) {
	subscribed, pinged := 0, false
	for {
		msg, err := ps.ReceiveTimeout(ctx, 2*time.Second)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && subscribed == 2 && !pinged {
				pinged = true
				if ps.Ping(ctx) == nil {
					continue
				}
			}
			r.health.result(err)
			return
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				if subscribed++; subscribed == 2 {
					r.listening.Store(true)
					r.health.result(nil)
					r.resync()
				}
			}
		case *redis.Message:
			r.dispatch(m.Channel, m.Payload)
		}
	}
}

// dispatch hands one notification to whom it concerns in this process.
func (r *Redis) dispatch(channel, payload string) {
	switch channel {
	case doneChannel:
		r.wake(payload)
	case ordersChannel:
		if r.local != nil {
			r.local.OrderChanged(payload)
		}
	}
}

// resync wakes every watcher and event stream of this process: they look
// at the database once, in case a notification was lost while the
// subscription was down.
func (r *Redis) resync() {
	r.mu.Lock()
	for _, ws := range r.watchers {
		for ch := range ws {
			signal(ch)
		}
	}
	r.mu.Unlock()
	if r.local != nil {
		r.local.Resync()
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func watchName(scope, key string) string { return scope + "\n" + key }

// Warm dials Redis before the first request needs it: a ping to the server,
// or to every master of a cluster, which also loads the cluster's slot map.
// Without it the first commands of a new process pay for the dial and the
// slot map inside their 50 ms budget, and under load they fail and send the
// first requests to the database. ctx bounds the whole warm-up.
func (r *Redis) Warm(ctx context.Context) error {
	ping := func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }
	if cc, ok := r.client.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, ping) // loads the slot map first
	}
	return r.client.Ping(ctx).Err()
}
