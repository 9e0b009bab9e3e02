package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
)

// TestRedisDownLogsJSON: a payd process whose Redis is a closed port serves
// from the database, and its log (its standard error) stays one JSON object
// a line: go-redis's own complaints (a pool that cannot dial) arrive as
// payd's structured lines, never as go-redis's plain text.
func TestRedisDownLogsJSON(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := ln.Addr().String()
		ln.Close() // nothing listens there now
		p := startPaydProc(t, "payd-redis-down", paydEnv(dbtest.NewURL(t, migrations.Dialect(dialect)), "", env{"PAYD_REDIS_URL": "redis://" + closed + "/0"}))
		_, token := p.register(newEmail())
		if r := p.pay(token, p.order(token, "3.00"), uuid.NewString(), "pm_ok"); r.Status != http.StatusOK {
			t.Fatalf("pay with Redis down = %d %s, want 200 (served from the database)", r.Status, r.Body)
		}
		eventually(t, 10*time.Second, "no go-redis line in payd's log", func() bool {
			return strings.Contains(p.logs.String(), `"msg":"redis client"`)
		})
		p.stop()
		seen := 0
		for line := range strings.SplitSeq(p.logs.String(), "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil || m["time"] == nil || m["level"] == nil {
				t.Errorf("log line is not one of payd's JSON lines: %q", line)
				continue
			}
			if m["msg"] == "redis client" {
				seen++
				if d, _ := m["detail"].(string); m["level"] != "WARN" || !strings.Contains(d, closed) {
					t.Errorf("go-redis line = %q, want a WARN naming the address it could not dial", line)
				}
			}
		}
		if seen == 0 {
			t.Error("no go-redis line went through payd's logger")
		}
	})
}
