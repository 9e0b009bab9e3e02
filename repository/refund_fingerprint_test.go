package repository_test

import (
	"strings"
	"testing"
	"time"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// TestRefundRequestFingerprint: a manual refund keeps the fingerprint of
// the request that created it (a SHA-256 in hex), and a refund without one
// reads back as unknown (empty).
func TestRefundRequestFingerprint(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRefundStore(dbtest.Open(t, d))
		fp := strings.Repeat("ab", 32)
		with := newRefund(newID(), time.Now().UTC())
		with.RequestFingerprint = fp
		createRefund(t, s, with)
		if got := findRefund(t, s, with.ProviderKey).RequestFingerprint; got != fp {
			t.Errorf("fingerprint = %q, want %q", got, fp)
		}
		without := createRefund(t, s, newRefund(newID(), time.Now().UTC()))
		if got := findRefund(t, s, without.ProviderKey).RequestFingerprint; got != "" {
			t.Errorf("fingerprint of a refund stored without one = %q, want empty", got)
		}
		rs, err := s.ListByOrder(t.Context(), with.OrderID)
		if err != nil || len(rs) != 1 || rs[0].RequestFingerprint != fp {
			t.Errorf("ListByOrder = %+v, %v; want the refund with its fingerprint", rs, err)
		}
	})
}
