package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"gorm.io/gorm"

	"github.com/payd/payd/domain"
)

// The kinds of a hold action (sandbox_hold_actions.kind).
const (
	actionCapture = "capture"
	actionVoid    = "void"
)

// The refusals of a capture or a void. Each is final: a hold that was
// captured, voided or lapsed never changes again, so sending the request
// again (under any key) is refused the same way.
var (
	errNotCapturable   = &apiError{status: http.StatusConflict, code: "charge_not_capturable", msg: "only an authorized manual-capture charge (a hold) can be captured or voided"}
	errAlreadyCaptured = &apiError{status: http.StatusConflict, code: "charge_already_captured", msg: "the hold was already captured"}
	errHoldVoided      = &apiError{status: http.StatusConflict, code: "charge_voided", msg: "the hold was voided"}
	errHoldExpired     = &apiError{status: http.StatusConflict, code: "authorization_expired", msg: "the hold lapsed at capture_before and was released"}
	errCaptureTooLarge = unprocessable("amount_too_large", "the amount exceeds what the hold holds")
	errCaptureCurrency = unprocessable("currency_mismatch", "the capture's currency differs from the charge's")
)

// holdInput is a validated capture or void request; amount and currency
// are read against the charge's currency once it is loaded.
type holdInput struct {
	key, chargeID, kind string
	amount, currency    string // capture only; "" amount is the whole hold
}

func (s *Server) handleCapture(w http.ResponseWriter, r *http.Request) {
	s.handleHoldAction(w, r, actionCapture)
}

func (s *Server) handleVoid(w http.ResponseWriter, r *http.Request) {
	s.handleHoldAction(w, r, actionVoid)
}

// handleHoldAction answers a capture or void with the charge as it stands
// after it. A pm_timeout hold's answers are lost like its charge's: the
// action is carried out and the connection dropped.
func (s *Server) handleHoldAction(w http.ResponseWriter, r *http.Request, kind string) {
	in, err := parseHoldRequest(w, r, kind)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	row, err := s.holdAction(r.Context(), in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if methods[row.PaymentMethod].loseReply {
		loseReply(w)
		return
	}
	writeJSON(w, http.StatusOK, row.toJSON())
}

// parseHoldRequest validates the key and body of a capture or void. A
// void reads no body; a capture's body may be empty (the whole hold).
func parseHoldRequest(w http.ResponseWriter, r *http.Request, kind string) (holdInput, error) {
	key, err := idempotencyKey(r)
	if err != nil {
		return holdInput{}, err
	}
	in := holdInput{key: key, chargeID: r.PathValue("id"), kind: kind}
	if kind == actionVoid || r.ContentLength == 0 {
		return in, nil
	}
	var req captureRequestJSON
	if err := decodeJSON(w, r, &req); err != nil {
		return holdInput{}, err
	}
	in.amount, in.currency = req.Amount, req.Currency
	return in, nil
}

// captureAmount is what in asks to capture of charge c, in minor units:
// the whole hold when it names no amount.
func captureAmount(c chargeRow, in holdInput) (int64, error) {
	if in.kind != actionCapture || in.amount == "" {
		return c.AmountMinor, nil
	}
	if in.currency != "" && in.currency != c.Currency {
		return 0, errCaptureCurrency
	}
	_, minor, err := parseMoney(in.amount, c.Currency)
	return minor, err
}

// holdAction captures or voids a hold, once per key, and returns the
// charge after it. A key already used answers the charge it acted on (as
// it stands now); with another charge, kind or amount it is
// errKeyReused.
func (s *Server) holdAction(ctx context.Context, in holdInput) (chargeRow, error) {
	c, err := chargeByID(ctx, s.db, in.chargeID)
	if errors.Is(err, errNoRow) {
		return chargeRow{}, errChargeNotFound
	}
	if err != nil {
		return chargeRow{}, err
	}
	amount, err := captureAmount(c, in)
	if err != nil {
		return chargeRow{}, err
	}
	a := holdActionRow{ID: newID("ha_"), IdempotencyKey: in.key, ChargeID: c.ID, Kind: in.kind, AmountMinor: amount}
	if ok, err := s.existingAction(ctx, a); err != nil || ok {
		return s.chargeAfter(ctx, c.ID, err)
	}
	won, err := s.applyAction(ctx, a)
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		won, err = false, nil // the same key, concurrently: answered below
	}
	if err != nil {
		return chargeRow{}, fmt.Errorf("sandbox: %s %s: %w", in.kind, c.ID, err)
	}
	if !won {
		// Another request won the hold; if it was this key's, its answer is
		// this one's too.
		if ok, err := s.existingAction(ctx, a); err != nil || ok {
			return s.chargeAfter(ctx, c.ID, err)
		}
		return chargeRow{}, s.refusal(ctx, c.ID, amount)
	}
	s.log.InfoContext(ctx, "sandbox hold "+in.kind, "charge_id", c.ID, "amount_minor", amount)
	return s.chargeAfter(ctx, c.ID, nil)
}

