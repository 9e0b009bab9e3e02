package handler

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// Keys under which a handler tells the audit trail what its action
// concerned, once it knows: the order a discrepancy is about, the run a
// reconciliation created, the refund a refund request made.
const (
	ctxAuditOrder  = "payd.audit.order"
	ctxAuditTarget = "payd.audit.target"
	ctxAuditInputs = "payd.audit.inputs"
	ctxAuditCode   = "payd.audit.code"
)

// auditInputs records what the operator asked for (never a secret: amounts,
// reasons, windows, actions and notes), once the request is known valid.
func auditInputs(c echo.Context, inputs map[string]any) { c.Set(ctxAuditInputs, inputs) }

// auditAbout names the order and the record an operator action concerned.
func auditAbout(c echo.Context, orderID, target string) {
	c.Set(ctxAuditOrder, orderID)
	c.Set(ctxAuditTarget, target)
}

// audited records every operator action — executed, replayed or refused —
// with who, what, the request ID and the result. It wraps the idempotency
// middleware so replays are on the trail too. What the action concerned
// comes from the handler when it ran (auditAbout) and from the path
// otherwise (a replay, a refusal), so an action about an order shows on
// that order's timeline.
func (h *Admin) audited(action string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			// The answer's problem code is read from what was written, so a
			// problem written by the handler and one written by the
			// idempotency layer (a key in use, a key reused, a replay) are
			// recorded alike.
			// What the action changes is told to the merchant as the
			// operator's doing (ADR 0053).
			c.SetRequest(c.Request().WithContext(service.WithCause(c.Request().Context(),
				domain.Cause{Kind: domain.CauseOperator, Ref: firstNonEmpty(operatorOf(c), SharedOperator)})))
			tap := &problemTap{ResponseWriter: c.Response().Writer}
			c.Response().Writer = tap
			if err := next(c); err != nil {
				c.Error(err)
			}
			c.Response().Writer = tap.ResponseWriter
			if code := tap.code(c.Response().Header().Get(echo.HeaderContentType)); code != "" {
				c.Set(ctxAuditCode, code)
			}
			key := requestKeyOf(c)
			if key == "" {
				key = c.Request().Header.Get("Idempotency-Key")
			}
			e := domain.AuditEntry{Actor: firstNonEmpty(operatorOf(c), SharedOperator), Action: action, RequestID: key, Result: c.Response().Status, Detail: auditDetail(c)}
			e.OrderID, _ = c.Get(ctxAuditOrder).(string)
			e.Target, _ = c.Get(ctxAuditTarget).(string)
			if action == "refund" {
				e.OrderID = c.Param("id") // the path names the order even when the refund was refused
			}
			e.Target = firstNonEmpty(e.Target, c.Param("did"))
			if action == "resolve_discrepancy" && e.OrderID == "" && domain.ValidID(e.Target) {
				// A refusal or a replay never reached auditAbout; the
				// discrepancy names its order, so the attempt is on that
				// order's timeline too.
				lctx, lcancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), 5*time.Second)
				if d, err := h.Service.Discrepancy(lctx, e.Target); err == nil {
					e.OrderID = d.OrderID
				}
				lcancel()
			}
			safeAuditEntry(c, &e)
			ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), 5*time.Second)
			defer cancel()
			if err := h.Service.Record(ctx, e); err != nil {
				// The answer has gone out; the one place that can still tell
				// an operator that the trail has a hole is the log.
				h.log().ErrorContext(ctx, "audit entry lost", "err", err, "action", action, "request_key_present", key != "", "result", e.Result)
			}
			return nil
		}
	}
}

// auditDetail is the entry's detail: whether the answer was a replay, and
// the inputs when the handler ran.
func auditDetail(c echo.Context) string {
	detail := map[string]any{}
	if in, ok := c.Get(ctxAuditInputs).(map[string]any); ok {
		maps.Copy(detail, in)
	}
	detail["replayed"] = c.Response().Header().Get("Idempotent-Replayed") == "true"
	if code, ok := c.Get(ctxAuditCode).(string); ok {
		detail["code"] = code // why it was refused or failed: the problem's code
	}
	b, err := json.Marshal(detail)
	if err != nil {
		return `{"replayed":false}`
	}
	return string(b)
}

func (h *Admin) log() *slog.Logger {
	if h.Log == nil {
		return slog.Default()
	}
	return h.Log
}

// safeAuditEntry keeps a refused request's entry storable on every
// database. Its path ids and key come from the caller and may be anything
// (600 characters, invalid UTF-8): written as they are, MariaDB would
// refuse the whole entry and the trail would have a hole exactly where
// someone probed. An id or key that payd could never have issued is left
// out of its column, and the path, escaped to ASCII and cut short, goes
// into the detail instead, so the entry still says what was asked.
func safeAuditEntry(c echo.Context, e *domain.AuditEntry) {
	odd := false
	if e.OrderID != "" && !domain.ValidID(e.OrderID) {
		e.OrderID, odd = "", true
	}
	if e.Target != "" && !domain.ValidID(e.Target) {
		e.Target, odd = "", true
	}
	if e.RequestID != "" && !domain.ValidKey(e.RequestID) {
		e.RequestID, odd = "", true
	}
	if !odd {
		return
	}
	detail := map[string]any{}
	_ = json.Unmarshal([]byte(e.Detail), &detail)
	path := c.Request().URL.EscapedPath()
	if len(path) > maxAuditPath {
		path = path[:maxAuditPath] + "..."
	}
	detail["path"] = path
	detail["malformed_input"] = true
	if b, err := json.Marshal(detail); err == nil {
		e.Detail = string(b)
	}
}

// maxAuditPath bounds how much of a malformed path an audit entry keeps.
const maxAuditPath = 200

// problemTap keeps the start of an operator action's answer, enough to
// read a problem's code: the audit records why an action was refused.
type problemTap struct {
	http.ResponseWriter
	head []byte
}

// maxProblemHead bounds what the tap keeps; a problem's code comes early.
const maxProblemHead = 4096

func (t *problemTap) Write(b []byte) (int, error) {
	if room := maxProblemHead - len(t.head); room > 0 {
		t.head = append(t.head, b[:min(room, len(b))]...)
	}
	return t.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (t *problemTap) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// code is the problem code of a problem+json answer ("" otherwise). Only
// a code payd could have written is kept: snake_case, at most 64 bytes.
func (t *problemTap) code(contentType string) string {
	if !strings.HasPrefix(contentType, "application/problem+json") {
		return ""
	}
	var p struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(t.head, &p) != nil || !problemCodeShape.MatchString(p.Code) {
		return ""
	}
	return p.Code
}

var problemCodeShape = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// auditOutcome names what an action's answer meant: succeeded (2xx),
// refused (4xx: nothing was done) or failed (5xx: payd or the provider
// could not do it).
func auditOutcome(status int) string {
	switch {
	case status >= 200 && status < 300:
		return "succeeded"
	case status >= 400 && status < 500:
		return "refused"
	case status >= 500:
		return "failed"
	}
	return "unknown"
}
