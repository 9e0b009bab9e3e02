package handler

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
)

// Catalogue is what the product routes need (service.Catalogue).
type Catalogue interface {
	Create(ctx context.Context, n domain.NewProduct) (domain.Product, error)
	Update(ctx context.Context, sku string, ch domain.ProductChange) (domain.Product, error)
	AdjustStock(ctx context.Context, sku string, adjust int64) (domain.Product, error)
	Shown(ctx context.Context, sku string) (domain.Product, error)
	List(ctx context.Context, after string, limit int) ([]domain.Product, error)
	ListAll(ctx context.Context, after string, limit int) ([]domain.Product, error)
}

// Auditor appends to the audit trail (service.Admin).
type Auditor interface {
	Record(ctx context.Context, e domain.AuditEntry) error
}

// Products serves the catalogue: the merchant writes it with a merchant
// key, anyone reads its active products
// (docs/adr/0058-the-merchant-key-and-the-catalogue.md).
type Products struct {
	Service Catalogue
	Audit   Auditor
	Log     *slog.Logger
}

// productJSON is a product as the API shows it. stock null is unlimited.
type productJSON struct {
	SKU       string `json:"sku"`
	Name      string `json:"name"`
	UnitPrice string `json:"unit_price"`
	Currency  string `json:"currency"`
	Stock     *int64 `json:"stock"`
	Active    bool   `json:"active"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

func toProductJSON(p domain.Product) productJSON {
	return productJSON{SKU: p.SKU, Name: p.Name, UnitPrice: domain.FormatAmount(p.UnitPrice, p.Currency),
		Currency: string(p.Currency), Stock: p.Stock, Active: p.Active, CreatedAt: stamp(p.CreatedAt), UpdatedAt: stamp(p.UpdatedAt)}
}

type productListJSON struct {
	Data       []productJSON `json:"data"`
	NextCursor *string       `json:"next_cursor"`
}

type createProductRequest struct {
	keyField
	SKU       string `json:"sku"`
	Name      string `json:"name"`
	UnitPrice string `json:"unit_price"`
	Currency  string `json:"currency"`
	Stock     *int64 `json:"stock"`
}

type updateProductRequest struct {
	keyField
	Name      *string `json:"name"`
	UnitPrice *string `json:"unit_price"`
	Active    *bool   `json:"active"`
}

type stockRequest struct {
	keyField
	Adjust *int64 `json:"adjust"`
}

// validSKU refuses, before any work, a path whose SKU no product could
// have: 404 product_not_found, as an unknown one.
func validSKU(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !domain.ValidSKU(c.Param("sku")) {
			return domain.ErrProductNotFound
		}
		return next(c)
	}
}

// create is POST /v1/products.
func (h *Products) create(c echo.Context) error {
	var req createProductRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	p, err := h.Service.Create(c.Request().Context(), domain.NewProduct{SKU: req.SKU, Name: req.Name, UnitPrice: req.UnitPrice,
		Currency: req.Currency, Stock: req.Stock})
	if err != nil {
		return err
	}
	// The inputs, once known valid (a refused body may be anything).
	auditInputs(c, map[string]any{"name": p.Name, "unit_price": toProductJSON(p).UnitPrice, "currency": p.Currency, "stock": p.Stock})
	c.Response().Header().Set(echo.HeaderLocation, "/v1/products/"+p.SKU)
	return writeJSON(c, http.StatusCreated, toProductJSON(p))
}

// update is PATCH /v1/products/{sku}: what the body names changes, the
// rest stays.
func (h *Products) update(c echo.Context) error {
	var req updateProductRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	p, err := h.Service.Update(c.Request().Context(), c.Param("sku"),
		domain.ProductChange{Name: req.Name, UnitPrice: req.UnitPrice, Active: req.Active})
	if err != nil {
		return err
	}
	in := map[string]any{} // what changed, once known valid
	if req.Name != nil {
		in["name"] = p.Name
	}
	if req.UnitPrice != nil {
		in["unit_price"] = toProductJSON(p).UnitPrice
	}
	if req.Active != nil {
		in["active"] = p.Active
	}
	auditInputs(c, in)
	return writeJSON(c, http.StatusOK, toProductJSON(p))
}

// stock is POST /v1/products/{sku}/stock.
func (h *Products) stock(c echo.Context) error {
	var req stockRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.Adjust == nil {
		return &domain.ValidationError{Field: "adjust", Reason: "is required: a signed whole number"}
	}
	auditInputs(c, map[string]any{"adjust": *req.Adjust})
	p, err := h.Service.AdjustStock(c.Request().Context(), c.Param("sku"), *req.Adjust)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toProductJSON(p))
}

// get is GET /v1/products/{sku}: an active product; an inactive one is
// 404, as an unknown one.
func (h *Products) get(c echo.Context) error {
	p, err := h.Service.Shown(c.Request().Context(), c.Param("sku"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toProductJSON(p))
}

// list is GET /v1/products?limit=&cursor=: the active products by SKU, a
// page at a time; next_cursor is the SKU to continue after.
func (h *Products) list(c echo.Context) error { return productPage(c, h.Service.List) }

// all is GET /v1/admin/products?limit=&cursor=, for operators: every
// product by SKU, active or not, paged as list is.
func (h *Products) all(c echo.Context) error { return productPage(c, h.Service.ListAll) }

// productPage answers one page of the products read lists, by SKU after the
// cursor.
func productPage(c echo.Context, read func(ctx context.Context, after string, limit int) ([]domain.Product, error)) error {
	var invalid domain.ValidationErrors
	limit := 20
	if s := c.QueryParam("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > domain.MaxPageSize {
			invalid = append(invalid, &domain.ValidationError{Field: "limit", Reason: "must be a whole number from 1 to 100"})
		}
		limit = n
	}
	cursor := c.QueryParam("cursor")
	if cursor != "" && !domain.ValidSKU(cursor) {
		invalid = append(invalid, &domain.ValidationError{Field: "cursor", Reason: "must be a next_cursor of an earlier page"})
	}
	if err := invalid.Err(); err != nil {
		return err
	}
	list, err := read(c.Request().Context(), cursor, limit+1) // one more tells whether a next page exists
	if err != nil {
		return err
	}
	out := productListJSON{Data: make([]productJSON, 0, min(len(list), limit))}
	for i, p := range list {
		if i == limit {
			out.NextCursor = strPtr(list[i-1].SKU)
			break
		}
		out.Data = append(out.Data, toProductJSON(p))
	}
	return writeJSON(c, http.StatusOK, out)
}

// audited records every write of the catalogue — executed, replayed or
// refused — with the merchant key's actor (merchant:NAME), the action,
// the product and the result, as operators' actions are recorded. It
// wraps the idempotency middleware, so replays are on the trail too.
func (h *Products) audited(action string) echo.MiddlewareFunc {
	return merchantAudited(h.Audit, h.log, action, func(c echo.Context, e *domain.AuditEntry) {
		if sku := firstNonEmpty(c.Param("sku"), bodySKU(c)); domain.ValidSKU(sku) {
			e.Target = "product:" + sku
		}
	})
}

// merchantAudited records each call of the merchant's server through the
// wrapped route — executed, replayed or refused — on the audit trail as
// merchant:NAME, with its action, request key and result; about names
// what it was about. Calls by anyone else (a buyer) pass unrecorded. It
// wraps the idempotency middleware, so replays are on the trail too.
func merchantAudited(audit Auditor, log func() *slog.Logger, action string, about func(echo.Context, *domain.AuditEntry)) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if audit == nil || merchantOf(c) == "" {
				return next(c)
			}
			tap := &problemTap{ResponseWriter: c.Response().Writer}
			c.Response().Writer = tap
			if err := next(c); err != nil {
				c.Error(err)
			}
			c.Response().Writer = tap.ResponseWriter
			if code := tap.code(c.Response().Header().Get(echo.HeaderContentType)); code != "" {
				c.Set(ctxAuditCode, code)
			}
			key := firstNonEmpty(requestKeyOf(c), c.Request().Header.Get("Idempotency-Key"))
			e := domain.AuditEntry{Actor: MerchantActor(merchantOf(c)), Action: action, RequestID: key,
				Result: c.Response().Status, Detail: auditDetail(c)}
			if !domain.ValidKey(e.RequestID) {
				e.RequestID = ""
			}
			about(c, &e)
			ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), 5*time.Second)
			defer cancel()
			if err := audit.Record(ctx, e); err != nil {
				log().ErrorContext(ctx, "audit entry lost", "err", err, "action", action, "result", e.Result)
			}
			return nil
		}
	}
}

// bodySKU is the sku a creation's body names ("" if none): the trail
// names the product also when the handler did not run (a replay, a key
// reused) or refused it.
func bodySKU(c echo.Context) string {
	b, _ := c.Get(ctxBody).([]byte) // read by the idempotency layer, if it got that far
	var named struct {
		SKU string `json:"sku"`
	}
	if json.Unmarshal(b, &named) != nil {
		return ""
	}
	return named.SKU
}

func (h *Products) log() *slog.Logger {
	if h.Log == nil {
		return slog.Default()
	}
	return h.Log
}