// chargeAfter reads charge id once an action on it is done (err nil).
func (s *Server) chargeAfter(ctx context.Context, id string, err error) (chargeRow, error) {
	if err != nil {
		return chargeRow{}, err
	}
	return chargeByID(ctx, s.db, id)
}

// existingAction reports whether a's key already acted; the same key with
// another charge, kind or amount is errKeyReused.
func (s *Server) existingAction(ctx context.Context, a holdActionRow) (bool, error) {
	prev, err := first[holdActionRow](ctx, s.db, "idempotency_key = ?", a.IdempotencyKey)
	switch {
	case errors.Is(err, errNoRow):
		return false, nil
	case err != nil:
		return false, err
	case prev.ChargeID != a.ChargeID || prev.Kind != a.Kind || prev.AmountMinor != a.AmountMinor:
		return true, errKeyReused
	}
	return true, nil
}

// applyAction moves the hold with one UPDATE guarded by status =
// 'authorized' and capture_before in the future, so of concurrent captures,
// voids and the lapse exactly one moves it; the winner records its key and
// queues its webhook in the same transaction. It reports whether a won.
func (s *Server) applyAction(ctx context.Context, a holdActionRow) (bool, error) {
	now := at(s.now())
	a.CreatedAt = now
	var won bool
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		res := s.moveHold(ctx, tx, a, now)
		if res.Error != nil {
			return res.Error
		}
		if won = res.RowsAffected == 1; !won {
			return nil
		}
		if err := tx.Create(&a).Error; err != nil {
			return err
		}
		return s.announce(ctx, tx, a.ChargeID)
	})
	return won, err
}

// moveHold is the guarded UPDATE of a capture (to succeeded, captured_minor
// the amount: the rest is released; a pm_dispute charge's dispute becomes
// due) or of a void (to voided, requested).
func (s *Server) moveHold(ctx context.Context, tx *gorm.DB, a holdActionRow, now dbTime) *gorm.DB {
	if a.Kind == actionVoid {
		return tx.Exec(`UPDATE sandbox_charges SET status = ?, void_reason = ?, voided_at = ?, updated_at = ?
		                 WHERE id = ? AND capture_method = ? AND status = ? AND capture_before > ?`,
			string(domain.ChargeVoided), domain.VoidRequested, now, now,
			a.ChargeID, captureManual, string(domain.ChargeAuthorized), now)
	}
	var disputeAt dbTime
	if c, err := chargeByID(ctx, tx, a.ChargeID); err == nil && methods[c.PaymentMethod].dispute {
		disputeAt = at(now.Add(s.cfg.AsyncDelay))
	}
	return tx.Exec(`UPDATE sandbox_charges SET status = ?, captured_minor = ?, captured_at = ?, dispute_at = ?, updated_at = ?
	                 WHERE id = ? AND capture_method = ? AND status = ? AND capture_before > ? AND amount_minor >= ?`,
		string(domain.ChargeSucceeded), a.AmountMinor, now, disputeAt, now,
		a.ChargeID, captureManual, string(domain.ChargeAuthorized), now, a.AmountMinor)
}

// announce queues the webhook of charge id's new status, read inside tx.
func (s *Server) announce(ctx context.Context, tx *gorm.DB, id string) error {
	c, err := chargeByID(ctx, tx, id)
	if err != nil {
		return err
	}
	return s.enqueue(tx, paymentEvent(c))
}

