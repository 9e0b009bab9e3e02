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

var (
	errChargeNotFound = &apiError{status: http.StatusNotFound, code: "charge_not_found", msg: "no such charge"}
	errRefundExceeds  = unprocessable("refund_exceeds_charge", "the amount exceeds what is left to refund on the charge")
	errNotRefundable  = unprocessable("charge_not_refundable", "only a succeeded charge can be refunded")
	errCurrency       = unprocessable("currency_mismatch", "the refund's currency differs from the charge's")
)

// refundInput is a validated refund request.
type refundInput struct {
	key, chargeID, currency, reason string
	amountMinor                     int64
}

func (s *Server) handleCreateRefund(w http.ResponseWriter, r *http.Request) {
	in, err := parseRefundRequest(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	row, err := s.createRefund(r.Context(), in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, row.toJSON())
}

// parseRefundRequest validates the key and body of POST /v1/refunds.
func parseRefundRequest(w http.ResponseWriter, r *http.Request) (refundInput, error) {
	key, err := idempotencyKey(r)
	if err != nil {
		return refundInput{}, err
	}
	var req refundRequestJSON
	if err := decodeJSON(w, r, &req); err != nil {
		return refundInput{}, err
	}
	if req.ChargeID == "" || len(req.ChargeID) > 64 {
		return refundInput{}, badRequest("validation_failed", "charge_id: required, at most 64 characters")
	}
	if len(req.Reason) > 500 {
		return refundInput{}, badRequest("validation_failed", "reason: at most 500 characters")
	}
	cur, minor, err := parseMoney(req.Amount, req.Currency)
	if err != nil {
		return refundInput{}, err
	}
	return refundInput{key: key, chargeID: req.ChargeID, currency: string(cur), reason: req.Reason, amountMinor: minor}, nil
}

// createRefund gives back part of a succeeded charge, once per key. The
// guarded UPDATE of refunded_minor is what refuses over-refunding, even
// when refunds race; the refund row, the new total and the webhook commit
// together or not at all.
func (s *Server) createRefund(ctx context.Context, in refundInput) (refundRow, error) {
	if row, ok, err := s.existingRefund(ctx, in); err != nil || ok {
		return row, err
	}
	now := at(s.now())
	row := refundRow{
		ID: newID("re_"), IdempotencyKey: in.key, ChargeID: in.chargeID, Currency: in.currency,
		AmountMinor: in.amountMinor, Reason: in.reason, Status: string(domain.ChargeSucceeded), CreatedAt: now,
	}
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		c, err := chargeByID(ctx, tx, in.chargeID)
		switch {
		case errors.Is(err, errNoRow):
			return errChargeNotFound
		case err != nil:
			return err
		case c.Currency != in.currency:
			return errCurrency
		case c.Status != string(domain.ChargeSucceeded):
			return errNotRefundable
		}
		res := tx.Exec(`UPDATE sandbox_charges SET refunded_minor = refunded_minor + ?, updated_at = ?
		                 WHERE id = ? AND status = ? AND refunded_minor + ? <= amount_minor`,
			in.amountMinor, now, c.ID, string(domain.ChargeSucceeded), in.amountMinor)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return errRefundExceeds
		}
		if err := tx.Create(&row).Error; err != nil {
			return err
		}
		return s.enqueue(tx, refundEvent(row, c))
	})
	if errors.Is(err, gorm.ErrDuplicatedKey) || errors.Is(err, errRefundExceeds) {
		// A concurrent request with this key may have won (and used up the
		// charge): if so, its refund is this request's answer too.
		if prev, ok, perr := s.existingRefund(ctx, in); perr != nil || ok {
			return prev, perr
		}
	}
	if err != nil {
		return refundRow{}, fmt.Errorf("sandbox: refund: %w", err)
	}
	s.log.InfoContext(ctx, "sandbox refund created", "refund_id", row.ID, "charge_id", row.ChargeID)
	return row, nil
}

// existingRefund finds the refund already under in.key; the same key with
// other parameters is errKeyReused.
func (s *Server) existingRefund(ctx context.Context, in refundInput) (refundRow, bool, error) {
	row, err := refundByKey(ctx, s.db, in.key)
	if errors.Is(err, errNoRow) {
		return refundRow{}, false, nil
	}
	if err != nil {
		return refundRow{}, false, err
	}
	if row.ChargeID != in.chargeID || row.AmountMinor != in.amountMinor || row.Currency != in.currency {
		return refundRow{}, true, errKeyReused
	}
	return row, true, nil
}

// listedRefund is a refund as the refund list shows it: with the order of
// the refunded charge.
type listedRefund struct {
	ID             string `gorm:"column:id"`
	IdempotencyKey string `gorm:"column:idempotency_key"`
	ChargeID       string `gorm:"column:charge_id"`
	OrderID        string `gorm:"column:order_id"`
	Currency       string `gorm:"column:currency"`
	AmountMinor    int64  `gorm:"column:amount_minor"`
	Status         string `gorm:"column:status"`
	CreatedAt      dbTime `gorm:"column:created_at"`
}

// handleListRefunds serves GET /v1/refunds?from=&to=: every refund
// created in [from, to), oldest first, in the shape of the charge list.
func (s *Server) handleListRefunds(w http.ResponseWriter, r *http.Request) {
	from, err1 := time.Parse(time.RFC3339, r.URL.Query().Get("from"))
	to, err2 := time.Parse(time.RFC3339, r.URL.Query().Get("to"))
	if err1 != nil || err2 != nil || !from.Before(to) {
		s.writeError(w, r, badRequest("validation_failed", "from and to must be RFC 3339 times with from before to"))
		return
	}
	var rows []listedRefund
	err := s.db.WithContext(r.Context()).Raw(`
		SELECT r.id, r.idempotency_key, r.charge_id, c.order_id, r.currency, r.amount_minor, r.status, r.created_at
		  FROM sandbox_refunds r JOIN sandbox_charges c ON c.id = r.charge_id
		 WHERE r.created_at >= ? AND r.created_at < ?
		 ORDER BY r.created_at, r.id`, ceilMicro(from), ceilMicro(to)).Scan(&rows).Error
	if err != nil {
		s.writeError(w, r, fmt.Errorf("sandbox: list refunds: %w", err))
		return
	}
	out := refundListJSON{Data: make([]refundJSON, len(rows))}
	for i, l := range rows {
		out.Data[i] = refundRow{ID: l.ID, IdempotencyKey: l.IdempotencyKey, ChargeID: l.ChargeID, Currency: l.Currency,
			AmountMinor: l.AmountMinor, Status: l.Status, CreatedAt: l.CreatedAt}.toJSON()
		out.Data[i].OrderID = l.OrderID
	}
	writeJSON(w, http.StatusOK, out)
}
