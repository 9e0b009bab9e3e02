package redisx

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// LogClient sends go-redis's own messages (a pool that cannot dial, a
// connection a hook refused) to r's log as structured lines, instead of
// plain text on standard error: payd's log stays one JSON object a line,
// with the fields every other line has. They pass r's outage gate: while
// an outage is logged ("redis unavailable" until "redis is back") they
// are dropped, so an outage is a line or two, not one for every dial that
// fails meanwhile (payd_redis_errors_total counts the failures). go-redis
// keeps one logger for the whole process, so the last call wins.
func (r *Redis) LogClient() { redis.SetLogger(clientLogger{log: r.log, health: r.health}) }

// clientLogger is go-redis's Logging, written through slog. Its messages
// name addresses and errors, never a password.
type clientLogger struct {
	log    *slog.Logger
	health *health
}

func (l clientLogger) Printf(ctx context.Context, format string, v ...any) {
	if l.health.inOutage() {
		return
	}
	if ctx == nil {
		ctx = context.Background()
	}
	l.log.WarnContext(ctx, "redis client", "detail", strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "))
}
