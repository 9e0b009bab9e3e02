package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/payd/payd/domain"
)

// method is how one magic payment method behaves.
type method struct {
	status      domain.ChargeStatus // recorded when the charge is created
	failureCode string
	// For pending charges: where they resolve after AsyncDelay.
	asyncStatus      domain.ChargeStatus
	asyncFailureCode string
	loseReply        bool // record the charge, then drop the connection unanswered
	serverError      bool // record the charge failed, charging nothing, and answer 500
	dispute          bool // open a dispute of the whole charge after AsyncDelay
}

// methods are the magic payment methods; anything else is refused with 400.
var methods = map[string]method{
	"pm_ok":                 {status: domain.ChargeSucceeded},
	"pm_declined":           {status: domain.ChargeFailed, failureCode: "card_declined"},
	"pm_insufficient_funds": {status: domain.ChargeFailed, failureCode: "insufficient_funds"},
	"pm_async":              {status: domain.ChargePending, asyncStatus: domain.ChargeSucceeded},
	"pm_async_fail":         {status: domain.ChargePending, asyncStatus: domain.ChargeFailed, asyncFailureCode: "card_declined"},
	"pm_timeout":            {status: domain.ChargeSucceeded, loseReply: true},
	"pm_error":              {status: domain.ChargeFailed, failureCode: "processing_error", serverError: true},
	"pm_dispute":            {status: domain.ChargeSucceeded, dispute: true},
}

// errProcessorFault is pm_error's answer: a 500 with nothing charged.
// Only the first request under the key hears it: a replay answers the
// failed charge it recorded, as for any other key.
var errProcessorFault = &apiError{status: http.StatusInternalServerError, code: "processing_error", msg: "the processor failed; nothing was charged"}

// errKeyReused is an idempotency key sent again with another request. The
// sandbox answers 422, as payd does for its own keys: the request is
// understood but can never succeed under that key.
var errKeyReused = unprocessable("idempotency_key_reused", "this idempotency key was used with different parameters")

// chargeInput is a validated charge request.
type chargeInput struct {
	key, orderID, currency, method string
	amountMinor                    int64
	captureMethod                  domain.CaptureMethod
}

func (s *Server) handleCreateCharge(w http.ResponseWriter, r *http.Request) {
	in, err := parseChargeRequest(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	if d := s.cfg.ChargeDelay; d > 0 {
		// Late, but carried out: the client's giving up meanwhile does not
		// take back a request the provider has.
		ctx = context.WithoutCancel(ctx)
		time.Sleep(d)
	}
	row, created, err := s.createCharge(ctx, in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if created && methods[row.PaymentMethod].serverError {
		s.writeError(w, r, errProcessorFault)
		return
	}
	if methods[row.PaymentMethod].loseReply {
		loseReply(w)
		return
	}
	writeJSON(w, http.StatusOK, row.toJSON())
}

// parseChargeRequest validates the key and body of POST /v1/charges.
func parseChargeRequest(w http.ResponseWriter, r *http.Request) (chargeInput, error) {
	key, err := idempotencyKey(r)
	if err != nil {
		return chargeInput{}, err
	}
	var req chargeRequestJSON
	if err := decodeJSON(w, r, &req); err != nil {
		return chargeInput{}, err
	}
	if req.OrderID == "" || len(req.OrderID) > 255 {
		return chargeInput{}, badRequest("validation_failed", "order_id: required, at most 255 characters")
	}
	cur, minor, err := parseMoney(req.Amount, req.Currency)
	if err != nil {
		return chargeInput{}, err
	}
	if _, ok := methods[req.PaymentMethod]; !ok {
		// Never echo the value: a confused client may have sent card data.
		return chargeInput{}, badRequest("unknown_payment_method", "payment_method is not one the sandbox knows")
	}
	capture := domain.CaptureMethod(cmp.Or(req.CaptureMethod, string(domain.CaptureAutomatic)))
	if !capture.Valid() {
		return chargeInput{}, badRequest("validation_failed", "capture_method: must be automatic or manual")
	}
	return chargeInput{key: key, orderID: req.OrderID, currency: string(cur), method: req.PaymentMethod, amountMinor: minor, captureMethod: capture}, nil
}

// parseMoney validates a decimal-string amount of a currency and converts it
// to minor units.
func parseMoney(amount, currency string) (domain.Currency, int64, error) {
	cur, err := domain.ParseCurrency(currency)
	if err != nil {
		return "", 0, badRequest("validation_failed", "%v", err)
	}
	d, err := domain.ParseAmount(amount, cur, "amount")
	if err != nil {
		return "", 0, badRequest("validation_failed", "%v", err)
	}
	if !d.IsPositive() {
		return "", 0, badRequest("validation_failed", "amount: must be greater than zero")
	}
	return cur, domain.MinorUnits(d, cur), nil
}

// idempotencyKey reads the required Idempotency-Key header.
func idempotencyKey(r *http.Request) (string, error) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return "", badRequest("idempotency_key_missing", "the Idempotency-Key header is required")
	}
	if !domain.ValidKey(key) {
		return "", badRequest("idempotency_key_invalid", "Idempotency-Key must be 1-255 characters of [A-Za-z0-9._:-]")
	}
	return key, nil
}

