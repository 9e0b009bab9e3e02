package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"gorm.io/gorm"

	"github.com/payd/payd/domain"
)

// disputeReason is the reason of every dispute the sandbox opens.
const disputeReason = "fraudulent"

// evidenceWindow is how long after a dispute opens the sandbox wants the
// merchant's evidence, as a card network's deadline does (Stripe names a
// date one to three weeks out).
const evidenceWindow = 7 * 24 * time.Hour

// evidenceDue is when the sandbox wants the merchant's evidence of d.
func (d disputeRow) evidenceDue() time.Time { return d.CreatedAt.Add(evidenceWindow) }

var (
	errDisputeNotFound = &apiError{status: http.StatusNotFound, code: "dispute_not_found", msg: "no such dispute"}
	errDisputeClosed   = &apiError{status: http.StatusConflict, code: "dispute_closed", msg: "the dispute is already closed with another status"}
	errCloseStatus     = badRequest("validation_failed", "status: must be won or lost")
)

// OpenDisputes makes one pass over pm_dispute charges whose AsyncDelay has
// run out: each gets a dispute of its full amount (reason fraudulent) and a
// dispute.created webhook. It returns how many it opened. The background
// worker calls it every PollInterval; tests may call it directly. A due
// dispute survives a restart and opens afterwards, once.
func (s *Server) OpenDisputes(ctx context.Context) (int, error) {
	now := at(s.now())
	var due []chargeRow
	err := s.db.WithContext(ctx).
		Where("dispute_at IS NOT NULL AND dispute_at <= ?", now).
		Order("dispute_at, id").Limit(s.cfg.BatchSize).Find(&due).Error
	if err != nil {
		return 0, fmt.Errorf("sandbox: due disputes: %w", err)
	}
	n := 0
	for _, c := range due {
		won, err := s.openDispute(ctx, c, now)
		if err != nil {
			return n, err
		}
		if won {
			n++
		}
	}
	return n, nil
}

// openDispute opens charge c's dispute. The UPDATE that clears dispute_at
// is guarded by it being set, so of two workers (or processes) racing,
// exactly one opens the dispute and queues its one webhook, in the same
// transaction.
func (s *Server) openDispute(ctx context.Context, c chargeRow, now dbTime) (bool, error) {
	d := disputeRow{
		ID: newID("dp_"), ChargeID: c.ID, Currency: c.Currency, AmountMinor: c.takenMinor(),
		Status: string(domain.DisputeOpen), Reason: disputeReason, CreatedAt: now, UpdatedAt: now,
		ChargeKey: c.IdempotencyKey, OrderID: c.OrderID,
	}
	var won bool
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		res := tx.Exec(`UPDATE sandbox_charges SET dispute_at = NULL, dispute_open_minor = dispute_open_minor + ?, updated_at = ?
		                 WHERE id = ? AND dispute_at IS NOT NULL`,
			d.AmountMinor, now, c.ID)
		if res.Error != nil {
			return res.Error
		}
		if won = res.RowsAffected == 1; !won {
			return nil
		}
		if err := tx.Create(&d).Error; err != nil {
			return err
		}
		return s.enqueue(tx, disputeEvent(d))
	})
	if err != nil {
		return false, fmt.Errorf("sandbox: open dispute of charge %s: %w", c.ID, err)
	}
	if won {
		s.log.InfoContext(ctx, "sandbox dispute opened", "dispute_id", d.ID, "charge_id", c.ID)
	}
	return won, nil
}

// CloseDispute closes an open dispute as won (the money goes back to the
// charge) or lost (the bank keeps it) and queues dispute.closed. Closing it
// again with the status it has answers the dispute without a second event;
// another status is refused with dispute_closed.
func (s *Server) CloseDispute(ctx context.Context, id string, to domain.DisputeStatus) (domain.ProviderDispute, error) {
	d, err := s.closeDispute(ctx, id, to)
	if err != nil {
		return domain.ProviderDispute{}, err
	}
	return d.toDispute(), nil
}

// closeDispute moves dispute id from open to `to` with a guarded UPDATE,
// gives the charge its money back (won) or marks it kept (lost), and queues
// the webhook, all in one transaction.
func (s *Server) closeDispute(ctx context.Context, id string, to domain.DisputeStatus) (disputeRow, error) {
	if to != domain.DisputeWon && to != domain.DisputeLost {
		return disputeRow{}, errCloseStatus
	}
	now := at(s.now())
	var closed bool
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		closed = false
		d, err := disputeByID(ctx, tx, id)
		switch {
		case errors.Is(err, errNoRow):
			return errDisputeNotFound
		case err != nil:
			return err
		case d.Status != string(domain.DisputeOpen):
			return nil // already closed: answered below
		}
		res := tx.Exec(`UPDATE sandbox_disputes SET status = ?, closed_at = ?, updated_at = ? WHERE id = ? AND status = ?`,
			string(to), now, now, id, string(domain.DisputeOpen))
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return nil // closed meanwhile: answered below
		}
		var lost int64
		if to == domain.DisputeLost {
			lost = d.AmountMinor
		}
		res = tx.Exec(`UPDATE sandbox_charges SET dispute_open_minor = dispute_open_minor - ?,
		                      dispute_lost_minor = dispute_lost_minor + ?, updated_at = ?
		                WHERE id = ?`, d.AmountMinor, lost, now, d.ChargeID)
		if res.Error != nil {
			return res.Error
		}
		d.Status, d.ClosedAt, d.UpdatedAt = string(to), now, now
		closed = true
		return s.enqueue(tx, disputeEvent(d))
	})
	if err != nil {
		return disputeRow{}, fmt.Errorf("sandbox: close dispute %s: %w", id, err)
	}
	if closed {
		s.log.InfoContext(ctx, "sandbox dispute closed", "dispute_id", id, "status", string(to))
	}
	// A closed dispute never changes again: this read is its final word,
	// whoever closed it.
	d, err := disputeByID(ctx, s.db, id)
	if err != nil {
		return disputeRow{}, fmt.Errorf("sandbox: close dispute %s: %w", id, err)
	}
	if d.Status != string(to) {
		return disputeRow{}, errDisputeClosed
	}
	return d, nil
}

func (s *Server) handleCloseDispute(w http.ResponseWriter, r *http.Request) {
	var req closeDisputeRequestJSON
	if err := decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	d, err := s.closeDispute(r.Context(), r.PathValue("id"), domain.DisputeStatus(req.Status))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d.toJSON())
}

func (s *Server) handleGetDispute(w http.ResponseWriter, r *http.Request) {
	d, err := disputeByID(r.Context(), s.db, r.PathValue("id"))
	if errors.Is(err, errNoRow) {
		err = errDisputeNotFound
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d.toJSON())
}

func (s *Server) handleListDisputes(w http.ResponseWriter, r *http.Request) {
	from, to, err := parseWindow(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rows, err := disputesCreated(r.Context(), s.db, from, to)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := disputeListJSON{Data: make([]disputeJSON, len(rows))}
	for i, row := range rows {
		out.Data[i] = row.toJSON()
	}
	writeJSON(w, http.StatusOK, out)
}
