package handler

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/service"
)

// OrderService is what the order routes need.
type OrderService interface {
	Create(ctx context.Context, req service.Keyed, n service.NewOrder) (domain.Order, error)
	GetWithAttempts(ctx context.Context, customerID, id string) (domain.Order, []domain.Attempt, error)
	List(ctx context.Context, f domain.OrderFilter) (domain.OrderPage, error)
	Cancel(ctx context.Context, customerID, id string) (domain.Order, error)
}

// Payer pays orders.
type Payer interface {
	Pay(ctx context.Context, r service.PayRequest) (domain.Order, error)
}

// Orders serves orders and their payments to their customers, to the
// holders of their client secrets and to the merchant (ADR 0059).
type Orders struct {
	Service  OrderService
	Checkout Payer
	Holds    Capturer      // nil: captures are refused (nothing is ever held)
	Secrets  ClientSecrets // nil: answers carry no client secret
	Audit    Auditor       // the merchant's creations and cancels are recorded (nil: not)
	Log      *slog.Logger
}

// audited records the merchant's calls of an order route as merchant:NAME
// (a buyer's are not: they are the customer's own), naming the order: the
// path's, or the one a creation made (its Location, replayed too).
func (h *Orders) audited(action string) echo.MiddlewareFunc {
	return merchantAudited(h.Audit, h.log, action, func(c echo.Context, e *domain.AuditEntry) {
		id := firstNonEmpty(c.Param("id"), strings.TrimPrefix(c.Response().Header().Get(echo.HeaderLocation), "/v1/orders/"))
		if domain.ValidID(id) {
			e.OrderID, e.Target = id, "order:"+id
		}
	})
}

func (h *Orders) log() *slog.Logger {
	if h.Log == nil {
		return slog.Default()
	}
	return h.Log
}

type createOrderRequest struct {
	keyField
	CustomerID    *string       `json:"customer_id"`
	Currency      string        `json:"currency"`
	Items         []itemRequest `json:"items"`
	CaptureMethod *string       `json:"capture_method"`
}

// itemRequest is one line of an order's creation: a catalogue SKU and a
// quantity, or (the merchant's only) a custom line with its name and
// price. A buyer's name is not read: a line takes its product's.
type itemRequest struct {
	SKU       string  `json:"sku"`
	Name      string  `json:"name"`
	Quantity  int64   `json:"quantity"`
	UnitPrice *string `json:"unit_price"`
}

// newOrder is what req asks for, created by the merchant or by the
// buyer customerID. A buyer may not name a customer or a capture method
// (nor a price: the service refuses it, with the line's other faults).
func (req createOrderRequest) newOrder(merchant bool, customerID string) (service.NewOrder, error) {
	n := service.NewOrder{Merchant: merchant, CustomerID: customerID, Currency: req.Currency, Items: make([]service.NewItem, len(req.Items))}
	for i, it := range req.Items {
		n.Items[i] = service.NewItem{SKU: it.SKU, Name: it.Name, Quantity: it.Quantity, UnitPrice: it.UnitPrice}
	}
	var invalid domain.ValidationErrors
	if req.CustomerID != nil {
		if !merchant {
			invalid = append(invalid, errBuyerField("customer_id"))
		} else if n.CustomerID = *req.CustomerID; !domain.ValidID(n.CustomerID) {
			invalid = append(invalid, &domain.ValidationError{Field: "customer_id", Reason: "no customer has this ID"})
		}
	}
	if req.CaptureMethod != nil {
		if !merchant {
			invalid = append(invalid, errBuyerField("capture_method"))
		}
		n.CaptureMethod = *req.CaptureMethod
	}
	return n, invalid.Err()
}

// otherPriceNames are the other names a client may give a line's price.
var otherPriceNames = []string{"amount", "price", "unit_amount"}

// reasonBuyerPrice is why a buyer's price is refused.
const reasonBuyerPrice = "a buyer may not set a price: name a SKU and a quantity, and payd prices the line from the catalogue"

