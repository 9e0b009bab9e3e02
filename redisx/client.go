// Package redisx is payd's optional Redis layer (ADR 0018): a fast lock and
// notifications in front of the idempotency records, fast copies of
// succeeded answers, and order events shared across replicas. The database
// stays the truth; Redis only saves work and latency, and payd serves from
// the database whenever Redis is down, slow or has forgotten.
package redisx

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Timeout bounds one Redis command: Redis must never add more than tens of
// milliseconds to a request, so a slow Redis counts as a down one.
const Timeout = 50 * time.Millisecond

// Open returns a client for PAYD_REDIS_URL: redis://host:port/db for one
// server, or a cluster as redis://h1:p1?addr=h2:p2&addr=h3:p3 (go-redis's
// cluster URL form), which gets a cluster client. Nothing is dialled yet.
func Open(rawURL string) (redis.UniversalClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
		return nil, fmt.Errorf("PAYD_REDIS_URL: want redis://host:port/db or redis://h1:p1?addr=h2:p2&addr=h3:p3")
	}
	if len(u.Query()["addr"]) > 0 {
		opts, err := redis.ParseClusterURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("PAYD_REDIS_URL: %w", err)
		}
		opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout, opts.PoolTimeout = 2*Timeout, Timeout, Timeout, Timeout
		opts.MaxRetries = -1 // one try: on failure the database answers
		// go-redis re-reads the slot map on MOVED but not when a master is
		// unreachable, and on its own only every 60 s: after a failover it
		// would keep dialling the dead master for up to a minute. One
		// CLUSTER SLOTS a second (only while commands are sent) finds the
		// promoted replica within about a second.
		opts.ClusterStateReloadInterval = time.Second
		return redis.NewClusterClient(opts), nil
	}
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("PAYD_REDIS_URL: %w", err)
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout, opts.PoolTimeout = 2*Timeout, Timeout, Timeout, Timeout
	opts.MaxRetries = -1
	return redis.NewClient(opts), nil
}

// lockKey and recordKey name a key's Redis entries (ADR 0063). Their hash
// tag is the scope and the key together: a key's lock and its record
// land in one cluster slot, and the keys of one caller spread over every
// master (the merchant, one scope, carries most of the traffic). A key
// may hold a '}', which ends the tag early; the two names share every
// byte up to it, so they still share a slot.
func lockKey(scope, key string) string   { return keyTag(scope, key) + ":lock" }
func recordKey(scope, key string) string { return keyTag(scope, key) + ":rec" }

// LockName is the Redis name of the lock payd takes for scope's key: for
// an operator, or a test, looking for a key's entries or its cluster slot.
func LockName(scope, key string) string { return lockKey(scope, key) }

// keyTag is "payd:{LEN:SCOPE:KEY}": the scope's length keeps names
// apart whose scope and key would otherwise run together ("a:b" and "c",
// "a" and "b:c").
func keyTag(scope, key string) string {
	return "payd:{" + strconv.Itoa(len(scope)) + ":" + scope + ":" + key + "}"
}
