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

// A manual-capture charge (capture_method manual) that succeeds only
// authorizes: the money is held until capture_before
// (Config.AuthorizationTTL after the authorization). Then exactly one of
// three things ends the hold, each a guarded UPDATE from authorized, so
// when they race one wins and the others are refused:
//   - a capture (POST /v1/captures) takes up to the held amount and
//     releases the rest: succeeded, captured_minor;
//   - a void (POST /v1/voids) gives it all up: voided;
//   - the hold lapses (LapseHolds): voided, failure_code
//     authorization_expired.
//
// Captures and voids take an Idempotency-Key each: a repeat of a key
// answers the charge as it is now, whatever has happened to it since,
// and another request under the key is 422 idempotency_key_reused.

var (
	errTooLarge        = unprocessable(domain.CaptureTooLarge, "the amount exceeds what the charge holds")
	errCaptured        = unprocessable(domain.ChargeAlreadyCaptured, "the charge was captured already")
	errVoided          = unprocessable(domain.ChargeAlreadyVoided, "the charge's hold was voided")
	errLapsed          = unprocessable(domain.HoldLapsed, "the charge's hold lapsed: capture_before has passed")
	errNotCapturable   = unprocessable(domain.ChargeNotCapturable, "only an authorized (manual-capture) charge can be captured or voided")
	errCaptureCurrency = unprocessable("currency_mismatch", "the capture's currency differs from the charge's")
)

// The kinds of hold action.
const (
	actionCapture = "capture"
	actionVoid    = "void"
)

// holdActionRow is a sandbox_hold_actions row: one capture or void
// request, under its idempotency key.
type holdActionRow struct {
	ID             string `gorm:"column:id;primaryKey"`
	IdempotencyKey string `gorm:"column:idempotency_key"`
	ChargeID       string `gorm:"column:charge_id"`
	Kind           string `gorm:"column:kind"`
	AmountMinor    int64  `gorm:"column:amount_minor"`
	CreatedAt      dbTime `gorm:"column:created_at"`
}

// TableName tells GORM the row's table.
func (holdActionRow) TableName() string { return "sandbox_hold_actions" }

// authorize makes the charge a hold, authorized at now.
func (s *Server) authorize(c *chargeRow, now dbTime) {
	c.Status = string(domain.ChargeAuthorized)
	c.CaptureBefore = at(now.Add(s.cfg.AuthorizationTTL))
}

// holdInput is a validated capture or void request.
type holdInput struct {
	key, chargeID, kind, currency string
	amountMinor                   int64 // 0 for a void, and for a capture of all that is held
}

func (s *Server) handleCapture(w http.ResponseWriter, r *http.Request) {
	key, err := idempotencyKey(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req captureRequestJSON
	if err := decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	in := holdInput{key: key, chargeID: req.ChargeID, kind: actionCapture}
	if req.Amount != "" {
		cur, minor, err := parseMoney(req.Amount, req.Currency)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		in.currency, in.amountMinor = string(cur), minor
	}
	s.act(w, r, in)
}

func (s *Server) handleVoid(w http.ResponseWriter, r *http.Request) {
	key, err := idempotencyKey(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req voidRequestJSON
	if err := decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.act(w, r, holdInput{key: key, chargeID: req.ChargeID, kind: actionVoid})
}

// act carries out a capture or a void and answers the charge as it left it.
func (s *Server) act(w http.ResponseWriter, r *http.Request, in holdInput) {
	if in.chargeID == "" || len(in.chargeID) > 64 {
		s.writeError(w, r, badRequest("validation_failed", "charge_id: required, at most 64 characters"))
		return
	}
	row, err := s.holdAction(r.Context(), in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, row.toJSON())
}

// holdAction ends the charge's hold as in asks, once per key, and returns
// the charge as it is after. The guarded UPDATE from authorized (and,
// for a capture, before capture_before and within the amount) is what
// decides: of a capture, a void and a lapse that race, exactly one moves
// the charge; the action's row, the charge and the webhook commit
// together. A repeat of the key answers the charge as it is now.
func (s *Server) holdAction(ctx context.Context, in holdInput) (chargeRow, error) {
	if c, ok, err := s.existingAction(ctx, in); err != nil || ok {
		return c, err
	}
	now := at(s.now())
	var after chargeRow
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		c, err := chargeByID(ctx, tx, in.chargeID)
		switch {
		case errors.Is(err, errNoRow):
			return errChargeNotFound
		case err != nil:
			return err
		}
		amount := in.amountMinor
		if in.kind == actionCapture && amount == 0 {
			amount = c.AmountMinor
		}
		if err := refusal(c, in, amount, now); err != nil {
			return err
		}
		var res *gorm.DB
		if in.kind == actionCapture {
			c.Status, c.CapturedMinor = string(domain.ChargeSucceeded), amount
			if methods[c.PaymentMethod].dispute {
				c.DisputeAt = at(now.Add(s.cfg.AsyncDelay))
			}
			res = tx.Exec(`UPDATE sandbox_charges SET status = ?, captured_minor = ?, dispute_at = ?, updated_at = ?
			                WHERE id = ? AND status = ? AND capture_before > ? AND ? <= amount_minor`,
				c.Status, amount, c.DisputeAt, now, c.ID, string(domain.ChargeAuthorized), now, amount)
		} else {
			c.Status = string(domain.ChargeVoided)
			res = tx.Exec(`UPDATE sandbox_charges SET status = ?, updated_at = ? WHERE id = ? AND status = ?`,
				c.Status, now, c.ID, string(domain.ChargeAuthorized))
		}
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return errRaced // another action or the lapse moved it first
		}
		c.UpdatedAt, after = now, c
		action := holdActionRow{ID: newID("ha_"), IdempotencyKey: in.key, ChargeID: c.ID, Kind: in.kind, AmountMinor: in.amountMinor, CreatedAt: now}
		if err := tx.Create(&action).Error; err != nil {
			return err
		}
		return s.enqueue(tx, paymentEvent(c))
	})
	if errors.Is(err, gorm.ErrDuplicatedKey) || errors.Is(err, errRaced) {
		// A concurrent request with this key may have won: its charge is
		// this request's answer too. Otherwise the charge moved under this
		// request, and it is refused for what the charge is now.
		if c, ok, aerr := s.existingAction(ctx, in); aerr != nil || ok {
			return c, aerr
		}
		if c, cerr := chargeByID(ctx, s.db, in.chargeID); cerr == nil {
			if why := refusal(c, in, in.amountMinor, at(s.now())); why != nil {
				err = why
			}
		}
	}
	if err != nil {
		return chargeRow{}, fmt.Errorf("sandbox: %s: %w", in.kind, err)
	}
	s.log.InfoContext(ctx, "sandbox hold "+in.kind, "charge_id", after.ID, "status", after.Status)
	return after, nil
}

