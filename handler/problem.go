// Package handler is payd's HTTP face: routes (with the idempotency
// middleware wired in), request binding, authentication and the one table
// that turns errors into RFC 9457 problem responses. Handlers stay thin: bind, call a
// use case, render.
package handler

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/idempotency"
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
	// SKU, on out_of_stock, names the line the stock could not take.
	SKU string `json:"sku,omitempty"`
	// Instance is the path of the request this occurrence answers (no
	// query: it can carry what the caller searched for).
	Instance string `json:"instance,omitempty"`
	// RequestID is the request's X-Request-ID, the key to payd's logs. A
	// replayed answer keeps the one of the request that produced it.
	RequestID string `json:"request_id,omitempty"`
	// Errors lists every invalid field of a validation_failed request.
	Errors []FieldError `json:"errors,omitempty"`
	// Actions, on a refused resolution, lists the actions that may still
	// resolve the discrepancy (domain's table); empty when none does.
	Actions    []string `json:"actions,omitzero"`
	retryAfter int
}

// FieldError is one invalid input: the field or query parameter and what
// is wrong with it.
type FieldError struct {
	Param  string `json:"param"`
	Detail string `json:"detail"`
}

func (p *Problem) Error() string { return p.Code + ": " + p.Detail }

// problem is a problem of code with detail; its status and title are the
// code's, from the catalogue (problemTypes), the one place they are
// written. A code the catalogue lacks is a bug in payd: it panics.
func problem(code, detail string) *Problem {
	pt, ok := problemTypes[code]
	if !ok {
		panic("handler: problem code " + code + " is not in problemTypes")
	}
	return &Problem{Type: "/problems/" + code, Title: pt.Title, Status: pt.Status, Detail: detail, Code: code}
}

// Problems the handler layer raises itself, before any use case runs.
var (
	errMalformedJSON  = problem("validation_failed", "The request body is not valid JSON.")
	errTooLarge       = problem("payload_too_large", "The request body exceeds 1 MiB.")
	errUploadTooLarge = problem("payload_too_large", "The upload exceeds 64 MiB.")
	errContentType    = problem("unsupported_media_type", "Send the request body as application/json.")
	errKeyConflict    = problem("idempotency_key_invalid", "The Idempotency-Key header and the request_id field differ.")
	errRouteNotFound  = problem("not_found", "No such route.")
	errMethodNotAllow = problem("method_not_allowed", "This route does not accept that method.")
	errTooManyStreams = retryAfter(problem("too_many_streams",
		"This customer already has as many event streams open as payd allows. Close one, or retry after the time in Retry-After."), 5)
)

// rateLimited is the problem of a request over its caller's rate limit,
// to be retried after seconds (at least 1). The limiter sets the
// RateLimit-Policy and RateLimit headers itself.
func rateLimited(seconds int) *Problem {
	return retryAfter(problem("rate_limited",
		"Too many requests from this caller. Retry after the time in Retry-After."), max(seconds, 1))
}

// retryAfter sets the Retry-After seconds a problem answers with.
func retryAfter(p *Problem, seconds int) *Problem {
	p.retryAfter = seconds
	return p
}

// outcomeRetryAfter is the Retry-After, in seconds, of
// payment_outcome_unknown. A retry with the same key runs again and first
// asks the provider what became of the earlier try's refund, under that
// refund's own key (ADR 0043): it needs no more than the provider back, so
// the wait is short — that of a pay whose outcome is unknown (202 with
// Retry-After 2), one second longer than service_unavailable's, since the
// retry costs a provider call, not only a database round trip.
const outcomeRetryAfter = 2

// unavailableRetryAfter is the Retry-After, in seconds, of
// service_unavailable: the shortest wait, since a retry costs only a
// round trip to the database.
const unavailableRetryAfter = 1

// storedRetryAfter is the Retry-After a replayed answer carries: a record
// keeps no headers, and a 503 is never answered without one (a concurrent
// duplicate is given the original's 503, docs/guarantees.md).
func storedRetryAfter(r idempotency.Response) int {
	if r.Status != http.StatusServiceUnavailable {
		return 0
	}
	var p struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(r.Body, &p) == nil && p.Code == "payment_outcome_unknown" {
		return outcomeRetryAfter
	}
	return unavailableRetryAfter
}

