package service

import (
	"context"

	"github.com/payd/payd/domain"
)

// What caused a change is told to the merchant with its event (ADR 0053).
// The entry points that know it — a webhook's delivery, the recoverer's
// attempt, a reconciliation run, an operator's request — put it in the
// context (WithCause); the changes read it there (causeIn), and fall back
// to what they know themselves (the pay request's key, the ledger source).

type causeKey struct{}

// WithCause returns ctx carrying c as the cause of the changes made with
// it. The innermost entry point names it: an operator's request that runs
// a reconciliation tells its changes as the run's. A cause of an unknown
// kind is not carried.
func WithCause(ctx context.Context, c domain.Cause) context.Context {
	if !c.Kind.Valid() {
		return ctx
	}
	return context.WithValue(ctx, causeKey{}, c)
}

// causeIn is the cause ctx carries, else fallback.
func causeIn(ctx context.Context, fallback domain.Cause) domain.Cause {
	if c, ok := ctx.Value(causeKey{}).(domain.Cause); ok {
		return c
	}
	return fallback
}

// sourceCause is the cause a change learned from src is told with when
// its context carries none; ref is what the change knows of it (the pay
// request's key, the recoverer's attempt).
func sourceCause(ctx context.Context, src domain.LedgerSource, ref string) domain.Cause {
	kind := map[domain.LedgerSource]domain.CauseKind{
		domain.SourcePayReply:       domain.CausePayRequest,
		domain.SourceWebhook:        domain.CauseWebhook,
		domain.SourceRecoverer:      domain.CauseRecoverer,
		domain.SourceReconciliation: domain.CauseReconciliation,
		domain.SourceOperator:       domain.CauseOperator,
	}[src]
	if kind == "" {
		kind = domain.CauseOperator
	}
	return causeIn(ctx, domain.Cause{Kind: kind, Ref: ref})
}

// requestKey is the idempotency key of the request ctx carries the cause
// of (a customer's or the merchant's), "" when it carries none.
func requestKey(ctx context.Context) string {
	c, ok := ctx.Value(causeKey{}).(domain.Cause)
	if !ok || (c.Kind != domain.CauseCustomer && c.Kind != domain.CauseMerchant) {
		return ""
	}
	return c.Ref
}
