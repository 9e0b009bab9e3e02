package domain_test

import (
	"testing"
	"time"

	"github.com/payd/payd/domain"
)

func TestOrderClaimable(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		status    domain.OrderStatus
		expires   time.Time
		expired   bool
		claimable bool
	}{
		{domain.StatusPending, now.Add(time.Second), false, true},
		{domain.StatusPending, now, true, false}, // expiry is exclusive, as the claim's guard
		{domain.StatusPending, now.Add(-time.Second), true, false},
		{domain.StatusProcessing, now.Add(time.Hour), false, false},
		{domain.StatusPaid, now.Add(time.Hour), false, false},
	}
	for _, c := range cases {
		o := domain.Order{Status: c.status, ExpiresAt: c.expires}
		if got := o.Expired(now); got != c.expired {
			t.Errorf("%s expiring %s: Expired = %v, want %v", c.status, c.expires, got, c.expired)
		}
		if got := o.Claimable(now); got != c.claimable {
			t.Errorf("%s expiring %s: Claimable = %v, want %v", c.status, c.expires, got, c.claimable)
		}
	}
}
