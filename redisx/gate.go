package redisx

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// errSkipped: Redis is down, the caller goes to the database.
var errSkipped = errors.New("redis skipped")

// release deletes a lock only if it still holds the caller's token: a lock
// that expired and was taken by another request (in this process or
// another) is not the caller's to free.
var release = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// Acquire takes the key's lock with SET NX PX lease (idempotency.Gate) and
// returns the lock's token, which only its holder has and passes back to
// Release or Unlock. "": another request holds it — a duplicate stopped
// before the database. An error: Redis cannot tell, go to the database.
func (r *Redis) Acquire(ctx context.Context, scope, key string, lease time.Duration) (string, error) {
	k := lockKey(scope, key)
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	token := r.id + ":" + hex.EncodeToString(b) // this request's: no other may free the lock
	var ok bool
	if !r.do(ctx, func(ctx context.Context) (err error) {
		ok, err = r.client.SetNX(ctx, k, token, lease).Result()
		return err
	}) {
		return "", errSkipped
	}
	if !ok {
		r.metrics.duplicates.Inc()
		return "", nil
	}
	return token, nil
}

// Watch registers a watcher of the key (idempotency.Gate).
func (r *Redis) Watch(scope, key string) (<-chan struct{}, func()) {
	name := watchName(scope, key)
	ch := make(chan struct{}, 1)
	r.mu.Lock()
	if r.watchers[name] == nil {
		r.watchers[name] = make(map[chan struct{}]struct{})
	}
	r.watchers[name][ch] = struct{}{}
	r.mu.Unlock()
	return ch, func() {
		r.mu.Lock()
		delete(r.watchers[name], ch)
		if len(r.watchers[name]) == 0 {
			delete(r.watchers, name)
		}
		r.mu.Unlock()
	}
}

// Release frees the key's lock if it still holds token and announces that
// the request finished with the key (idempotency.Gate); with token "" it
// only announces. Watchers in this process are woken at once, whether or
// not Redis answers.
func (r *Redis) Release(ctx context.Context, scope, key, token string) {
	k := lockKey(scope, key)
	name := watchName(scope, key)
	r.wake(name)
	r.do(ctx, func(ctx context.Context) error {
		if token != "" {
			if err := release.Run(ctx, r.client, []string{k}, token).Err(); err != nil {
				return err
			}
		}
		return r.client.Publish(ctx, doneChannel, name).Err()
	})
}

// Unlock frees the key's lock if it still holds token, announcing
// nothing (idempotency.Gate).
func (r *Redis) Unlock(ctx context.Context, scope, key, token string) {
	k := lockKey(scope, key)
	if token != "" {
		r.do(ctx, func(ctx context.Context) error { return release.Run(ctx, r.client, []string{k}, token).Err() })
	}
}

// Live reports whether notifications are flowing (idempotency.Gate).
func (r *Redis) Live() bool { return r.listening.Load() && r.health.isUp() }

// wake signals the watchers of one key in this process.
func (r *Redis) wake(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for ch := range r.watchers[name] {
		signal(ch)
	}
}
