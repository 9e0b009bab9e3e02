package handler

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// Shipper ships paid orders (service.Shipments).
type Shipper interface {
	Ship(ctx context.Context, req service.Keyed, id string, n domain.NewShipment) (domain.Order, domain.Shipment, error)
}

// Shipments serves POST /v1/orders/{id}/shipments, the merchant's only
// (ADR 0060).
type Shipments struct {
	Service Shipper
	Audit   Auditor
	Log     *slog.Logger
}

// shipmentJSON is a shipment as the API shows it.
type shipmentJSON struct {
	ID             string         `json:"id"`
	OrderID        string         `json:"order_id"`
	Items          []shipLineJSON `json:"items"`
	Carrier        *string        `json:"carrier"`
	TrackingNumber *string        `json:"tracking_number"`
	CreatedAt      string         `json:"created_at"`
}

type shipLineJSON struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
}

func toShipmentJSON(sh domain.Shipment) shipmentJSON {
	lines := make([]shipLineJSON, len(sh.Items))
	for i, l := range sh.Items {
		lines[i] = shipLineJSON{SKU: l.SKU, Quantity: l.Quantity}
	}
	return shipmentJSON{ID: sh.ID, OrderID: sh.OrderID, Items: lines, Carrier: strPtr(sh.Carrier),
		TrackingNumber: strPtr(sh.TrackingNumber), CreatedAt: stamp(sh.CreatedAt)}
}

// toShipmentsJSON renders an order's shipments: always a list.
func toShipmentsJSON(list []domain.Shipment) *[]shipmentJSON {
	out := make([]shipmentJSON, len(list))
	for i, sh := range list {
		out[i] = toShipmentJSON(sh)
	}
	return &out
}

type shipRequest struct {
	keyField
	Items          []shipLineJSON `json:"items"`
	Carrier        string         `json:"carrier"`
	TrackingNumber string         `json:"tracking_number"`
}

// ship is POST /v1/orders/{id}/shipments: 201 and the shipment. Its
// event names the request's key as its cause.
func (h *Shipments) ship(c echo.Context) error {
	var req shipRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	n := domain.NewShipment{Carrier: req.Carrier, TrackingNumber: req.TrackingNumber, Items: make([]domain.ShipLine, len(req.Items))}
	for i, l := range req.Items {
		n.Items[i] = domain.ShipLine{SKU: l.SKU, Quantity: l.Quantity}
	}
	ctx := c.Request().Context()
	if key := firstNonEmpty(requestKeyOf(c), c.Request().Header.Get("Idempotency-Key"), req.RequestID); key != "" {
		ctx = service.WithCause(ctx, domain.Cause{Kind: domain.CauseMerchant, Ref: key})
	}
	_, sh, err := h.Service.Ship(ctx, keyedOf(c), c.Param("id"), n)
	if err != nil {
		return err
	}
	auditInputs(c, map[string]any{"lines": len(sh.Items), "carrier": sh.Carrier})
	c.Response().Header().Set(echo.HeaderLocation, "/v1/orders/"+sh.OrderID)
	return writeJSON(c, http.StatusCreated, toShipmentJSON(sh))
}

// audited records each call on the trail as merchant:NAME, naming the
// order.
func (h *Shipments) audited(action string) echo.MiddlewareFunc {
	return merchantAudited(h.Audit, h.log, action, func(c echo.Context, e *domain.AuditEntry) {
		if id := c.Param("id"); domain.ValidID(id) {
			e.OrderID, e.Target = id, "order:"+id
		}
	})
}

func (h *Shipments) log() *slog.Logger {
	if h.Log == nil {
		return slog.Default()
	}
	return h.Log
}
