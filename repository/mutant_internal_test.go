//go:build paydfault

package repository

import (
	"strings"
	"testing"

	"github.com/payd/payd/domain"
)

// Each mutant names a guard that its statements hold exactly once, so
// weakening it cannot silently do nothing; an unknown name is refused.
func TestMutantsWeakenTheirGuard(t *testing.T) {
	if err := Mutate("no_such_mutant"); err == nil {
		t.Fatal(`Mutate("no_such_mutant") = nil, want an error`)
	}
	guard := takenMinor + " - refunded_minor - refund_reserved_minor >= ?"
	if got := alwaysTrue(refundMoves[domain.MoveReserve], guard); !strings.Contains(got, "("+guard+" OR 1 = 1)") {
		t.Errorf("refund_unguarded leaves %s", got)
	}
	if !strings.Contains(takeStockUnguarded, "(stock >= ? OR 1 = 1)") {
		t.Errorf("stock_unguarded leaves %s", takeStockUnguarded)
	}
	defer func() {
		if recover() == nil {
			t.Error("alwaysTrue of a guard the statement lacks did not panic")
		}
	}()
	alwaysTrue(cancelOrder, "pay_request_id = ?")
}
