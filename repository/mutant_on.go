//go:build paydfault

package repository

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/payd/payd/domain"
)

// Test builds only (go build -tags paydfault): a mutant is payd with one
// guard removed. The nemesis runs one to prove that its checker notices
// what the guard prevents; a shipped binary has no way to remove a guard.

// Mutants are the guards Mutate can remove.
var Mutants = []string{"claim_unguarded", "refund_unguarded", "stock_unguarded"}

var claimUnguarded, stockUnguarded atomic.Bool

// Mutate removes the named guard from every statement sent from now on;
// "" removes none.
//
//   - claim_unguarded: the order claim matches the order whatever its
//     status and version, so a paid order can be claimed and charged again
//     and two racing requests can both claim it.
//   - refund_unguarded: a refund is reserved on an order whatever is left
//     of its amount, so racing refunds can refund more than was charged.
//   - stock_unguarded: an order takes its units from a product whatever
//     is left of its stock, so a buyer asking for more than is left is no
//     longer refused out_of_stock by the take: only the CHECK (stock >= 0)
//     behind it stops the sale, as a failed statement (ADR 0059).
//
// The statement is rewritten here, before payd serves, with the guard
// kept in the text but made always true: the arguments stay as they are.
func Mutate(name string) error {
	switch name {
	case "":
	case "claim_unguarded":
		claimUnguarded.Store(true)
	case "stock_unguarded":
		stockUnguarded.Store(true)
	case "refund_unguarded":
		refundMoves[domain.MoveReserve] = alwaysTrue(refundMoves[domain.MoveReserve], takenMinor+" - refunded_minor - refund_reserved_minor >= ?")
	default:
		return fmt.Errorf("unknown mutant %q (known: %v)", name, Mutants)
	}
	return nil
}

func mutantClaim() bool { return claimUnguarded.Load() }

func mutantStock() bool { return stockUnguarded.Load() }

// takeStockUnguarded is takeStockOf with its guard that enough is left
// made always true: it matches every counted product of the SKU.
var takeStockUnguarded = alwaysTrue(takeStockOf, "stock >= ?")

// claimOrderUnguarded is claimOrder without its status guard (and, as
// claimStatement sends it, without claimOrderAt's version guard).
var claimOrderUnguarded = `UPDATE orders
		SET status = '` + string(domain.StatusProcessing) + `', pay_request_id = ?, version = version + 1, updated_at = ?
		WHERE id = ? AND expires_at > ?`

// alwaysTrue weakens guard, which must occur once in query, to
// "(guard OR 1 = 1)".
func alwaysTrue(query, guard string) string {
	if strings.Count(query, guard) != 1 {
		panic(fmt.Sprintf("mutant: %q occurs %d times in %s", guard, strings.Count(query, guard), query))
	}
	return strings.Replace(query, guard, "("+guard+" OR 1 = 1)", 1)
}
