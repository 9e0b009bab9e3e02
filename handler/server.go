package handler

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/telemetry"
	"github.com/payd/payd/web"
)

// Deps are what the HTTP API serves: the use cases and a few settings.
type Deps struct {
	Log       *slog.Logger
	Customers interface {
		Registrar
		Authenticator
	}
	Orders interface {
		OrderService
		OrderWatcher
	}
	Checkout Payer
	// Webhooks serves /v1/webhooks/provider, the sandbox's events; nil in
	// Stripe mode, where the route answers 404.
	Webhooks    *Webhooks
	Admin       *Admin
	EventPoll   time.Duration // how often event streams look for changes by other processes
	EventsLive  func() bool   // optional: true while other processes' changes arrive by notification (Redis), so the poll rests
	Idempotency *idempotency.Engine
	AdminToken  string
	Ready       func(ctx context.Context) error // database reachable, migrations applied
	Metrics     *telemetry.Metrics              // nil: a fresh registry (request latency only)
	// MetricsElsewhere leaves /metrics off this server: it has its own
	// listener (PAYD_METRICS_ADDR), and the public one answers 404.
	MetricsElsewhere bool
	MaxStreams       int // open event streams per customer; 0: no cap

	// Operators are named admin tokens (PAYD_ADMIN_TOKENS) beside
	// AdminToken; the audit's actor is the operator's name.
	Operators []Operator

	// The provider. CheckoutPage tells the checkout page which
	// provider it pays with; StripeWebhooks, set when PAYD_PROVIDER=stripe,
	// serves /v1/webhooks/stripe.
	CheckoutPage   web.Config
	StripeWebhooks *StripeWebhooks

	// RateLimits are the request rate limits (ADR 0037); the zero value
	// limits nothing.
	RateLimits RateLimits

	// The merchant (ADR 0058): its keys, PAYD_MERCHANT_KEY (actor
	// merchant:default) and the named PAYD_MERCHANT_KEYS, and the
	// catalogue it writes.
	MerchantKey string
	Merchants   []Merchant
	Products    *Products
	// Shipments ships the merchant's paid orders, Holds captures their
	// held money (ADR 0060).
	Shipments *Shipments
	Holds     Capturer
	// Audit is the trail the merchant's order creations and cancels are
	// recorded on (nil: they are not).
	Audit Auditor
	// ClientSecrets derives and checks orders' client secrets (ADR 0059);
	// nil: orders have none.
	ClientSecrets ClientSecrets
}

// New builds the Echo server with every route, middleware and the error handler.
func New(d Deps) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	d.Log = slog.New(telemetry.TraceLogs(d.Log.Handler()))
	if d.Metrics == nil {
		d.Metrics = telemetry.NewMetrics()
	}
	e.HTTPErrorHandler = ErrorHandler(d.Log)
	e.IPExtractor = ipExtractor(d.RateLimits.TrustedProxies)
	e.Use(requestID(), d.Metrics.Middleware(e), accessLog(d.Log), recoverPanic)
	routes(e, d)
	d.Metrics.ExportRoutes(e.Routes())
	return e
}

