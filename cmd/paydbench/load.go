package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// result is what one phase measured: every request's latency, how long the
// phase took, and the requests that failed (with the first failure).
type result struct {
	latencies []time.Duration
	elapsed   time.Duration
	errors    int64
	firstErr  error
}

// drive runs do(ctx, i) for i in [0, n) on c concurrent workers, each
// taking the next i as soon as it is free, and times every call.
func drive(ctx context.Context, c, n int, do func(ctx context.Context, i int) error) result {
	r := result{latencies: make([]time.Duration, n)}
	var next, failed atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range min(c, n) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				t := time.Now()
				err := do(ctx, i)
				r.latencies[i] = time.Since(t)
				if err != nil {
					failed.Add(1)
					once.Do(func() { r.firstErr = fmt.Errorf("request %d: %w", i, err) })
				}
			}
		})
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	r.errors = failed.Load()
	if r.firstErr == nil && ctx.Err() != nil {
		r.firstErr = ctx.Err()
	}
	return r
}