// buyerPrices turns a buyer's line price under another name
// (items[i].amount, .price, .unit_amount), which decoding refuses as an
// unknown field, into what it is: a buyer naming a price, refused as
// items[i].unit_price like a price under its own name. The merchant's
// stays an unknown field: its price is unit_price.
func buyerPrices(err error) error {
	var invalid domain.ValidationErrors
	if err := invalid.Add(err); err != nil {
		return err
	}
	out := make(domain.ValidationErrors, 0, len(invalid))
	seen := map[string]bool{}
	for _, e := range invalid {
		if line, name, ok := strings.Cut(e.Field, "]."); ok && strings.HasPrefix(line, "items[") && e.Reason == "unknown field" &&
			slices.Contains(otherPriceNames, strings.ToLower(name)) {
			e = &domain.ValidationError{Field: line + "].unit_price", Reason: reasonBuyerPrice}
		}
		if !seen[e.Field] {
			seen[e.Field] = true
			out = append(out, e)
		}
	}
	return out.Err()
}

// create is POST /v1/orders, by a buyer (its customer token) or by the
// merchant (its key). The answer carries the order's client secret.
func (h *Orders) create(c echo.Context) error {
	var req createOrderRequest
	merchant := merchantOf(c) != ""
	if err := decode(c, &req); err != nil {
		if !merchant {
			return buyerPrices(err)
		}
		return err
	}
	customerID := ""
	if !merchant {
		customerID = customerOf(c).ID
	}
	n, err := req.newOrder(merchant, customerID)
	if err != nil {
		return err
	}
	o, err := h.Service.Create(c.Request().Context(), keyedOf(c), n)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/orders/"+o.ID)
	return writeJSON(c, http.StatusCreated, h.withSecret(toOrderJSON(o), true))
}

// withSecret adds the order's client secret to an answer that carries it:
// the creation's, and every answer to the merchant.
func (h *Orders) withSecret(o orderJSON, carry bool) orderJSON {
	if carry && h.Secrets != nil {
		o.ClientSecret = h.Secrets.ClientSecret(o.ID)
	}
	return o
}

func (h *Orders) get(c echo.Context) error {
	o, attempts, err := h.Service.GetWithAttempts(c.Request().Context(), actingFor(c), c.Param("id"))
	if err != nil {
		return err
	}
	j := toOrderWithAttempts(o, attempts)
	j.orderJSON = h.withSecret(j.orderJSON, merchantOf(c) != "")
	j.Shipments = toShipmentsJSON(o.Shipments)
	return writeJSON(c, http.StatusOK, j)
}

func (h *Orders) list(c echo.Context) error {
	var invalid domain.ValidationErrors
	f := orderFilter(c, &invalid)
	if err := invalid.Err(); err != nil {
		return err
	}
	merchant := merchantOf(c) != ""
	if !merchant {
		f.CustomerID = customerOf(c).ID // the merchant lists every order
	}
	page, err := h.Service.List(c.Request().Context(), f)
	if err != nil {
		return err
	}
	out := toPageJSON(page)
	for i := range out.Data {
		out.Data[i] = h.withSecret(out.Data[i], merchant)
	}
	return writeJSON(c, http.StatusOK, out)
}

// orderFilter reads status, limit and cursor from the query string,
// collecting every invalid parameter into invalid.
func orderFilter(c echo.Context, invalid *domain.ValidationErrors) domain.OrderFilter {
	f := domain.OrderFilter{Status: domain.OrderStatus(c.QueryParam("status")), Cursor: c.QueryParam("cursor"), Limit: 20}
	if s := c.QueryParam("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > domain.MaxPageSize {
			*invalid = append(*invalid, &domain.ValidationError{Field: "limit", Reason: "must be a whole number from 1 to 100"})
		} else {
			f.Limit = n
		}
	}
	if f.Status != "" && !f.Status.Valid() {
		*invalid = append(*invalid, &domain.ValidationError{Field: "status", Reason: domain.StatusReason(f.Status)})
	}
	return f
}

