package main

import (
	"math"
	"slices"
	"time"
)

// percentile returns the p-th percentile (0 < p <= 100) of d by the
// nearest-rank method: the smallest value with at least p% of the values at
// or below it. d is sorted in place; an empty d gives 0.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	rank := int(math.Ceil(p * float64(len(d)) / 100))
	return d[min(max(rank, 1), len(d))-1]
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
