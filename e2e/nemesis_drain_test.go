package e2e

import (
	"net/http"
	"testing"

	"github.com/payd/payd/internal/nemesis"
)

// TestNemDrainUnsettled: the drain sends every key again until a round in
// which none could run anew the next time. A key that heard another key
// holds the order (409 order_payment_in_progress) is one: its next
// request runs anew once the other is done, and may answer 202, which
// the sweep may not hear (seed 1 of the sqlite setup did so).
func TestNemDrainUnsettled(t *testing.T) {
	for _, tt := range []struct {
		name string
		op   nemesis.Op
		want bool
	}{
		{"no answer", nemesis.Op{}, true},
		{"processing", nemesis.Op{Status: http.StatusAccepted, RetryAfter: "2"}, true},
		{"key in use", nemesis.Op{Status: http.StatusConflict, RetryAfter: "1", Body: []byte(`{"code":"idempotency_key_in_use"}`)}, true},
		{"another key holds the order", nemesis.Op{Status: http.StatusConflict, Body: []byte(`{"code":"order_payment_in_progress"}`)}, true},
		{"paid", nemesis.Op{Status: http.StatusOK, Body: []byte(`{"status":"paid"}`)}, false},
		{"declined", nemesis.Op{Status: http.StatusPaymentRequired, Body: []byte(`{"code":"card_declined"}`)}, false},
		{"already paid", nemesis.Op{Status: http.StatusConflict, Body: []byte(`{"code":"order_not_payable"}`)}, false},
	} {
		if got := nemDrainUnsettled(tt.op); got != tt.want {
			t.Errorf("%s: nemDrainUnsettled = %v, want %v", tt.name, got, tt.want)
		}
	}
}
