package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
)

// TestBusyPaydTakesAnyNumberOfOrders: a 30-minute soak's clients make
// tens of thousands of orders, more than one statement may name (SQLite
// takes 32,766 variables, MariaDB 65,535 placeholders); asking whether
// they are settled must still answer.
func TestBusyPaydTakesAnyNumberOfOrders(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		db := dbtest.Open(t, migrations.Dialect(dialect))
		ids := make([]string, 70000)
		for i := range ids {
			ids[i] = fmt.Sprintf("ord_%08d", i)
		}
		if why := busyPayd(context.Background(), db, ids); why != "" {
			t.Fatalf("busyPayd of %d orders nobody made = %q, want nothing busy", len(ids), why)
		}
	})
}
