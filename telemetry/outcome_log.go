package telemetry

import (
	"context"
	"log/slog"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// OutcomeLog is the service.Observer that writes one log line for each
// payment outcome, newly recorded discrepancy and automatic refund, logged
// with the context the outcome was learnt in, so the line carries the
// request's request_id and trace_id (TraceLogs). It logs identifiers,
// amounts and statuses only: payd holds no card data, and no token, key or
// secret is ever passed to it.
type OutcomeLog struct {
	service.NopObserver
	Log *slog.Logger
}

// PaymentResult logs a payment's outcome: paid and declined as information,
// unknown and held as warnings (an operator or the recoverer must act).
func (l OutcomeLog) PaymentResult(ctx context.Context, a domain.Attempt, result service.PaymentOutcome) {
	level := slog.LevelInfo
	if result.NeedsAction() {
		level = slog.LevelWarn
	}
	l.Log.Log(ctx, level, "payment outcome", "result", string(result), "order_id", a.OrderID, "attempt_id", a.ID,
		"amount", domain.FormatAmount(a.Amount, a.Currency), "currency", string(a.Currency))
}

// DiscrepancyRecorded logs a newly recorded discrepancy as a warning: its
// id and status, what it is about and, when a run found it, the run.
func (l OutcomeLog) DiscrepancyRecorded(ctx context.Context, d domain.Discrepancy) {
	attrs := []any{"discrepancy_id", d.ID, "type", string(d.Type), "status", string(d.Status), "order_id", d.OrderID,
		"attempt_id", d.AttemptID, "charge_id", d.ChargeID}
	if d.RunID != "" {
		attrs = append(attrs, "run_id", d.RunID)
	}
	l.Log.WarnContext(ctx, "discrepancy recorded", attrs...)
}

// RefundedAutomatically logs a charge payd gave back on its own.
func (l OutcomeLog) RefundedAutomatically(ctx context.Context, r domain.Refund) {
	l.Log.WarnContext(ctx, "automatic refund", "refund_id", r.ID, "order_id", r.OrderID, "charge_id", r.ChargeID,
		"amount", domain.FormatAmount(r.Amount, r.Currency), "currency", string(r.Currency), "status", string(r.Status), "reason", r.Reason)
}
