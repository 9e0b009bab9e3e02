package redisx

import (
	"context"
	"encoding/json"
	"time"

	"github.com/payd/payd/domain"
)

// cached is a succeeded record as kept in Redis: every field a replay
// needs, the stored body byte for byte (sealed if the row's is).
type cached struct {
	Method      string `json:"m"`
	Path        string `json:"p"`
	Fingerprint string `json:"f"`
	Code        int    `json:"c"`
	Body        []byte `json:"b"`
	Sealed      bool   `json:"s,omitempty"`
	OrderID     string `json:"o,omitempty"`
	Expires     int64  `json:"e"` // unix nanoseconds
}

// Get returns the copy of a succeeded record (idempotency.Replays).
func (r *Redis) Get(ctx context.Context, scope, key string) (domain.Record, bool) {
	var raw []byte
	if !r.do(ctx, func(ctx context.Context) (err error) {
		raw, err = r.client.Get(ctx, recordKey(scope, key)).Bytes()
		return err
	}) || raw == nil {
		r.metrics.replays.WithLabelValues("miss").Inc()
		return domain.Record{}, false
	}
	var c cached
	if err := json.Unmarshal(raw, &c); err != nil {
		r.metrics.replays.WithLabelValues("miss").Inc()
		return domain.Record{}, false
	}
	r.metrics.replays.WithLabelValues("hit").Inc()
	return domain.Record{Scope: scope, Key: key, Method: c.Method, Path: c.Path, Fingerprint: c.Fingerprint,
		Status: domain.RecordSucceeded, ResponseStatus: c.Code, ResponseBody: c.Body, Sealed: c.Sealed, OrderID: c.OrderID,
		CompletedBy: domain.CompletedByRequest, ExpiresAt: time.Unix(0, c.Expires).UTC()}, true
}

// Put keeps a copy of a succeeded record until its expiry at the latest
// (idempotency.Replays).
func (r *Redis) Put(ctx context.Context, rec domain.Record) {
	ttl := time.Until(rec.ExpiresAt)
	if rec.Status != domain.RecordSucceeded || ttl < time.Millisecond {
		return
	}
	raw, err := json.Marshal(cached{Method: rec.Method, Path: rec.Path, Fingerprint: rec.Fingerprint, Code: rec.ResponseStatus,
		Body: rec.ResponseBody, Sealed: rec.Sealed, OrderID: rec.OrderID, Expires: rec.ExpiresAt.UnixNano()})
	if err != nil {
		return
	}
	r.do(ctx, func(ctx context.Context) error {
		return r.client.Set(ctx, recordKey(rec.Scope, rec.Key), raw, ttl).Err()
	})
}
