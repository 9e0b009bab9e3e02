package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/payd/payd/domain"
)

var (
	errChargeNotFound = &apiError{status: http.StatusNotFound, code: "charge_not_found", msg: "no such charge"}
	errRefundExceeds  = unprocessable("refund_exceeds_charge", "the amount exceeds what is left to refund on the charge")
	errNotRefundable  = unprocessable("charge_not_refundable", "only a succeeded charge can be refunded")
	errCurrency       = unprocessable("currency_mismatch", "the refund's currency differs from the charge's")
	errChargeDisputed = unprocessable("charge_disputed", "the charge is under an open dispute: the bank already took the money back")
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
	if utf8.RuneCountInString(req.Reason) > 500 {
		return refundInput{}, badRequest("validation_failed", "reason: at most 500 characters")
	}
	cur, minor, err := parseMoney(req.Amount, req.Currency)
	if err != nil {
		return refundInput{}, err
	}
	return refundInput{key: key, chargeID: req.ChargeID, currency: string(cur), reason: req.Reason, amountMinor: minor}, nil
}

// createRefund gives back part of a succeeded charge, once per key. The
// guarded UPDATE of refunded_minor is what refuses over-refunding (more
// than the amount less refunds and lost disputes) and refunding a charge
// under an open dispute, even when refunds and disputes race; the refund
// row, the new total and the webhook commit together or not at all.
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
		case c.DisputeOpenMinor > 0:
			return errChargeDisputed
		}
		res := tx.Exec(`UPDATE sandbox_charges SET refunded_minor = refunded_minor + ?, updated_at = ?
		                 WHERE id = ? AND status = ? AND dispute_open_minor = 0
		                   AND refunded_minor + dispute_lost_minor + ? <= `+takenColumn,
			in.amountMinor, now, c.ID, string(domain.ChargeSucceeded), in.amountMinor)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return errRefundExceeds
		}
		row.OrderID = c.OrderID
		if err := tx.Create(&row).Error; err != nil {
			return err
		}
		return s.enqueue(tx, refundEvent(row))
	})
	if errors.Is(err, gorm.ErrDuplicatedKey) || errors.Is(err, errRefundExceeds) {
		// A concurrent request with this key may have won (and used up the
		// charge): if so, its refund is this request's answer too.
		if prev, ok, perr := s.existingRefund(ctx, in); perr != nil || ok {
			return prev, perr
		}
		// A dispute that opened since the charge was read refused it.
		if c, cerr := chargeByID(ctx, s.db, in.chargeID); cerr == nil && c.DisputeOpenMinor > 0 {
			err = errChargeDisputed
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

func (s *Server) handleListRefunds(w http.ResponseWriter, r *http.Request) {
	from, to, err := parseWindow(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit, err := pageLimit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rows, more, err := refundsPage(r.Context(), s.db, from, to, r.URL.Query().Get("starting_after"), limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := refundListJSON{Data: make([]refundJSON, len(rows)), HasMore: more}
	for i, row := range rows {
		out.Data[i] = row.toJSON()
	}
	writeJSON(w, http.StatusOK, out)
}
