// Package telemetry is payd's one adapter for what it tells operators:
// Prometheus metrics (Metrics, its admin listener), log lines (TraceLogs,
// OutcomeLog) and OpenTelemetry traces (Tracing), with the provider port
// timed (ObservedProvider). It watches the use cases through
// service.Observer and idempotency.Observer; it never imports the HTTP
// layer nor the wiring, which use it.
package telemetry

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/notify"
	"github.com/payd/payd/service"
)

// Metrics is payd's Prometheus instrumentation (ADR 22). It owns its
// registry instead of using the global one, so every server a test builds
// counts only its own requests and no two servers collide on a name.
//
// Labels never carry caller-chosen text: routes are Echo's patterns
// (/v1/orders/:id), methods and event types outside a fixed set become
// "other", so a client cannot grow the series without bound.
//
// Metrics is a service.Observer (payments, webhooks, discrepancies); the
// idempotency engine and the background jobs report to it through
// Idempotency and Job.
type Metrics struct {
	service.NopObserver

	reg           *prometheus.Registry
	requests      *prometheus.HistogramVec
	idempotency   *prometheus.CounterVec
	webhooks      *prometheus.CounterVec
	payments      *prometheus.CounterVec
	discrepancies *prometheus.CounterVec
	jobs          *prometheus.CounterVec
	dbRetries     *prometheus.CounterVec
	provider      *prometheus.HistogramVec
	rejected      *prometheus.CounterVec
	rateLimited   *prometheus.CounterVec
	notify        *prometheus.CounterVec
	ordersCreated *prometheus.CounterVec
	outOfStock    prometheus.Counter
	holds         *prometheus.CounterVec
	retained      *prometheus.CounterVec
	observers     sync.Map // requestLabels → prometheus.Observer of requests
}

// NewMetrics registers payd's metrics, plus the Go runtime's and the
// process's, on a fresh registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "payd_http_request_duration_seconds",
			Help:    "Latency of HTTP requests by route pattern, method and status class.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "method", "status"}),
		idempotency: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payd_idempotency_outcomes_total",
			Help: "Idempotency-key decisions: executed, replayed, in_use, reused, took_over.",
		}, []string{"outcome"}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payd_webhook_events_total",
			Help: "Provider webhook events by type and outcome (applied, duplicate, ignored, discrepancy).",
		}, []string{"type", "outcome"}),
		payments: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payd_payments_total",
			Help: "Payment attempts by result: paid, declined, unknown, held.",
		}, []string{"result"}),
		discrepancies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payd_discrepancies_total",
			Help: "Newly recorded discrepancies by type (reconciliation, webhooks, automatic refunds).",
		}, []string{"type"}),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payd_job_rows_total",
			Help: "Rows handled by background jobs (purged records, expired orders, recovered payments).",
		}, []string{"job"}),
		dbRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payd_db_retries_total",
			Help: "Database transactions and statements run again after a conflict: deadlock (incl. Galera certification), lock_wait_timeout, sqlite_busy.",
		}, []string{"reason"}),
		provider: newProviderHistogram(), rejected: newWebhookRejections(),
		rateLimited: newRateLimited(),
		notify: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payd_notify_deliveries_total",
			Help: "Requests sent to merchant endpoints by outcome: delivered (2xx), retry, failed (given up), gone (410: endpoint disabled).",
		}, []string{"outcome"}),
		ordersCreated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payd_orders_created_total",
			Help: "Orders created, by creator: customer (a buyer's token, priced from the catalogue) or merchant (the merchant's server).",
		}, []string{"creator"}),
		outOfStock: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payd_out_of_stock_total",
			Help: "Order creations refused because a line was beyond its product's stock (409 out_of_stock).",
		}),
		holds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payd_hold_actions_total",
			Help: "Captures, voids (a cancel's) and lapses of held orders by result: succeeded (the provider did it), refused (nothing happened to the hold), unknown (no answer: asked again under the same key).",
		}, []string{"kind", "result"}),
		retained: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payd_retention_deleted_rows_total",
			Help: "Rows deleted by retention (PAYD_RETENTION), by table: applied provider webhooks, finished deliveries to the shop, their attempt logs, and events no delivery refers to.",
		}, []string{"table"}),
	}
	m.startAtZero()
	m.reg.MustRegister(m.requests, m.idempotency, m.webhooks, m.payments, m.discrepancies, m.jobs, m.dbRetries,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(m.provider, m.rejected, buildInfo()) // provider.go, backlog.go (ADR 0022)
	m.reg.MustRegister(m.rateLimited)                       // ratelimit.go (ADR 0037)
	m.reg.MustRegister(m.notify)                            // ADR 0053
	m.reg.MustRegister(m.ordersCreated, m.outOfStock)       // ADR 0059
	m.reg.MustRegister(m.retained)                          // ADR 0062
	m.reg.MustRegister(m.holds)                             // ADR 0060
	return m
}

