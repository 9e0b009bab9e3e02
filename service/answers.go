package service

import (
	"context"

	"github.com/payd/payd/domain"
)

// SettledAnswers keeps the answers of pay requests that became known
// other than by the request's own reply, so a retry with the request's key
// is told the truth instead of a stale 202. Unlike an Observer it writes:
// the answer is stored where the request's replays read it (its
// idempotency record). Checkout treats the write as best effort: a lost
// one leaves the record processing, and the next request with the key
// takes over after the lease and recovers the same outcome from the order.
type SettledAnswers interface {
	// PaymentSettled stores the answer of the pay request a.RequestID made
	// for order o, now known other than by that request's own reply: an
	// outcome that arrived later (webhook, recoverer), or a refusal the
	// request's reply alone would not record as an attempt. outcome is what
	// Checkout.Pay would now return (nil: the order as it is now); final
	// says whether a retry with the key must be told this outcome rather
	// than run again.
	PaymentSettled(ctx context.Context, o domain.Order, a domain.Attempt, outcome error, final bool) error
}