func toPageJSON(p domain.OrderPage) pageJSON {
	out := pageJSON{Data: make([]orderJSON, len(p.Orders)), NextCursor: strPtr(p.NextCursor)}
	for i, o := range p.Orders {
		out.Data[i] = toOrderJSON(o)
	}
	return out
}

type payRequest struct {
	keyField
	PaymentMethod string `json:"payment_method"`
}

// pay answers 200 with the order paid, or 202 with the order still
// processing when the provider's outcome is not known yet.
func (h *Orders) pay(c echo.Context) error {
	var req payRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	// A payment is detached from the client's connection: a customer
	// closing the tab must not cut a charge in half. The bound keeps a stuck
	// provider from holding the request forever.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), payTimeout)
	defer cancel()
	o, err := h.Checkout.Pay(ctx, service.PayRequest{
		CustomerID: actingFor(c), OrderID: c.Param("id"), RequestID: requestKeyOf(c), PaymentMethod: req.PaymentMethod,
	})
	if err == nil {
		err = unpaid(o)
	}
	if err != nil {
		// The error handler renders it as RenderPay would, for this
		// occurrence (instance, request_id), and logs it if unexpected.
		return err
	}
	r := RenderPay(o, nil)
	if r.Status == http.StatusAccepted {
		c.Response().Header().Set("Retry-After", "2")
	}
	return writeRaw(c, r.Status, r.Body)
}

// payTimeout bounds one pay execution, provider call included.
const payTimeout = 25 * time.Second

// RenderPay renders what a pay request answers for an outcome. PayRecords
// uses the same function to complete an idempotency record when the
// outcome arrives later (webhook, recoverer), so a replay says the same.
// Only an order the payment paid (or authorized: its money held, a
// manual-capture order) is a 200 (refunded since included); one
// still processing is a 202; an order the payment left unpaid is a problem,
// never a 200 a client would take for success.
func RenderPay(o domain.Order, err error) idempotency.Response {
	if err == nil {
		err = unpaid(o)
	}
	if err != nil {
		p, _ := toProblem(err)
		b, _ := json.Marshal(p)
		return idempotency.Response{Status: p.Status, Body: b}
	}
	status := http.StatusOK
	if o.Status == domain.StatusProcessing {
		status = http.StatusAccepted
	}
	b, _ := json.Marshal(toOrderJSON(o))
	return idempotency.Response{Status: status, Body: b}
}

// errNotCompleted is a pay request that ended with its order unpaid and
// payable again: whatever the provider charged for it goes back.
var errNotCompleted = problem("payment_not_completed",
	"The payment did not complete and the order is not paid; anything charged for it is refunded. You may try again.")

// unpaid is the error a pay outcome without one stands for, when the order
// is neither paid nor processing.
func unpaid(o domain.Order) error {
	switch o.Status {
	case domain.StatusPaid, domain.StatusRefunded, domain.StatusProcessing, domain.StatusAuthorized:
		return nil // an authorized order's pay succeeded: its money is held
	case domain.StatusPending:
		return errNotCompleted
	}
	return o.PayOutcome("") // cancelled or expired
}

// cancel is POST /v1/orders/{id}/cancel. Its event names the request's
// key as its cause (the customer's ID when it has none).
func (h *Orders) cancel(c echo.Context) error {
	var body keyField
	if err := decode(c, &body); err != nil {
		return err
	}
	ctx := c.Request().Context()
	if key := firstNonEmpty(requestKeyOf(c), c.Request().Header.Get("Idempotency-Key"), body.RequestID); key != "" {
		kind := domain.CauseCustomer
		if merchantOf(c) != "" {
			kind = domain.CauseMerchant
		}
		ctx = service.WithCause(ctx, domain.Cause{Kind: kind, Ref: key})
	}
	o, err := h.Service.Cancel(ctx, actingFor(c), c.Param("id"))
	if err != nil {
		return err
	}
	merchant := merchantOf(c) != ""
	if merchant {
		idempotency.Seal(c) // the answer carries the order's client secret
	}
	return writeJSON(c, http.StatusOK, h.withSecret(toOrderJSON(o), merchant))
}