// errRaced is a guarded UPDATE that matched nothing: the charge moved
// since it was read.
var errRaced = errors.New("sandbox: the charge moved")

// refusal says why c's hold cannot take in now, or nil if it can.
func refusal(c chargeRow, in holdInput, amount int64, now dbTime) error {
	switch {
	case !c.manual():
		return errNotCapturable
	case c.Status == string(domain.ChargeSucceeded):
		return errCaptured
	case c.Status == string(domain.ChargeVoided) && c.FailureCode == domain.HoldLapsed:
		return errLapsed
	case c.Status == string(domain.ChargeVoided):
		return errVoided
	case c.Status != string(domain.ChargeAuthorized):
		return errNotCapturable
	case in.kind == actionVoid:
		return nil
	case !c.CaptureBefore.After(now.Time):
		return errLapsed
	case in.currency != "" && in.currency != c.Currency:
		return errCaptureCurrency
	case amount > c.AmountMinor:
		return errTooLarge
	}
	return nil
}

// existingAction answers a repeat of in's key: the charge as it is now.
// The key with another request is errKeyReused.
func (s *Server) existingAction(ctx context.Context, in holdInput) (chargeRow, bool, error) {
	a, err := first[holdActionRow](ctx, s.db, "idempotency_key = ?", in.key)
	if errors.Is(err, errNoRow) {
		return chargeRow{}, false, nil
	}
	if err != nil {
		return chargeRow{}, false, err
	}
	if a.ChargeID != in.chargeID || a.Kind != in.kind || a.AmountMinor != in.amountMinor {
		return chargeRow{}, true, errKeyReused
	}
	c, err := chargeByID(ctx, s.db, a.ChargeID)
	return c, err == nil, err
}

// LapseHolds makes one pass over authorized charges whose capture_before
// has passed: each is voided (failure_code authorization_expired) and
// its payment.voided webhook is queued, by the guarded UPDATE a capture
// or a void would race, so exactly one of them ends the hold. It returns
// how many lapsed. The background worker calls it every PollInterval;
// tests may call it directly.
func (s *Server) LapseHolds(ctx context.Context) (int, error) {
	now := at(s.now())
	var due []chargeRow
	err := s.db.WithContext(ctx).
		Where("status = ? AND capture_before <= ?", string(domain.ChargeAuthorized), now).
		Order("capture_before, id").Limit(s.cfg.BatchSize).Find(&due).Error
	if err != nil {
		return 0, fmt.Errorf("sandbox: lapsed holds: %w", err)
	}
	n := 0
	for _, c := range due {
		c.Status, c.FailureCode, c.UpdatedAt = string(domain.ChargeVoided), domain.HoldLapsed, now
		won, err := s.moveCharge(ctx, c, `UPDATE sandbox_charges SET status = ?, failure_code = ?, updated_at = ?
		                                   WHERE id = ? AND status = ? AND capture_before <= ?`,
			c.Status, c.FailureCode, now, c.ID, string(domain.ChargeAuthorized), now)
		if err != nil {
			return n, fmt.Errorf("sandbox: lapse hold %s: %w", c.ID, err)
		}
		if won {
			n++
			s.log.InfoContext(ctx, "sandbox hold lapsed", "charge_id", c.ID)
		}
	}
	return n, nil
}

// DefaultAuthorizationTTL is how long a hold lasts unless configured
// otherwise (PAYD_SANDBOX_AUTHORIZATION_TTL): seven days, as card networks
// allow for most holds.
const DefaultAuthorizationTTL = 7 * 24 * time.Hour
