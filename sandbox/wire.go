package sandbox

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/payd/payd/domain"
)

// The sandbox's side of the wire format. It is written independently of
// the client's DTOs on purpose: the client tests then prove the two agree,
// as they would have to with a real, foreign provider.

type chargeRequestJSON struct {
	OrderID       string `json:"order_id"`
	Amount        string `json:"amount"`
	Currency      string `json:"currency"`
	PaymentMethod string `json:"payment_method"`
	// CaptureMethod is automatic (the default) or manual.
	CaptureMethod string `json:"capture_method"`
}

type chargeJSON struct {
	ID             string `json:"id"`
	IdempotencyKey string `json:"idempotency_key"`
	OrderID        string `json:"order_id"`
	Amount         string `json:"amount"`
	Currency       string `json:"currency"`
	PaymentMethod  string `json:"payment_method"`
	Status         string `json:"status"`
	FailureCode    string `json:"failure_code"`
	RefundedAmount string `json:"refunded_amount"`
	// DisputedAmount is what disputes withdrew and have not given back
	// (open or lost).
	DisputedAmount string `json:"disputed_amount"`
	CreatedAt      string `json:"created_at"`
	CaptureMethod  string `json:"capture_method"`
	// Captured says the charge took money; AmountCaptured is how much
	// (for a manual charge, what its capture took).
	Captured       bool   `json:"captured"`
	AmountCaptured string `json:"amount_captured"`
	// CaptureBefore is when an authorized charge's hold lapses; absent
	// for any other charge.
	CaptureBefore string `json:"capture_before,omitempty"`
}

// captureRequestJSON is POST /v1/captures: capture amount of an
// authorized charge (all of it when amount is empty).
type captureRequestJSON struct {
	ChargeID string `json:"charge_id"`
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

// voidRequestJSON is POST /v1/voids: give up an authorized charge's hold.
type voidRequestJSON struct {
	ChargeID string `json:"charge_id"`
}

type chargeListJSON struct {
	Data    []chargeJSON `json:"data"`
	HasMore bool         `json:"has_more"`
}

type refundRequestJSON struct {
	ChargeID string `json:"charge_id"`
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
	Reason   string `json:"reason"`
}

type refundJSON struct {
	ID             string `json:"id"`
	IdempotencyKey string `json:"idempotency_key"`
	ChargeID       string `json:"charge_id"`
	OrderID        string `json:"order_id"` // the refunded charge's
	Amount         string `json:"amount"`
	Currency       string `json:"currency"`
	Status         string `json:"status"`
	CreatedAt      string `json:"created_at"`
}

type refundListJSON struct {
	Data    []refundJSON `json:"data"`
	HasMore bool         `json:"has_more"`
}

type disputeJSON struct {
	ID             string  `json:"id"`
	ChargeID       string  `json:"charge_id"`
	IdempotencyKey string  `json:"idempotency_key"` // the disputed charge's
	OrderID        string  `json:"order_id"`
	Amount         string  `json:"amount"`
	Currency       string  `json:"currency"`
	Status         string  `json:"status"` // open, won or lost
	Reason         string  `json:"reason"`
	CreatedAt      string  `json:"created_at"`
	ClosedAt       *string `json:"closed_at"`       // null while open
	EvidenceDueBy  string  `json:"evidence_due_by"` // when the merchant's evidence is due
}

type disputeListJSON struct {
	Data []disputeJSON `json:"data"`
}

type closeDisputeRequestJSON struct {
	Status string `json:"status"`
}

type errorJSON struct {
	Error errorBody `json:"error"`
}

type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// formatTime renders a stored instant as RFC 3339 UTC with its microseconds,
// so a time read back from the API selects the same rows in a window query.
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// money renders minor units at the currency's full scale ("19.90").
func money(minor int64, currency string) string {
	c := domain.Currency(currency)
	return domain.FormatAmount(domain.FromMinorUnits(minor, c), c)
}

func (r chargeRow) toJSON() chargeJSON {
	out := chargeJSON{
		ID: r.ID, IdempotencyKey: r.IdempotencyKey, OrderID: r.OrderID,
		Amount: money(r.AmountMinor, r.Currency), Currency: r.Currency,
		PaymentMethod: r.PaymentMethod, Status: r.Status, FailureCode: r.FailureCode,
		RefundedAmount: money(r.RefundedMinor, r.Currency), DisputedAmount: money(r.disputedMinor(), r.Currency),
		CreatedAt:     formatTime(r.CreatedAt.Time),
		CaptureMethod: cmp.Or(r.CaptureMethod, string(domain.CaptureAutomatic)),
		Captured:      r.Status == string(domain.ChargeSucceeded), AmountCaptured: money(r.capturedMinor(), r.Currency),
	}
	if r.Status == string(domain.ChargeAuthorized) {
		out.CaptureBefore = formatTime(r.CaptureBefore.Time)
	}
	return out
}

func (r refundRow) toJSON() refundJSON {
	return refundJSON{
		ID: r.ID, IdempotencyKey: r.IdempotencyKey, ChargeID: r.ChargeID, OrderID: r.OrderID,
		Amount: money(r.AmountMinor, r.Currency), Currency: r.Currency,
		Status: r.Status, CreatedAt: formatTime(r.CreatedAt.Time),
	}
}

func (d disputeRow) toJSON() disputeJSON {
	out := disputeJSON{
		ID: d.ID, ChargeID: d.ChargeID, IdempotencyKey: d.ChargeKey, OrderID: d.OrderID,
		Amount: money(d.AmountMinor, d.Currency), Currency: d.Currency,
		Status: d.Status, Reason: d.Reason, CreatedAt: formatTime(d.CreatedAt.Time),
		EvidenceDueBy: formatTime(d.evidenceDue()),
	}
	if !d.ClosedAt.IsZero() {
		closed := formatTime(d.ClosedAt.Time)
		out.ClosedAt = &closed
	}
	return out
}

// apiError is a refusal with an HTTP status and a stable machine code; its
// message is safe to show the caller (it never echoes payment data).
type apiError struct {
	status int
	code   string
	msg    string
}

// Error renders the code and message.
func (e *apiError) Error() string { return e.code + ": " + e.msg }

func badRequest(code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, msg: fmt.Sprintf(format, args...)}
}

func unprocessable(code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusUnprocessableEntity, code: code, msg: fmt.Sprintf(format, args...)}
}

// maxBody caps request bodies: nothing the API accepts comes close.
const maxBody = 1 << 20

// decodeJSON reads exactly one JSON object into v, refusing unknown fields,
// trailing data, a wrong content type and oversized bodies.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return &apiError{status: http.StatusUnsupportedMediaType, code: "unsupported_media_type", msg: "send application/json"}
		}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &apiError{status: http.StatusRequestEntityTooLarge, code: "payload_too_large", msg: "body exceeds 1 MiB"}
		}
		return badRequest("invalid_json", "body is not a valid request: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("invalid_json", "body must hold a single JSON object")
	}
	return nil
}

// writeJSON sends v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
