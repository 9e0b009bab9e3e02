package sandbox

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/payd/payd/domain"
)

// ResolvePending makes one pass over pending (asynchronous) charges whose
// AsyncDelay has run out: each becomes succeeded (authorized, for a manual
// charge) or failed, as its payment method says, and its webhook is queued. It returns how many it resolved.
// The background worker calls it every PollInterval; tests may call it
// directly. Pending charges survive a restart and resolve afterwards.
func (s *Server) ResolvePending(ctx context.Context) (int, error) {
	now := at(s.now())
	var due []chargeRow
	err := s.db.WithContext(ctx).
		Where("status = ? AND settle_at <= ?", string(domain.ChargePending), now).
		Order("settle_at, id").Limit(s.cfg.BatchSize).Find(&due).Error
	if err != nil {
		return 0, fmt.Errorf("sandbox: pending charges: %w", err)
	}
	n := 0
	for _, c := range due {
		won, err := s.resolve(ctx, c, now)
		if err != nil {
			return n, err
		}
		if won {
			n++
		}
	}
	return n, nil
}

// resolve moves one pending charge to its final status. The UPDATE is
// guarded by status = 'pending', so of two workers (or processes) racing,
// exactly one moves it and queues its one webhook.
func (s *Server) resolve(ctx context.Context, c chargeRow, now dbTime) (bool, error) {
	m := methods[c.PaymentMethod]
	c.Status, c.FailureCode, c.UpdatedAt = string(m.asyncStatus), m.asyncFailureCode, now
	if m.asyncStatus == "" { // not an async method: cannot happen, but never leave it pending forever
		c.Status, c.FailureCode = string(domain.ChargeFailed), "processing_error"
	}
	if c.manual() && c.Status == string(domain.ChargeSucceeded) {
		s.authorize(&c, now)
	}
	won, err := s.moveCharge(ctx, c, `UPDATE sandbox_charges SET status = ?, failure_code = ?, capture_before = ?, updated_at = ?
	                                   WHERE id = ? AND status = ?`,
		c.Status, c.FailureCode, c.CaptureBefore, now, c.ID, string(domain.ChargePending))
	if err != nil {
		return false, fmt.Errorf("sandbox: resolve charge %s: %w", c.ID, err)
	}
	if won {
		s.log.InfoContext(ctx, "sandbox charge resolved", "charge_id", c.ID, "status", c.Status)
	}
	return won, nil
}

// moveCharge runs one guarded UPDATE of charge c, now as it will be, and
// queues c's payment event if it matched, in one transaction. It reports
// whether it matched: of workers (or processes) racing to move one
// charge, exactly one does, and one event is sent.
func (s *Server) moveCharge(ctx context.Context, c chargeRow, query string, args ...any) (bool, error) {
	var won bool
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		res := tx.Exec(query, args...)
		if res.Error != nil {
			return res.Error
		}
		if won = res.RowsAffected == 1; !won {
			return nil
		}
		return s.enqueue(tx, paymentEvent(c))
	})
	return won, err
}
