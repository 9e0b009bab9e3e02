package main

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(100-i) * time.Millisecond // reversed: percentile sorts
	}
	tests := []struct {
		name string
		d    []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", []time.Duration{7}, 99, 7},
		{"median of two is the lower", []time.Duration{2, 1}, 50, 1},
		{"p50 of 1..100", hundred, 50, 50 * time.Millisecond},
		{"p99 of 1..100", hundred, 99, 99 * time.Millisecond},
		{"p100 is the largest", []time.Duration{3, 9, 1}, 100, 9},
		{"p99 of 3 is the largest", []time.Duration{3, 9, 1}, 99, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(append([]time.Duration(nil), tt.d...), tt.p); got != tt.want {
				t.Errorf("percentile(%v, %v) = %v, want %v", tt.d, tt.p, got, tt.want)
			}
		})
	}
}
