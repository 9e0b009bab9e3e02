// Package handler is payd's HTTP face: routes, request binding, the
// idempotency middleware, authentication and the one table that turns
// errors into RFC 9457 problem responses. Handlers stay thin: bind, call a
// use case, render.
package handler

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// Problem is an RFC 9457 problem detail with payd's stable machine code.
// It is also an error, so handlers can return one directly. Type is a
// relative URI that payd serves (/problems/{code}, see problemTypes).
type Problem struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	Status      int    `json:"status"`
	Detail      string `json:"detail,omitempty"`
	Code        string `json:"code"`
	DeclineCode string `json:"decline_code,omitempty"`
	// Instance is the path of the request this occurrence answers (no
	// query: it can carry what the caller searched for).
	Instance string `json:"instance,omitempty"`
	// RequestID is the request's X-Request-ID, the key to payd's logs. A
	// replayed answer keeps the one of the request that produced it.
	RequestID string `json:"request_id,omitempty"`
	// Errors lists every invalid field of a validation_failed request.
	Errors     []FieldError `json:"errors,omitempty"`
	retryAfter int
}

// FieldError is one invalid input: the field or query parameter and what
// is wrong with it.
type FieldError struct {
	Param  string `json:"param"`
	Detail string `json:"detail"`
}

func (p *Problem) Error() string { return p.Code + ": " + p.Detail }

func problem(status int, code, title, detail string) *Problem {
	return &Problem{Type: "/problems/" + code, Title: title, Status: status, Detail: detail, Code: code}
}

// Problems the handler layer raises itself, before any use case runs.
var (
	errMalformedJSON  = problem(http.StatusBadRequest, "validation_failed", "Invalid request", "The request body is not valid JSON.")
	errTooLarge       = problem(http.StatusRequestEntityTooLarge, "payload_too_large", "Payload too large", "The request body exceeds 1 MiB.")
	errContentType    = problem(http.StatusUnsupportedMediaType, "unsupported_media_type", "Unsupported media type", "Send the request body as application/json.")
	errKeyConflict    = problem(http.StatusBadRequest, "idempotency_key_invalid", "Idempotency key invalid", "The Idempotency-Key header and the request_id field differ.")
	errRouteNotFound  = problem(http.StatusNotFound, "not_found", "Not found", "No such route.")
	errMethodNotAllow = problem(http.StatusMethodNotAllowed, "method_not_allowed", "Method not allowed", "This route does not accept that method.")
	errTooManyStreams = retryAfter(problem(http.StatusTooManyRequests, "too_many_streams", "Too many event streams",
		"This customer already has as many event streams open as payd allows. Close one, or retry after the time in Retry-After."), 5)
)

// retryAfter sets the Retry-After seconds a problem answers with.
func retryAfter(p *Problem, seconds int) *Problem {
	p.retryAfter = seconds
	return p
}

// errorRow maps one domain error to its HTTP status, code and title.
type errorRow struct {
	err    error
	status int
	code   string
	title  string
}