// startAtZero exports every series of a closed label set at 0 from the
// start, so the first event after a restart is an increase() too: an alert
// on increase() or rate() misses nothing while a series is still absent
// (the PaydDisputeOpened alert counts new disputes as the disputed
// series' increase). The sets are the enums' own lists, never retyped.
func (m *Metrics) startAtZero() {
	for _, c := range []string{creatorCustomer, creatorMerchant} {
		m.ordersCreated.WithLabelValues(c)
	}
	for _, t := range service.RetainedTables {
		m.retained.WithLabelValues(t)
	}
	for _, o := range idempotency.KeyOutcomes {
		m.idempotency.WithLabelValues(string(o))
	}
	for _, t := range slices.Concat(domain.ProviderEventTypes, []domain.ProviderEventType{"other"}) {
		for _, o := range domain.WebhookOutcomes {
			m.webhooks.WithLabelValues(string(t), string(o))
		}
	}
	for _, r := range service.PaymentOutcomes {
		m.payments.WithLabelValues(string(r))
	}
	for _, t := range domain.DiscrepancyTypes {
		m.discrepancies.WithLabelValues(string(t))
	}
	for _, j := range service.JobNames {
		m.jobs.WithLabelValues(string(j))
	}
	for _, r := range domain.RetryReasons {
		m.dbRetries.WithLabelValues(string(r))
	}
	for _, op := range ProviderOperations {
		for _, o := range ProviderOutcomes {
			if o != ProviderDeclined || op == "charge" || op == "capture" || op == "void" { // declined: a charge, or a hold action refused
				m.provider.WithLabelValues(op, string(o))
			}
		}
	}
	for _, r := range WebhookRejections {
		m.rejected.WithLabelValues(string(r))
	}
	for _, o := range notify.Outcomes {
		m.notify.WithLabelValues(string(o))
	}
	for _, k := range domain.HoldActionKinds {
		for _, r := range service.HoldResults {
			m.holds.WithLabelValues(string(k), string(r))
		}
	}
}

// Delivered counts one request sent to a merchant endpoint, by outcome
// (notify.Observer).
func (m *Metrics) Delivered(o notify.Outcome) { m.notify.WithLabelValues(string(o)).Inc() }

// ExportRoutes starts each route's 5xx latency series at 0, so the
// Payd5xxRatio alert sees the first server errors after a restart. Only
// the 5xx class: one histogram per route, not one per route and status
// class. handler.New calls it once its routes are registered.
func (m *Metrics) ExportRoutes(routes []*echo.Route) {
	for _, r := range routes {
		if method := methodLabel(r.Method); method != "other" {
			m.observer(r.Path, method, "5xx")
		}
	}
}

// DBRetried counts one retry of a database transaction or statement, by
// reason (repository.DB.OnRetry). The reasons are a fixed set.
func (m *Metrics) DBRetried(reason domain.RetryReason) {
	m.dbRetries.WithLabelValues(string(reason)).Inc()
}

// Register adds collectors to payd's registry, e.g. the database pools'
// statistics (collectors.NewDBStatsCollector).
func (m *Metrics) Register(cs ...prometheus.Collector) { m.reg.MustRegister(cs...) }