// errorRow maps the errors it matches to one problem: its code (whose
// status and title the catalogue holds) and the sentence a caller can read.
type errorRow struct {
	match  func(error) bool
	code   string
	detail string
	// adorn, optional, adds what varies per error: a decline code, a
	// Retry-After, the invalid fields.
	adorn func(p *Problem, err error)
	// unexpected rows are logged as internal errors: the caller cannot act
	// on them, an operator can.
	unexpected bool
	// outage rows are logged as warnings, with their cause: a dependency
	// that did not answer is no fault in payd and the caller is told to
	// repeat the request, but an operator wants to know.
	outage bool
}

// errorTable is the one place where errors become HTTP answers. Rows are
// tried in order (errors.Is / errors.As); the last matches anything. A
// *Problem a handler returns answers as itself.
var errorTable = []errorRow{
	// First: whatever the handler answered, it was not stored, so it is
	// not sent (ADR 0051).
	{match: is(idempotency.ErrAnswerNotStored), code: "service_unavailable",
		detail: "payd lost its database while storing its answer to this request, so it sends none: every request with this idempotency key gets the same answer. Retry with the same idempotency key after the time in Retry-After; the retry finds what this request did and answers it.",
		adorn:  func(p *Problem, _ error) { p.retryAfter = unavailableRetryAfter }, outage: true},
	{match: isValidation, code: "validation_failed", adorn: listInvalid},
	rowOf(is(idempotency.ErrMalformedBody), errMalformedJSON),
	rowOf(is(idempotency.ErrKeyConflict), errKeyConflict),
	// A payment the provider charged nothing for is no decline: before card_declined.
	{match: notCharged, code: "payment_not_completed",
		detail: "The provider charged nothing for this payment. You may try again."},
	{match: is(domain.ErrKeyMissing), code: "idempotency_key_missing",
		detail: "This request needs an Idempotency-Key header (a UUID v4 is recommended)."},
	{match: is(domain.ErrKeyInvalid), code: "idempotency_key_invalid",
		detail: "An idempotency key is 1 to 255 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-'."},
	{match: is(domain.ErrKeyInUse), code: "idempotency_key_in_use",
		detail: "A request with this idempotency key is still being processed. Retry after the time in Retry-After.", adorn: retryWhenFree},
	{match: is(domain.ErrKeyReused), code: "idempotency_key_reused",
		detail: "This idempotency key was already used for a different request. Use a new key for a new request."},
	{match: is(domain.ErrOrderNotFound), code: "order_not_found",
		detail: "There is no such order."},
	{match: is(domain.ErrRecordNotFound), code: "request_not_found",
		detail: "No request with this idempotency key is known."},
	{match: is(domain.ErrOrderAlreadyPaid), code: "order_already_paid",
		detail: "This order has already been paid."},
	{match: is(domain.ErrPaymentInProgress), code: "order_payment_in_progress",
		detail: "Another payment for this order is in progress."},
	// order_expired before order_not_payable: an expired order matches both.
	{match: is(domain.ErrOrderExpired), code: "order_expired",
		detail: "This order has expired and can no longer be paid."},
	{match: is(domain.ErrOrderNotPayable), code: "order_not_payable",
		detail: "This order was cancelled or has expired and can no longer be paid."},
	{match: is(domain.ErrPaymentMethodInvalid), code: "payment_method_invalid",
		detail: "The payment provider does not know this payment method; nothing was charged. Use another one."},
	{match: is(domain.ErrOrderNotCancelable), code: "order_not_cancelable",
		detail: "This order can no longer be cancelled."},
	{match: is(domain.ErrCaptureTooLarge), code: "capture_too_large",
		detail: "The capture exceeds what the order holds; nothing was captured."},
	{match: is(domain.ErrAuthorizationExpired), code: "authorization_expired",
		detail: "The order's hold ran past capture_before: it can no longer be captured, and it is voided."},
	{match: is(domain.ErrOrderNotCapturable), code: "order_not_capturable",
		detail: "The order holds no money to capture: it is not authorized, was captured already, or another capture or a cancel is ending its hold."},
	{match: is(domain.ErrOrderNotPaid), code: "order_not_paid",
		detail: "Only a paid order ships: this one is not paid yet, its money is only held, or it was refunded in full."},
	{match: is(domain.ErrPaymentDeclined), code: "card_declined",
		detail: "The payment was declined. Try another payment method.", adorn: declineCode},
	// No final answer yet, and payd's own to find: a 503 asking for the
	// same request again, never a 5xx of its own (ADR 0047).
	{match: is(domain.ErrOutcomeUnknown), code: "payment_outcome_unknown",
		detail: "The payment provider did not answer; payd resolves the outcome by itself. Retry with the same idempotency key after the time in Retry-After.",
		adorn:  func(p *Problem, _ error) { p.retryAfter = outcomeRetryAfter }},
	{match: is(domain.ErrAmountMismatch), code: "payment_amount_mismatch",
		detail: "The payment provider reported a charge for another amount or currency than the order's. The order was not paid; an operator will refund or apply the charge. Do not pay again."},
	{match: is(domain.ErrEmailTaken), code: "email_taken",
		detail: "An account with this email address already exists."},
	{match: is(domain.ErrUnauthorized), code: "unauthorized",
		detail: "A valid bearer token is required."},
	{match: is(domain.ErrForbidden), code: "forbidden",
		detail: "This token is valid but not for this route: customer routes take a customer token, operator routes an admin token, the catalogue's writes a merchant key."},
	{match: is(domain.ErrOrderNotRefundable), code: "order_not_refundable",
		detail: "Only a paid order can be refunded."},
	{match: is(domain.ErrRefundTooLarge), code: "refund_too_large",
		detail: "The refund exceeds what remains refundable on this order; nothing was refunded."},
	{match: is(domain.ErrRefundRefused), code: "refund_refused",
		detail: "The payment provider refused the refund; nothing was refunded."},
	{match: is(domain.ErrRunNotFound), code: "reconciliation_not_found",
		detail: "There is no such reconciliation run."},
	{match: is(domain.ErrDiscrepancyNotFound), code: "discrepancy_not_found",
		detail: "There is no such discrepancy."},
	{match: is(domain.ErrProductNotFound), code: "product_not_found",
		detail: "There is no such product."},
	{match: is(domain.ErrSKUTaken), code: "sku_taken",
		detail: "A product with this SKU already exists; nothing was stored."},
	{match: is(domain.ErrInsufficientStock), code: "insufficient_stock",
		detail: "The stock may not go below 0; nothing was changed."},
	{match: is(domain.ErrOutOfStock), code: "out_of_stock", adorn: nameSKU,
		detail: "A line asks for more than is left of its product; nothing was created and no stock was taken."},
	{match: is(domain.ErrStockUnlimited), code: "stock_unlimited",
		detail: "The product's stock is unlimited (null): there is nothing to adjust. Nothing was changed."},
	{match: is(domain.ErrEndpointNotFound), code: "endpoint_not_found",
		detail: "There is no such endpoint."},
	{match: is(domain.ErrNotifyEventNotFound), code: "event_not_found",
		detail: "There is no such event."},
	{match: is(domain.ErrEndpointURLRefused), code: "endpoint_url_refused",
		detail: "payd does not send to this address: it is loopback, private or link-local (payd's own network). Nothing was stored."},
	{match: is(domain.ErrAlreadyResolved), code: "discrepancy_already_resolved",
		detail: "This discrepancy was already resolved with another action.", adorn: listActions},
	{match: ownedElsewhere, code: "charge_belongs_to_other_order",
		detail: "The provider says this charge pays another order; nothing was refunded or applied.", adorn: nameOwner},
	// A lost dispute before an open one: a lost one is also disputed.
	{match: is(domain.ErrChargeDisputeLost), code: "charge_disputed",
		detail: "The customer's dispute of this charge was lost: the bank gave the disputed money to the customer and it is gone, so there is nothing of it to refund. Nothing was refunded."},
	{match: is(domain.ErrChargeDisputed), code: "charge_disputed",
		detail: "The charge is under an open dispute: the bank has taken the money back, so a refund would give it twice. Nothing was refunded; answer the dispute at the provider."},
	{match: is(domain.ErrResolutionNotApplicable), code: "resolution_not_applicable",
		detail: "This action does not fit this discrepancy; choose another.", adorn: nameFits},
	{match: is(idempotency.ErrStoredResponseUnreadable), code: "stored_response_unreadable",
		detail: "The answer stored for this idempotency key was sealed with a secret key this server no longer has, so it cannot be replayed; the request was not executed again. Its token, if any, no longer works either."},
	// Echo's own refusals, before a handler ran.
	rowOf(httpStatus(http.StatusNotFound), errRouteNotFound),
	rowOf(httpStatus(http.StatusMethodNotAllowed), errMethodNotAllow),
	rowOf(httpStatus(http.StatusRequestEntityTooLarge), errTooLarge),
	rowOf(httpStatus(http.StatusUnsupportedMediaType), errContentType),
	{match: httpStatus(0), code: "http_error", adorn: echoStatus}, // status: the HTTPError's own
	// The database restarting, or the provider's API down while its webhook
	// arrives, is no fault in payd, but an operator wants to know.
	{match: unreachable, code: "service_unavailable",
		detail: "payd cannot reach its database right now. Retry after the time in Retry-After; a retry with the same idempotency key is safe.",
		adorn:  nameUnreachable, outage: true},
	{match: func(error) bool { return true }, code: "internal_error",
		detail: "Something went wrong on our side. It has been logged.", unexpected: true},
}

