package redisx

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHalfOpenIsOneProbe: once the breaker's cooldown has passed, one
// caller of many concurrent ones probes Redis; the others keep skipping it
// until the probe reports, and a failed probe starts a new cooldown.
func TestHalfOpenIsOneProbe(t *testing.T) {
	h := &health{log: slog.New(slog.DiscardHandler), metrics: newMetrics()}
	down := errors.New("connection refused")
	for range openAfter {
		h.result(down)
	}
	if h.allow() {
		t.Fatal("breaker open: a call was allowed during the cooldown")
	}
	time.Sleep(cooldown + 50*time.Millisecond)
	var probes atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if h.allow() {
				probes.Add(1)
			}
		})
	}
	wg.Wait()
	if n := probes.Load(); n != 1 {
		t.Fatalf("%d callers probed Redis after the cooldown, want 1", n)
	}
	h.result(down) // the probe failed: a new cooldown
	if h.allow() {
		t.Error("a call was allowed right after the probe failed")
	}
	time.Sleep(cooldown + 50*time.Millisecond)
	if !h.allow() {
		t.Fatal("no probe after the second cooldown")
	}
	h.result(nil) // the probe succeeded: the breaker closes
	if first, second := h.allow(), h.allow(); !first || !second {
		t.Error("breaker closed: calls still skipped")
	}
}
