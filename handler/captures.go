package handler

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/service"
)

// Capturer captures the held money of manual-capture orders
// (service.Holds).
type Capturer interface {
	Capture(ctx context.Context, r service.CaptureRequest) (domain.Order, error)
}

type captureRequest struct {
	keyField
	// Amount is what to capture, at most what is held; absent: all of it.
	Amount *string `json:"amount"`
}

// capture is POST /v1/orders/{id}/capture, the merchant's only: 200 and
// the order, paid what was captured. Its event (order.paid) names the
// request's key as its cause.
func (h *Orders) capture(c echo.Context) error {
	var req captureRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	r := service.CaptureRequest{OrderID: c.Param("id"), RequestID: firstNonEmpty(requestKeyOf(c), c.Request().Header.Get("Idempotency-Key"), req.RequestID)}
	if req.Amount != nil {
		d, err := decimal.NewFromString(*req.Amount)
		if err != nil {
			return &domain.ValidationError{Field: "amount", Reason: "must be a decimal string such as \"12.30\""}
		}
		r.Amount = &d
	}
	if h.Holds == nil {
		return domain.ErrOrderNotCapturable
	}
	o, err := h.Holds.Capture(c.Request().Context(), r)
	if err != nil {
		return err
	}
	auditInputs(c, map[string]any{"amount": domain.FormatAmount(o.CapturedAmount, o.Currency)})
	idempotency.Seal(c) // the answer carries the order's client secret
	return writeJSON(c, http.StatusOK, h.withSecret(toOrderJSON(o), true))
}
