package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// logLines decodes JSON log output, one object a line.
func logLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// TestTraceLogs: a line logged with a request's context gets its
// request_id once, even if the caller named it too; without one, nothing.
func TestTraceLogs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(TraceLogs(slog.NewJSONHandler(&buf, nil))).With("component", "test")
	ctx := WithRequestID(context.Background(), "rid-1")
	log.InfoContext(ctx, "a")
	log.InfoContext(ctx, "b", "request_id", "rid-1")
	log.InfoContext(context.Background(), "c")
	lines := logLines(t, buf.Bytes())
	if len(lines) != 3 {
		t.Fatalf("got %d log lines, want 3", len(lines))
	}
	for i, want := range []any{"rid-1", "rid-1", nil} {
		if lines[i]["request_id"] != want {
			t.Errorf("line %d request_id = %v, want %v", i, lines[i]["request_id"], want)
		}
	}
	if n := strings.Count(strings.Split(buf.String(), "\n")[1], `"request_id"`); n != 1 {
		t.Errorf("a line naming request_id itself carries it %d times, want 1", n)
	}
	if th, ok := TraceLogs(TraceLogs(slog.DiscardHandler)).(traceHandler); !ok || th.Handler != slog.DiscardHandler {
		t.Errorf("TraceLogs(TraceLogs(h)) = %#v, want h wrapped once", th)
	}
}