// routes lists every route payd serves, in one place. Every route but the
// probes and /metrics is rate limited, before its idempotency middleware
// (ADR 0037): a probe must answer however loaded payd is.
func routes(e *echo.Echo, d Deps) {
	idem := &idempotency.Middleware{Engine: d.Idempotency, Log: d.Log, Scope: scopeOf, Body: requestBody, RetryAfter: storedRetryAfter}
	ops := newOperators(d.AdminToken, d.Operators)
	known := callers{admins: ops, merchants: newMerchants(d.MerchantKey, d.Merchants), customers: d.Customers, secrets: d.ClientSecrets}
	limits := newLimiters(d.RateLimits, d.Metrics)
	public := limits.public()
	customers := &Customers{Service: d.Customers}
	orders := &Orders{Service: d.Orders, Checkout: d.Checkout, Holds: d.Holds, Secrets: d.ClientSecrets, Audit: d.Audit, Log: d.Log}
	// The routes on orders (ADR 0059): a customer token everywhere; the
	// merchant key to create, list, read and cancel; an order's client
	// secret on that order's own routes.
	buyerOrMerchant := limits.buyers(requireBuyer(known, access{merchant: true}))
	anyOfOrder := limits.buyers(requireBuyer(known, access{merchant: true, secret: true}))
	buyerOfOrder := limits.buyers(requireBuyer(known, access{secret: true}))
	requests := &Requests{Records: d.Idempotency}
	events := &Events{Orders: d.Orders, Poll: d.EventPoll, Live: d.EventsLive, MaxPerCustomer: d.MaxStreams}

	// The probes, the pages, this document and the problem types answer
	// HEAD as well as GET: the same status and headers, no body.
	getHead := []string{http.MethodGet, http.MethodHead}
	e.Match(getHead, "/healthz", healthz)
	e.Match(getHead, "/readyz", readyz(d.Ready))
	checkout := page(web.HandlerFor(d.CheckoutPage)) // the checkout page and its assets
	e.Match(getHead, web.Prefix, checkout, public)
	e.Match(getHead, web.Prefix+"/*", checkout, public)
	console := page(web.Console()) // the operators' console; it calls /v1/admin/... with a token typed into it
	e.Match(getHead, web.ConsolePrefix, console, public)
	e.Match(getHead, web.ConsolePrefix+"/*", console, public)
	if !d.MetricsElsewhere {
		e.GET("/metrics", echo.WrapHandler(d.Metrics.Scrape()))
	}
	landing := echo.WrapHandler(web.Landing(landingProblems())) // links the pages, this document and the problem types
	e.Match(getHead, "/", landing, public)
	e.Match(getHead, "/openapi.yaml", openAPI, public)
	e.Match(getHead, "/problems/:code", problemDoc, public) // what a problem's type URI names

	v1 := e.Group("/v1")
	v1.POST("/customers", customers.register, public, idem.Wrap(idempotency.KeySealed))
	v1.POST("/orders", orders.create, buyerOrMerchant, orders.audited("create_order"), idem.Wrap(idempotency.KeyOptional))
	v1.GET("/orders", orders.list, buyerOrMerchant)
	v1.GET("/orders/:id", orders.get, anyOfOrder, validIDs(orderID))
	v1.POST("/orders/:id/pay", orders.pay, buyerOfOrder, validIDs(orderID), idem.Wrap(idempotency.KeyRequired))
	v1.POST("/orders/:id/cancel", orders.cancel, anyOfOrder, validIDs(orderID), orders.audited("cancel_order"), idem.Wrap(idempotency.KeyRequired))
	v1.GET("/orders/:id/events", events.stream, anyOfOrder, validIDs(orderID))
	ship := d.Shipments
	if ship == nil {
		ship = &Shipments{}
	}
	if ship.Log == nil {
		ship.Log = d.Log
	}
	// Shipments (ADR 0060): the merchant's only.
	v1.POST("/orders/:id/shipments", ship.ship, limits.merchants(requireMerchant(known)), ship.audited("ship_order"), validIDs(orderID), idem.Wrap(idempotency.KeyRequired))
	// Holds (ADR 0060): the merchant captures an authorized order.
	v1.POST("/orders/:id/capture", orders.capture, limits.merchants(requireMerchant(known)), orders.audited("capture_order"), validIDs(orderID), idem.Wrap(idempotency.KeyRequired))
	v1.GET("/requests/:key", requests.get, anyOfOrder)
	// One webhook endpoint per provider mode: each answers 404 when its
	// receiver is nil. Both have a limit of their own, per source: a
	// provider's retry storm must not spend a customer's quota.
	v1.POST("/webhooks/provider", d.Webhooks.receive, limits.webhooks())     // 404 when PAYD_PROVIDER=stripe
	v1.POST("/webhooks/stripe", d.StripeWebhooks.receive, limits.webhooks()) // 404 unless PAYD_PROVIDER=stripe

	// The catalogue (ADR 0058): the merchant writes it, anyone reads its
	// active products.
	p := d.Products
	if p == nil {
		p = &Products{}
	}
	if p.Log == nil {
		p.Log = d.Log
	}
	{
		merchant := limits.merchants(requireMerchant(known))
		v1.POST("/products", p.create, merchant, p.audited("create_product"), idem.Wrap(idempotency.KeyRequired))
		v1.GET("/products", p.list, public)
		v1.GET("/products/:sku", p.get, public, validSKU)
		v1.PATCH("/products/:sku", p.update, merchant, p.audited("update_product"), validSKU, idem.Wrap(idempotency.KeyRequired))
		v1.POST("/products/:sku/stock", p.stock, merchant, p.audited("adjust_stock"), validSKU, idem.Wrap(idempotency.KeyRequired))
	}

	admin, a := limits.operators(requireOperator(ops, d.Customers, known.merchants)), d.Admin
	if a != nil && a.Log == nil {
		a.Log = d.Log
	}
	v1.GET("/admin/orders", a.search, admin)
	v1.GET("/admin/orders/:id", a.order, admin, validIDs(orderID))
	v1.POST("/admin/orders/:id/refund", a.refund, admin, a.audited("refund"), validIDs(orderID), idem.Wrap(idempotency.KeyRequired))
	v1.POST("/admin/reconciliations", a.reconcile, admin, idempotency.AcceptMultipart, a.audited("reconcile"), idem.Wrap(idempotency.KeyRequired))
	v1.GET("/admin/reconciliations", a.runs, admin)
	v1.GET("/admin/reconciliations/:id", a.run, admin, validIDs(runID))
	v1.GET("/admin/whoami", a.whoami, admin)
	v1.GET("/admin/discrepancies", a.discrepancies, admin)
	v1.GET("/admin/discrepancies/:did", a.discrepancy, admin, validIDs(discrepancyID))
	v1.POST("/admin/discrepancies/:did/resolve", a.resolveDirect, admin, a.audited("resolve_discrepancy"), validIDs(discrepancyID), idem.Wrap(idempotency.KeyRequired))
	v1.GET("/admin/customers", a.customers, admin)
	v1.GET("/admin/disputes", a.disputes, admin)
	v1.GET("/admin/products", p.all, admin) // the catalogue, inactive products too
	v1.GET("/admin/stats", a.stats, admin)
	v1.POST("/admin/reconciliations/:id/discrepancies/:did/resolve", a.resolve, admin, a.audited("resolve_discrepancy"), validIDs(runID, discrepancyID), idem.Wrap(idempotency.KeyRequired))
	v1.GET("/admin/idempotency/:scope/:key", a.idempotency, admin, validRecordPath)
	// The merchant's endpoints (ADR 0053). A secret is answered once: the
	// stored answers that carry one are sealed.
	v1.POST("/admin/endpoints", a.createEndpoint, admin, a.audited("create_endpoint"), idem.Wrap(idempotency.KeySealed))
	v1.GET("/admin/endpoints", a.endpoints, admin)
	v1.PATCH("/admin/endpoints/:id", a.updateEndpoint, admin, a.audited("update_endpoint"), validIDs(endpointID), idem.Wrap(idempotency.KeyRequired))
	v1.DELETE("/admin/endpoints/:id", a.deleteEndpoint, admin, a.audited("delete_endpoint"), validIDs(endpointID), idem.Wrap(idempotency.KeyRequired))
	v1.POST("/admin/endpoints/:id/rotate-secret", a.rotateSecret, admin, a.audited("rotate_endpoint_secret"), validIDs(endpointID), idem.Wrap(idempotency.KeySealed))
	v1.GET("/admin/endpoints/:id/deliveries", a.deliveries, admin, validIDs(endpointID))
	v1.POST("/admin/events/:id/redeliver", a.redeliver, admin, a.audited("redeliver_event"), validIDs(notifyEventID), idem.Wrap(idempotency.KeyRequired))
}