// errorTable is the one place where domain errors become HTTP answers.
// Rows are matched with errors.Is, in order.
var errorTable = []errorRow{
	{domain.ErrKeyMissing, http.StatusBadRequest, "idempotency_key_missing", "Idempotency key missing"},
	{domain.ErrKeyInvalid, http.StatusBadRequest, "idempotency_key_invalid", "Idempotency key invalid"},
	{domain.ErrKeyInUse, http.StatusConflict, "idempotency_key_in_use", "Request still in progress"},
	{domain.ErrKeyReused, http.StatusUnprocessableEntity, "idempotency_key_reused", "Idempotency key reused"},
	{domain.ErrOrderNotFound, http.StatusNotFound, "order_not_found", "Order not found"},
	{domain.ErrRecordNotFound, http.StatusNotFound, "request_not_found", "Request not found"},
	{domain.ErrOrderAlreadyPaid, http.StatusConflict, "order_already_paid", "Order already paid"},
	{domain.ErrPaymentInProgress, http.StatusConflict, "order_payment_in_progress", "Payment in progress"},
	{domain.ErrOrderExpired, http.StatusConflict, "order_expired", "Order expired"}, // before order_not_payable: it matches both
	{domain.ErrOrderNotPayable, http.StatusConflict, "order_not_payable", "Order not payable"},
	{domain.ErrPaymentMethodInvalid, http.StatusBadRequest, "payment_method_invalid", "Payment method invalid"},
	{domain.ErrOrderNotCancelable, http.StatusConflict, "order_not_cancelable", "Order cannot be cancelled"},
	{domain.ErrPaymentDeclined, http.StatusPaymentRequired, "card_declined", "Payment declined"},
	{domain.ErrOutcomeUnknown, http.StatusBadGateway, "payment_outcome_unknown", "Payment outcome unknown"},
	{domain.ErrAmountMismatch, http.StatusBadGateway, "payment_amount_mismatch", "Payment amount mismatch"},
	{domain.ErrEmailTaken, http.StatusConflict, "email_taken", "Email already registered"},
	{domain.ErrUnauthorized, http.StatusUnauthorized, "unauthorized", "Unauthorized"},
	{domain.ErrForbidden, http.StatusForbidden, "forbidden", "Forbidden"},
	{domain.ErrOrderNotRefundable, http.StatusConflict, "order_not_refundable", "Order not refundable"},
	{domain.ErrRefundTooLarge, http.StatusConflict, "refund_too_large", "Refund too large"},
	{domain.ErrRefundRefused, http.StatusBadGateway, "refund_refused", "Refund refused by the provider"},
	{domain.ErrRunNotFound, http.StatusNotFound, "reconciliation_not_found", "Reconciliation not found"},
	{domain.ErrDiscrepancyNotFound, http.StatusNotFound, "discrepancy_not_found", "Discrepancy not found"},
	{domain.ErrAlreadyResolved, http.StatusConflict, "discrepancy_already_resolved", "Discrepancy already resolved"},
	{domain.ErrResolutionNotApplicable, http.StatusConflict, "resolution_not_applicable", "Resolution not applicable"},
	{service.ErrStoredResponseUnreadable, http.StatusGone, "stored_response_unreadable", "Stored response unreadable"},
}

// details gives each domain error a sentence a customer can read.
var details = map[string]string{
	"idempotency_key_missing":      "This request needs an Idempotency-Key header (a UUID v4 is recommended).",
	"idempotency_key_invalid":      "An idempotency key is 1 to 255 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-'.",
	"idempotency_key_in_use":       "A request with this idempotency key is still being processed. Retry after the time in Retry-After.",
	"idempotency_key_reused":       "This idempotency key was already used for a different request. Use a new key for a new request.",
	"order_not_found":              "There is no such order.",
	"request_not_found":            "No request with this idempotency key is known.",
	"order_already_paid":           "This order has already been paid.",
	"order_payment_in_progress":    "Another payment for this order is in progress.",
	"order_not_payable":            "This order was cancelled or has expired and can no longer be paid.",
	"order_expired":                "This order has expired and can no longer be paid.",
	"payment_method_invalid":       "The payment provider does not know this payment method; nothing was charged. Use another one.",
	"order_not_cancelable":         "This order can no longer be cancelled.",
	"card_declined":                "The payment was declined. Try another payment method.",
	"payment_outcome_unknown":      "The payment provider did not answer; the outcome will be resolved.",
	"payment_amount_mismatch":      "The payment provider reported a charge for another amount or currency than the order's. The order was not paid; an operator will refund or apply the charge. Do not pay again.",
	"email_taken":                  "An account with this email address already exists.",
	"unauthorized":                 "A valid bearer token is required.",
	"forbidden":                    "This token is valid but not for this route: customer routes take a customer token, operator routes the admin token.",
	"order_not_refundable":         "Only a paid order can be refunded.",
	"refund_too_large":             "The refund exceeds what remains refundable on this order; nothing was refunded.",
	"refund_refused":               "The payment provider refused the refund; nothing was refunded.",
	"reconciliation_not_found":     "There is no such reconciliation run.",
	"discrepancy_not_found":        "There is no such discrepancy.",
	"discrepancy_already_resolved": "This discrepancy was already resolved with another action.",
	"resolution_not_applicable":    "This action does not fit this discrepancy; choose another.",
	"stored_response_unreadable":   "The answer stored for this idempotency key was sealed with a secret key this server no longer has, so it cannot be replayed; the request was not executed again. Its token, if any, no longer works either.",
}

