package sandbox

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/payd/payd/domain"
)

// settlementHeader is the settlement file's fixed first line.
var settlementHeader = []string{"charge_id", "idempotency_key", "order_id", "type", "status", "amount", "currency", "created_at", "refund_id"}

// settlementLine is one row of a settlement file: a succeeded charge (a
// manual one once captured, for what its capture took), or a
// refund (whose charge_id names the refunded charge, whose idempotency_key
// is the refund's and whose refund_id is the refund's own id, empty on a
// charge line). Amounts are positive; type says which way the money went.
type settlementLine struct {
	ChargeID       string `gorm:"column:charge_id"`
	IdempotencyKey string `gorm:"column:idempotency_key"`
	OrderID        string `gorm:"column:order_id"`
	LineType       string `gorm:"column:line_type"`
	Status         string `gorm:"column:status"`
	AmountMinor    int64  `gorm:"column:amount_minor"`
	Currency       string `gorm:"column:currency"`
	CreatedAt      dbTime `gorm:"column:created_at"`
	RefundID       string `gorm:"column:refund_id"`
}

// handleSettlement serves GET /v1/settlements/{YYYY-MM-DD}.csv: the
// succeeded charges and the refunds created on that UTC day.
func (s *Server) handleSettlement(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	day, err := time.Parse(time.DateOnly, strings.TrimSuffix(name, ".csv"))
	if err != nil || !strings.HasSuffix(name, ".csv") {
		s.writeError(w, r, &apiError{status: http.StatusNotFound, code: "settlement_not_found", msg: "settlement files are named YYYY-MM-DD.csv"})
		return
	}
	lines, err := s.settlement(r.Context(), day)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", "settlement-"+name))
	cw := csv.NewWriter(w)
	_ = cw.Write(settlementHeader)
	for _, l := range lines {
		_ = cw.Write([]string{
			l.ChargeID, l.IdempotencyKey, l.OrderID, l.LineType, l.Status,
			money(l.AmountMinor, l.Currency), l.Currency, formatTime(l.CreatedAt.Time), l.RefundID,
		})
	}
	cw.Flush()
}

// settlement reads the lines of one UTC day, in time order.
func (s *Server) settlement(ctx context.Context, day time.Time) ([]settlementLine, error) {
	from, to := at(day), at(day.AddDate(0, 0, 1))
	succeeded := string(domain.ChargeSucceeded)
	var lines []settlementLine
	err := s.db.WithContext(ctx).Raw(`
		SELECT id AS charge_id, idempotency_key, order_id, 'charge' AS line_type, status,
		       `+takenColumn+` AS amount_minor, currency, created_at, '' AS refund_id
		  FROM sandbox_charges
		 WHERE status = ? AND created_at >= ? AND created_at < ?
		UNION ALL
		SELECT r.charge_id, r.idempotency_key, c.order_id, 'refund', r.status,
		       r.amount_minor, r.currency, r.created_at, r.id
		  FROM sandbox_refunds r JOIN sandbox_charges c ON c.id = r.charge_id
		 WHERE r.status = ? AND r.created_at >= ? AND r.created_at < ?
		 ORDER BY created_at, line_type, charge_id`,
		succeeded, from, to, succeeded, from, to).Scan(&lines).Error
	if err != nil {
		return nil, fmt.Errorf("sandbox: settlement %s: %w", day.Format(time.DateOnly), err)
	}
	return lines, nil
}
