package redisx

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts what the Redis layer did: replays served (hits) or not
// (misses), commands that failed, calls that skipped a Redis known to be
// down, and duplicates stopped by the lock before reaching the database.
type Metrics struct {
	replays    *prometheus.CounterVec
	errors     prometheus.Counter
	skipped    prometheus.Counter
	duplicates prometheus.Counter
	up         prometheus.Gauge
}

func newMetrics() *Metrics {
	m := &Metrics{
		replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payd_redis_replays_total", Help: "Lookups of a stored answer in Redis, by result (hit, miss).",
		}, []string{"result"}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payd_redis_errors_total", Help: "Redis commands that failed or timed out (payd went on with the database).",
		}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payd_redis_skipped_total", Help: "Redis commands not sent because Redis was down (served from the database).",
		}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payd_redis_duplicates_stopped_total", Help: "Concurrent duplicates kept from the database: lock attempts that found the key held in Redis (a duplicate that waits through several notifications counts once per attempt).",
		}),
		up: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "payd_redis_up", Help: "1 while payd uses Redis, 0 while it serves from the database alone.",
		}),
	}
	m.replays.WithLabelValues("hit")
	m.replays.WithLabelValues("miss")
	m.up.Set(1)
	return m
}

// Collectors returns the metrics, for the registry of telemetry.Metrics.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.replays, m.errors, m.skipped, m.duplicates, m.up}
}