// toProblem turns any error into the problem the client sees; ok is false
// for errors nobody expected and for outages (both are logged).
func toProblem(err error) (*Problem, bool) {
	p, row := lookUp(err)
	return p, row == nil || !(row.unexpected || row.outage)
}

// lookUp is the problem err answers with and the row that made it (nil
// for a *Problem, which answers as itself).
func lookUp(err error) (*Problem, *errorRow) {
	var p *Problem
	if errors.As(err, &p) {
		return p, nil
	}
	for i := range errorTable {
		row := &errorTable[i]
		if !row.match(err) {
			continue
		}
		p := problem(row.code, row.detail)
		if row.adorn != nil {
			row.adorn(p, err)
		}
		return p, row
	}
	panic("errorTable has no catch-all row")
}

// nameUnreachable sets service_unavailable's wait and, when the payment
// provider is what payd could not reach (a provider webhook whose charge
// payd must ask about first, ADR 0031), says so.
func nameUnreachable(p *Problem, err error) {
	p.retryAfter = unavailableRetryAfter
	if errors.Is(err, domain.ErrProviderUnreachable) && !errors.Is(err, domain.ErrUnavailable) {
		p.Detail = "payd cannot reach the payment provider right now; nothing was applied. Retry after the time in Retry-After; a retry of the same request is safe."
	}
}