// KeyDecided counts one decision of the idempotency engine
// (idempotency.Observer).
func (m *Metrics) KeyDecided(outcome idempotency.KeyOutcome) {
	m.idempotency.WithLabelValues(string(outcome)).Inc()
}

// WebhookApplied counts one handled provider event. The type is the
// provider's, so types payd does not know are counted as other.
func (m *Metrics) WebhookApplied(eventType string, outcome service.WebhookOutcome) {
	if !domain.ProviderEventType(eventType).Known() {
		eventType = "other"
	}
	m.webhooks.WithLabelValues(eventType, string(outcome)).Inc()
}

// PaymentResult counts one payment result.
func (m *Metrics) PaymentResult(_ context.Context, _ domain.Attempt, result service.PaymentOutcome) {
	m.payments.WithLabelValues(string(result)).Inc()
}

// DiscrepancyRecorded counts one newly recorded discrepancy.
func (m *Metrics) DiscrepancyRecorded(_ context.Context, d domain.Discrepancy) {
	m.discrepancies.WithLabelValues(string(d.Type)).Inc()
}

// The creators of payd_orders_created_total.
const (
	creatorCustomer = "customer"
	creatorMerchant = "merchant"
)

// OrderCreated counts an order by its creator (service.Observer).
func (m *Metrics) OrderCreated(byMerchant bool) {
	c := creatorCustomer
	if byMerchant {
		c = creatorMerchant
	}
	m.ordersCreated.WithLabelValues(c).Inc()
}

// OutOfStock counts an order refused for lack of stock (service.Observer).
func (m *Metrics) OutOfStock() { m.outOfStock.Inc() }

// HoldEnded counts a hold action by kind and result (service.Observer).
func (m *Metrics) HoldEnded(k domain.HoldActionKind, result service.HoldResult) {
	m.holds.WithLabelValues(string(k), string(result)).Inc()
}

// Retained counts the rows retention deleted from table (service.Observer).
func (m *Metrics) Retained(table string, n int64) {
	m.retained.WithLabelValues(table).Add(float64(n))
}

// JobDone counts the rows a background job handled (service.Observer).
func (m *Metrics) JobDone(name service.JobName, n int64) {
	m.jobs.WithLabelValues(string(name)).Add(float64(n))
}

// Scrape serves the metrics in the Prometheus text format, to whatever
// path it is mounted on (payd's GET /metrics).
func (m *Metrics) Scrape() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Handler is the metrics listener's whole API (PAYD_METRICS_ADDR): GET
// /metrics and nothing else, so the port can be opened to the scraper alone.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Scrape())
	return mux
}

// Middleware times every request e serves. It runs outside the access log,
// which has already turned an error into its problem response, so the
// status it sees is the one the client got.
func (m *Metrics) Middleware(e *echo.Echo) echo.MiddlewareFunc {
	var once sync.Once
	known := map[string]bool{}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			once.Do(func() { // every route is registered once requests flow
				for _, r := range e.Routes() {
					known[r.Path] = true
				}
			})
			route := c.Path()
			if !known[route] {
				route = "unmatched"
			}
			m.observer(route, methodLabel(c.Request().Method), statusClass(c.Response().Status)).
				Observe(time.Since(start).Seconds())
			return err
		}
	}
}

// requestLabels are the labels of one request latency series.
type requestLabels struct{ route, method, status string }

// observer is the latency series of one route, method and status class,
// looked up in the histogram once and then kept: the labels come from fixed
// sets (routes, methods, status classes), so the cache stays small.
func (m *Metrics) observer(route, method, status string) prometheus.Observer {
	k := requestLabels{route, method, status}
	if o, ok := m.observers.Load(k); ok {
		return o.(prometheus.Observer)
	}
	o := m.requests.WithLabelValues(route, method, status)
	m.observers.Store(k, o)
	return o
}

func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// statusClass is 2xx, 4xx, ...: enough to alert on, few enough series.
func statusClass(status int) string {
	if status < 100 || status > 599 {
		return "other"
	}
	return statusClasses[status/100-1]
}

var statusClasses = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}