// page serves one of the pages; a path that is neither the page nor one
// of its files answers the not_found problem, as any unknown path does.
func page(s *web.Site) echo.HandlerFunc {
	serve := echo.WrapHandler(s)
	return func(c echo.Context) error {
		if !s.Serves(c.Request().URL.Path) {
			return errRouteNotFound
		}
		return serve(c)
	}
}

// landingProblems is the problem catalogue as the landing page lists it,
// by code.
func landingProblems() []web.Problem {
	out := make([]web.Problem, 0, len(problemTypes))
	for _, code := range problemCodes() {
		pt := problemTypes[code]
		out = append(out, web.Problem{Code: code, Status: pt.Status, Title: pt.Title})
	}
	return out
}

func healthz(c echo.Context) error {
	return writeJSON(c, http.StatusOK, map[string]string{"status": "ok"})
}

func readyz(ready func(context.Context) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
		defer cancel()
		if ready != nil {
			if err := ready(ctx); err != nil {
				return problem("not_ready", err.Error())
			}
		}
		return writeJSON(c, http.StatusOK, map[string]string{"status": "ready"})
	}
}

// accessLog writes one structured line per request with the tracing ID.
// It logs the route pattern, never headers or bodies: those carry tokens.
func accessLog(log *slog.Logger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil {
				c.Error(err)
			}
			ctx := c.Request().Context()
			if !log.Enabled(ctx, slog.LevelInfo) {
				return nil // nothing to build when the line would be dropped
			}
			h := c.Response().Header()
			log.LogAttrs(ctx, slog.LevelInfo, "request",
				slog.String("request_id", h.Get(echo.HeaderXRequestID)),
				slog.String("method", c.Request().Method), slog.String("route", c.Path()), slog.Int("status", c.Response().Status),
				slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
				slog.Bool("replayed", h.Get("Idempotent-Replayed") == "true"))
			return nil
		}
	}
}

// recoverPanic turns a panic in a handler into a 500, logged once by the error handler.
func recoverPanic(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return next(c)
	}
}