// nameSKU names the SKU out of stock, in the problem's sku and detail.
func nameSKU(p *Problem, err error) {
	var e *domain.OutOfStockError
	if errors.As(err, &e) {
		p.SKU = e.SKU
		p.Detail = fmt.Sprintf("The line of %s asks for more than is left of it; nothing was created and no stock was taken.", e.SKU)
	}
}

// rowOf is the row answering errors that match with the problem p the
// handler layer also raises itself.
func rowOf(match func(error) bool, p *Problem) errorRow {
	return errorRow{match: match, code: p.Code, detail: p.Detail}
}

// is matches errors that are target (errors.Is).
func is(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

// httpStatus matches an *echo.HTTPError with that status; 0 matches any.
func httpStatus(status int) func(error) bool {
	return func(err error) bool {
		var he *echo.HTTPError
		return errors.As(err, &he) && (status == 0 || he.Code == status)
	}
}

// echoStatus answers an *echo.HTTPError with its own status and message.
func echoStatus(p *Problem, err error) {
	var he *echo.HTTPError
	errors.As(err, &he)
	p.Status, p.Detail = he.Code, fmt.Sprint(he.Message)
}

// notCharged matches a payment the provider says it charged nothing for
// without declining it (domain.NotCharged).
func notCharged(err error) bool {
	var decline *domain.DeclineError
	return errors.As(err, &decline) && decline.Code == domain.NotCharged
}

// ownedElsewhere matches a refusal to act on another order's charge.
func ownedElsewhere(err error) bool {
	var owner *domain.ChargeOwnerError
	return errors.As(err, &owner)
}

// nameOwner names the charge and the order the provider says it pays,
// so the operator knows where to look. Both are the provider's IDs of
// a charge it found, not the uploaded file's words.
func nameOwner(p *Problem, err error) {
	var owner *domain.ChargeOwnerError
	if errors.As(err, &owner) {
		p.Detail = fmt.Sprintf("The provider says charge %s pays order %s, not the order this action is about; nothing was refunded or applied. Act on that order instead.",
			truncateID(owner.ChargeID), truncateID(owner.OrderID))
	}
}

// listActions lists the actions that may still resolve the discrepancy a
// refused resolution is about (domain.UnfitError).
func listActions(p *Problem, err error) {
	var unfit *domain.UnfitError
	if errors.As(err, &unfit) {
		p.Actions = append([]string{}, unfit.Actions...)
	}
}

// nameFits lists the actions that fit the discrepancy, in the detail too.
func nameFits(p *Problem, err error) {
	listActions(p, err)
	switch {
	case p.Actions == nil:
	case len(p.Actions) == 0:
		p.Detail = "This action does not fit this discrepancy, and no other action fits it now."
	default:
		p.Detail = "This action does not fit this discrepancy. The actions that fit it: " + strings.Join(p.Actions, ", ") + "."
	}
}

// truncateID bounds an ID quoted in a problem's detail.
func truncateID(s string) string {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}

// declineCode tells the caller why the provider declined.
func declineCode(p *Problem, err error) {
	var decline *domain.DeclineError
	if errors.As(err, &decline) {
		p.DeclineCode = decline.Code
	}
}

// retryWhenFree sets Retry-After to when the key's holder finishes or its
// lease ends (idempotency.InUseError).
func retryWhenFree(p *Problem, err error) {
	var inUse *idempotency.InUseError
	if errors.As(err, &inUse) {
		p.retryAfter = int(inUse.RetryAfter.Round(time.Second) / time.Second)
		return
	}
	// Another request holds the work this one began (a reconciliation run
	// taken over, domain.ErrRunTakenOver): it answers soon.
	p.retryAfter = unavailableRetryAfter
}

// isValidation matches errors about the input: one or several invalid fields.
func isValidation(err error) bool {
	var invalid domain.ValidationErrors
	var one *domain.ValidationError
	return errors.As(err, &invalid) || errors.As(err, &one)
}

// listInvalid makes the problem list every invalid field of err.
func listInvalid(p *Problem, err error) {
	var invalid domain.ValidationErrors
	if !errors.As(err, &invalid) {
		var one *domain.ValidationError
		errors.As(err, &one)
		invalid = domain.ValidationErrors{one}
	}
	p.Detail = invalid.Error()
	for _, e := range invalid {
		if e.Field != "" {
			p.Errors = append(p.Errors, FieldError{Param: e.Field, Detail: e.Reason})
		}
	}
}

// ErrorHandler is Echo's HTTPErrorHandler: it writes every error as problem
// JSON and logs the unexpected ones (ERROR) and the outages (WARN), once,
// with the tracing ID.
func ErrorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		p, row := lookUp(err)
		switch {
		case row != nil && row.unexpected:
			log.ErrorContext(c.Request().Context(), "internal error",
				"err", err, "request_id", c.Response().Header().Get(echo.HeaderXRequestID),
				"method", c.Request().Method, "route", c.Path())
		case row != nil && row.outage:
			log.WarnContext(c.Request().Context(), "service unavailable",
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
		_ = writeJSON(c, p.Status, occurrence(c, p)) // the error handler: nobody left to tell
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
// was lost (the database restarting), as opposed to a fault in payd. The
// adapters classify what their drivers and sockets say: the repository
// marks domain.ErrUnavailable (a lost or refused connection, a server
// shutting down, a Galera node out of its cluster, a write still
// conflicting after every retry), the provider adapters
// domain.ErrProviderUnreachable (a connection to the provider refused or
// broken).
func unreachable(err error) bool {
	return errors.Is(err, domain.ErrUnavailable) || errors.Is(err, domain.ErrProviderUnreachable)
}