// toProblem turns any error into the problem the client sees; ok is false
// for errors nobody expected (they become a 500 and are logged).
func toProblem(err error) (*Problem, bool) {
	var p *Problem
	if errors.As(err, &p) {
		return p, true
	}
	if p := validationProblem(err); p != nil {
		return p, true
	}
	if decline := (*domain.DeclineError)(nil); errors.As(err, &decline) && decline.Code == domain.NotCharged {
		return problem(http.StatusBadGateway, "payment_not_completed", "Payment not completed",
			"The payment never reached the provider and nothing was charged. You may try again."), true
	}
	for _, row := range errorTable {
		if !errors.Is(err, row.err) {
			continue
		}
		p := problem(row.status, row.code, row.title, details[row.code])
		var inUse *service.InUseError
		if errors.As(err, &inUse) {
			p.retryAfter = int(inUse.RetryAfter.Round(time.Second) / time.Second)
		}
		var decline *domain.DeclineError
		if errors.As(err, &decline) {
			p.DeclineCode = decline.Code
		}
		return p, true
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return errRouteNotFound, true
		case http.StatusMethodNotAllowed:
			return errMethodNotAllow, true
		case http.StatusRequestEntityTooLarge:
			return errTooLarge, true
		case http.StatusUnsupportedMediaType:
			return errContentType, true
		}
		return problem(he.Code, "http_error", "HTTP error", fmt.Sprint(he.Message)), true
	}
	if unreachable(err) {
		p := problem(http.StatusServiceUnavailable, "service_unavailable", "Service unavailable",
			"payd cannot reach its database right now. Retry after the time in Retry-After; a retry with the same idempotency key is safe.")
		p.retryAfter = 1
		return p, false // still logged: an operator wants to know
	}
	return problem(http.StatusInternalServerError, "internal_error", "Internal error", "Something went wrong on our side. It has been logged."), false
}

// validationProblem is the validation_failed problem of err listing every
// invalid field, or nil when err is not about the input.
func validationProblem(err error) *Problem {
	var invalid domain.ValidationErrors
	if !errors.As(err, &invalid) {
		var one *domain.ValidationError
		if !errors.As(err, &one) {
			return nil
		}
		invalid = domain.ValidationErrors{one}
	}
	p := problem(http.StatusBadRequest, "validation_failed", "Invalid request", invalid.Error())
	for _, e := range invalid {
		if e.Field != "" {
			p.Errors = append(p.Errors, FieldError{Param: e.Field, Detail: e.Reason})
		}
	}
	return p
}

// ErrorHandler is Echo's HTTPErrorHandler: it writes every error as problem
// JSON and logs the unexpected ones, once, with the tracing ID.
func ErrorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		p, known := toProblem(err)
		if !known {
			log.ErrorContext(c.Request().Context(), "internal error",
				"err", err, "request_id", c.Response().Header().Get(echo.HeaderXRequestID),
				"method", c.Request().Method, "route", c.Path())
		}
		h := c.Response().Header()
		if p.retryAfter > 0 {
			h.Set("Retry-After", strconv.Itoa(p.retryAfter))
		}
		if p.Status == http.StatusUnauthorized {
			h.Set("WWW-Authenticate", `Bearer realm="payd"`)
		}
		if p.Code == "forbidden" {
			h.Set("WWW-Authenticate", `Bearer realm="payd", error="insufficient_scope"`) // RFC 6750 §3.1
		}
		writeJSON(c, p.Status, occurrence(c, p))
	}
}

// occurrence is p for this request: its path and tracing ID. It copies p,
// which may be a shared value (errMalformedJSON, ...).
func occurrence(c echo.Context, p *Problem) *Problem {
	q := *p
	q.Instance = c.Request().URL.EscapedPath()
	q.RequestID = c.Response().Header().Get(echo.HeaderXRequestID)
	return &q
}

// unreachable reports whether err says a connection could not be made or
// was lost (the database restarting), as opposed to a fault in payd.
func unreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET)
}
