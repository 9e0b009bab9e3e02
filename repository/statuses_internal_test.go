package repository

import (
	"testing"

	"github.com/payd/payd/domain"
)

func TestSQLStatuses(t *testing.T) {
	if got := sqlStatuses(domain.DiscrepancyOpen, domain.DiscrepancyResolving); got != "('open', 'resolving')" {
		t.Errorf("sqlStatuses = %s", got)
	}
	g := guardOf(domain.RecordMachine, domain.RecordEventRetry)
	if g.from != "('failed')" || g.to != "'processing'" {
		t.Errorf("guardOf(record, retry) = %+v", g)
	}
	for _, bad := range []string{"", "x'; DROP TABLE orders; --", "Open", "open resolved"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("sqlStatus(%q) did not panic", bad)
				}
			}()
			sqlStatus(bad)
		}()
	}
	defer func() {
		if recover() == nil {
			t.Error("sqlStatuses() of no status did not panic")
		}
	}()
	sqlStatuses[domain.RefundStatus]()
}