// refusal says why a capture or void of charge id (for amount, a capture's)
// did not move it, from the charge as it now stands. A hold found past
// capture_before is lapsed on the way.
func (s *Server) refusal(ctx context.Context, id string, amount int64) error {
	c, err := chargeByID(ctx, s.db, id)
	if err != nil {
		return err
	}
	if c, err = s.lapseIfDue(ctx, c); err != nil {
		return err
	}
	switch {
	case !c.manual():
		return errNotCapturable
	case c.Status == string(domain.ChargeSucceeded):
		return errAlreadyCaptured
	case c.Status == string(domain.ChargeVoided) && c.VoidReason == domain.VoidLapsed:
		return errHoldExpired
	case c.Status == string(domain.ChargeVoided):
		return errHoldVoided
	case c.Status == string(domain.ChargeAuthorized) && amount > c.AmountMinor:
		return errCaptureTooLarge
	}
	return errNotCapturable // pending or failed: nothing is held
}

// lapseDue reports whether r is a hold whose capture_before has passed.
func (r chargeRow) lapseDue(now dbTime) bool {
	return r.manual() && r.Status == string(domain.ChargeAuthorized) && !r.CaptureBefore.After(now.Time)
}

// lapseIfDue lapses row's hold if its time has passed and returns it as it
// then stands: whoever looks first (a read, a capture, the worker) lapses
// it, once.
func (s *Server) lapseIfDue(ctx context.Context, row chargeRow) (chargeRow, error) {
	now := at(s.now())
	if !row.lapseDue(now) {
		return row, nil
	}
	if _, err := s.lapse(ctx, row.ID, now); err != nil {
		return chargeRow{}, err
	}
	return chargeByID(ctx, s.db, row.ID)
}

// lapseAll lapses, in place, the holds among rows whose time has passed.
func (s *Server) lapseAll(ctx context.Context, rows []chargeRow) error {
	for i := range rows {
		row, err := s.lapseIfDue(ctx, rows[i])
		if err != nil {
			return err
		}
		rows[i] = row
	}
	return nil
}

// LapseHolds makes one pass over holds past capture_before: each is voided
// (reason lapsed) and its payment.voided queued. It returns how many it
// lapsed. The background worker calls it every PollInterval; tests may call
// it directly. Reads lapse a due hold too, so none is seen authorized past
// its time, worker or not.
func (s *Server) LapseHolds(ctx context.Context) (int, error) {
	now := at(s.now())
	var due []chargeRow
	err := s.db.WithContext(ctx).
		Where("status = ? AND capture_before <= ?", string(domain.ChargeAuthorized), now).
		Order("capture_before, id").Limit(s.cfg.BatchSize).Find(&due).Error
	if err != nil {
		return 0, fmt.Errorf("sandbox: due holds: %w", err)
	}
	n := 0
	for _, c := range due {
		won, err := s.lapse(ctx, c.ID, now)
		if err != nil {
			return n, err
		}
		if won {
			n++
		}
	}
	return n, nil
}

// lapse voids hold id as lapsed, as of its capture_before. The UPDATE is
// guarded by the hold being authorized and due, so it loses to a capture
// or void that came first, and of two lapsers exactly one queues the
// webhook.
func (s *Server) lapse(ctx context.Context, id string, now dbTime) (bool, error) {
	var won bool
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		res := tx.Exec(`UPDATE sandbox_charges SET status = ?, void_reason = ?, voided_at = capture_before, updated_at = ?
		                 WHERE id = ? AND status = ? AND capture_before <= ?`,
			string(domain.ChargeVoided), domain.VoidLapsed, now, id, string(domain.ChargeAuthorized), now)
		if res.Error != nil {
			return res.Error
		}
		if won = res.RowsAffected == 1; !won {
			return nil
		}
		return s.announce(ctx, tx, id)
	})
	if err != nil {
		return false, fmt.Errorf("sandbox: lapse hold %s: %w", id, err)
	}
	if won {
		s.log.InfoContext(ctx, "sandbox hold lapsed", "charge_id", id)
	}
	return won, nil
}
