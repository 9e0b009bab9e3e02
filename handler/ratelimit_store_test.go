package handler

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/payd/payd/telemetry"
)

// TestBucketsBounded: however many keys arrive, at most max buckets are
// kept, the least recently used going first; a key in use stays.
func TestBucketsBounded(t *testing.T) {
	b := newBuckets(rate.Limit(slow), 3, 100)
	now := time.Unix(1_700_000_000, 0)
	hot := b.get("hot", now)
	hot.AllowN(now, 1)
	for i := range 100_000 {
		b.get(strconv.Itoa(i), now)
		if i%50 == 0 {
			b.get("hot", now)
		}
		if n := b.len(); n > 100 {
			t.Fatalf("after %d keys: %d buckets, want at most 100", i+1, n)
		}
	}
	if got := b.lookup("hot"); got != hot || got.TokensAt(now) != 2 {
		t.Errorf("the key in use lost its bucket (tokens %v), want it kept with 2 tokens", got.TokensAt(now))
	}
	if b.lookup("0") != nil {
		t.Error("the first, least recently used key is still kept")
	}
}

// TestBucketsForgetIdle: a bucket idle for as long as it takes to refill
// is full again; it is dropped at the next new key, and its key gets a
// full bucket, the same answer as if it had been kept.
func TestBucketsForgetIdle(t *testing.T) {
	b := newBuckets(rate.Limit(2), 4, 1000) // refills from empty in 2s
	now := time.Unix(1_700_000_000, 0)
	for i := range 50 {
		lim := b.get(strconv.Itoa(i), now)
		for lim.AllowN(now, 1) {
		}
	}
	b.get("late", now.Add(time.Second)) // not yet idle long enough
	if n := b.len(); n != 51 {
		t.Fatalf("buckets = %d, want 51", n)
	}
	later := now.Add(2 * time.Second)
	if tokens := b.lookup("0").TokensAt(later); tokens != 4 {
		t.Fatalf("idle bucket holds %v at 2s, want full (4)", tokens)
	}
	b.get("new", later)
	if n := b.len(); n != 2 {
		t.Errorf("buckets after the idle ones went = %d, want 2 (late, new)", n)
	}
	if tokens := b.get("0", later).TokensAt(later); tokens != 4 {
		t.Errorf("a forgotten key's bucket holds %v, want full (4)", tokens)
	}
}

// TestRateLimitMemoryBounded: a million client addresses, each sending
// once, keep at most maxLimiterKeys buckets and their memory.
func TestRateLimitMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("a million requests: not in -short")
	}
	l := newLimit(telemetry.LimitIP, slow, 1, telemetry.NewMetrics())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 1_000_000 {
		l.take(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if n := l.keys.len(); n != maxLimiterKeys {
		t.Errorf("buckets = %d, want the cap, %d", n, maxLimiterKeys)
	}
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if perKey := grown / maxLimiterKeys; perKey > 400 {
		t.Errorf("heap grew %d bytes: %d a kept key, want at most 400", grown, perKey)
	}
	t.Logf("heap grew %d KiB for %d kept keys", grown>>10, l.keys.len())
}

// BenchmarkRateLimit is one request through a route with the IP limit and
// without it, on a bare Echo: the difference is the limit's cost. The
// limit never refuses (its rate is far beyond the loop's); "many" spreads
// the requests over 10,000 client addresses.
//
//	go test -run '^$' -bench BenchmarkRateLimit -benchmem ./handler
func BenchmarkRateLimit(b *testing.B) {
	ok := func(c echo.Context) error { return c.NoContent(http.StatusNoContent) }
	for _, tt := range []struct {
		name  string
		rl    RateLimits
		addrs int
	}{
		{"off", RateLimits{}, 1},
		{"one", RateLimits{Rate: 1e9, Burst: 1e9}, 1},
		{"many", RateLimits{Rate: 1e9, Burst: 1e9}, 10_000},
	} {
		b.Run(tt.name, func(b *testing.B) {
			e := echo.New()
			e.IPExtractor = ipExtractor(nil)
			e.GET("/x", ok, newLimiters(tt.rl, telemetry.NewMetrics()).public())
			reqs := make([]*http.Request, tt.addrs)
			for i := range reqs {
				reqs[i] = httptest.NewRequest(http.MethodGet, "/x", nil)
				reqs[i].RemoteAddr = fmt.Sprintf("10.0.%d.%d:5000", i>>8, i&255)
			}
			w := &nullWriter{h: http.Header{}}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				clear(w.h)
				e.ServeHTTP(w, reqs[i%len(reqs)])
				if w.code != http.StatusNoContent {
					b.Fatalf("GET /x = %d, want 204", w.code)
				}
				i++
			}
		})
	}
}

// nullWriter is a ResponseWriter that keeps the status and drops the body,
// so that the benchmark measures the server, not a recorder.
type nullWriter struct {
	h    http.Header
	code int
}

func (w *nullWriter) Header() http.Header         { return w.h }
func (w *nullWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *nullWriter) WriteHeader(code int)        { w.code = code }