// createCharge records a charge under in.key, or returns the one already
// recorded under it (created false). The unique index on the key is the
// lock: when concurrent requests race, one insert wins and the others read
// its row, so a replay of a key whose first request is still being carried
// out never makes a second charge. Every outcome is recorded, a processor
// fault's too (pm_error: failed, nothing charged, no webhook), so a replay
// always says what the key did and never finds nothing.
func (s *Server) createCharge(ctx context.Context, in chargeInput) (chargeRow, bool, error) {
	if row, ok, err := s.existingCharge(ctx, in); err != nil || ok {
		return row, false, err
	}
	m := methods[in.method]
	row := s.newCharge(in, m)
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(&row).Error; err != nil {
			return err
		}
		if row.Status == string(domain.ChargePending) || m.serverError {
			return nil // its webhook comes when it resolves; a fault sends none
		}
		return s.enqueue(tx, paymentEvent(row))
	})
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		row, ok, err := s.existingCharge(ctx, in)
		if err == nil && !ok {
			err = fmt.Errorf("sandbox: charge under a duplicate key is missing")
		}
		return row, false, err
	}
	if err != nil {
		return chargeRow{}, false, fmt.Errorf("sandbox: create charge: %w", err)
	}
	s.log.InfoContext(ctx, "sandbox charge created", "charge_id", row.ID, "status", row.Status)
	return row, true, nil
}

// existingCharge finds the charge already under in.key; the same key with
// other parameters is errKeyReused.
func (s *Server) existingCharge(ctx context.Context, in chargeInput) (chargeRow, bool, error) {
	row, err := chargeByKey(ctx, s.db, in.key)
	if errors.Is(err, errNoRow) {
		return chargeRow{}, false, nil
	}
	if err != nil {
		return chargeRow{}, false, err
	}
	if row.OrderID != in.orderID || row.AmountMinor != in.amountMinor ||
		row.Currency != in.currency || row.PaymentMethod != in.method ||
		cmp.Or(row.CaptureMethod, string(domain.CaptureAutomatic)) != string(in.captureMethod) {
		return chargeRow{}, true, errKeyReused
	}
	return row, true, nil
}

func (s *Server) newCharge(in chargeInput, m method) chargeRow {
	now := at(s.now())
	row := chargeRow{
		ID: newID("ch_"), IdempotencyKey: in.key, OrderID: in.orderID,
		PaymentMethod: in.method, Currency: in.currency, AmountMinor: in.amountMinor,
		Status: string(m.status), FailureCode: m.failureCode, CaptureMethod: string(in.captureMethod),
		CreatedAt: now, UpdatedAt: now,
	}
	if m.status == domain.ChargePending {
		row.SettleAt = at(now.Add(s.cfg.AsyncDelay))
	}
	if row.manual() && m.status == domain.ChargeSucceeded {
		s.authorize(&row, now)
	}
	if m.dispute && !row.manual() {
		// A manual charge's dispute waits for its capture: the bank can
		// only take back money that moved.
		row.DisputeAt = at(now.Add(s.cfg.AsyncDelay))
	}
	return row
}

// inTx runs fn in a transaction, again when it lost a lock race (InnoDB
// deadlocks are normal under concurrent inserts of one key).
func (s *Server) inTx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	var err error
	for try := 0; try < 5; try++ {
		if err = s.db.WithContext(ctx).Transaction(fn); !isRetryable(err) {
			return err
		}
		time.Sleep(time.Duration(try+1) * 10 * time.Millisecond)
	}
	return err
}

// loseReply drops the connection without a byte of response: the charge is
// recorded, but the client sees the reply vanish (pm_timeout).
func loseReply(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// HTTP/2 cannot be hijacked; aborting resets the stream instead.
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

func (s *Server) handleGetCharge(w http.ResponseWriter, r *http.Request) {
	row, err := chargeByKey(r.Context(), s.db, r.PathValue("key"))
	if errors.Is(err, errNoRow) {
		err = &apiError{status: http.StatusNotFound, code: "charge_not_found", msg: "no charge under this idempotency key"}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, row.toJSON())
}

func (s *Server) handleGetChargeByID(w http.ResponseWriter, r *http.Request) {
	row, err := chargeByID(r.Context(), s.db, r.PathValue("id"))
	if errors.Is(err, errNoRow) {
		err = errChargeNotFound
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, row.toJSON())
}

// parseWindow reads the from and to of a list: RFC 3339 times, from before
// to, rounded up to the store's microsecond.
func parseWindow(r *http.Request) (from, to dbTime, err error) {
	f, err1 := time.Parse(time.RFC3339, r.URL.Query().Get("from"))
	t, err2 := time.Parse(time.RFC3339, r.URL.Query().Get("to"))
	if err1 != nil || err2 != nil || !f.Before(t) {
		return dbTime{}, dbTime{}, badRequest("validation_failed", "from and to must be RFC 3339 times with from before to")
	}
	return ceilMicro(f), ceilMicro(t), nil
}

func (s *Server) handleListCharges(w http.ResponseWriter, r *http.Request) {
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
	rows, more, err := chargesPage(r.Context(), s.db, from, to, r.URL.Query().Get("starting_after"), limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := chargeListJSON{Data: make([]chargeJSON, len(rows)), HasMore: more}
	for i, row := range rows {
		out.Data[i] = row.toJSON()
	}
	writeJSON(w, http.StatusOK, out)
}

// Pages of a list: limit defaults to defaultPage and may not pass maxPage.
const (
	defaultPage = 100
	maxPage     = 1000
)

// pageLimit reads a list's limit.
func pageLimit(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return defaultPage, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxPage {
		return 0, badRequest("validation_failed", "limit must be a whole number from 1 to %d", maxPage)
	}
	return n, nil
}

// ceilMicro rounds a window bound up to the store's microsecond: a stored
// time t is at or after a bound b exactly when it is at or after b rounded up.
func ceilMicro(t time.Time) dbTime {
	c := at(t)
	if c.Before(t) {
		c = at(c.Add(time.Microsecond))
	}
	return c
}

// newID returns a prefixed, time-ordered unique ID.
func newID(prefix string) string {
	id, err := uuid.NewV7()
	if err != nil {
		id = uuid.New()
	}
	return prefix + id.String()
}
