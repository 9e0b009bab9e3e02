package redisx

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// LogTo sends go-redis's own messages (a pool that cannot dial, a
// connection a hook refused) to log as structured lines, instead of plain
// text on standard error: payd's log stays one JSON object a line, with
// the fields every other line has. go-redis keeps one logger for the
// whole process, so the last call wins.
func LogTo(log *slog.Logger) { redis.SetLogger(clientLogger{log}) }

// clientLogger is go-redis's Logging, written through slog. Its messages
// name addresses and errors, never a password.
type clientLogger struct{ log *slog.Logger }

func (l clientLogger) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	l.log.WarnContext(ctx, "redis client", "detail", strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "))
}
