package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/redisx"
	"github.com/payd/payd/service"
	"github.com/payd/payd/telemetry"
)

// wireRedis puts Redis in front of the database when PAYD_REDIS_URL names
// one (ADR 0018): the idempotency engine's fast lock, notifications and
// copies of succeeded answers, and order events across replicas. It returns
// nil without it, and payd runs exactly as it would without this file.
// eventsLive tells the event streams when they may rest their poll.
func wireRedis(cfg Config, idem *idempotency.Engine, changes *service.Changes, metrics *telemetry.Metrics,
	log *slog.Logger) (rds *redisx.Redis, eventsLive func() bool, err error) {
	if cfg.RedisURL == "" {
		return nil, nil, nil
	}
	client, err := redisx.Open(cfg.RedisURL)
	if err != nil {
		return nil, nil, err
	}
	if err := cfg.tracing.Redis(client); err != nil { // a span per command when tracing is on
		return nil, nil, err
	}
	rds = redisx.New(client, log, changes)
	rds.LogClient() // go-redis's own messages as JSON lines behind the outage gate, never plain text on stderr
	metrics.Register(rds.Metrics().Collectors()...)
	idem.Gate, idem.Replays = rds, rds
	warm, stop := context.WithTimeout(context.Background(), 2*time.Second)
	defer stop()
	if err := rds.Warm(warm); err != nil { // not fatal: payd serves from the database until Redis answers
		log.Warn("redis not answering at start; serving from the database until it does", "err", err)
	}
	_, cluster := client.(*redis.ClusterClient)
	log.Info("redis in front of the database", "cluster", cluster) // never the URL: it may hold a password
	return rds, rds.Live, nil
}
