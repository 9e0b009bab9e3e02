package telemetry

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/payd/payd/service"
)

// Backlog gauges are read from the database at most once per BacklogTTL
// per replica, each read bounded by BacklogTimeout (ADR 0022).
const (
	BacklogTTL     = 15 * time.Second
	BacklogTimeout = 2 * time.Second
)

// buildInfo is payd_build_info: always 1, its labels say which payd this
// is (stamped with -ldflags, else the toolchain's record: internal/version).
func buildInfo() prometheus.Collector {
	version, revision := BuildVersion()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "payd_build_info",
		Help:        "Which payd runs: version, VCS revision and Go version as labels; always 1.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}

// Backlog is what payd has left to settle, across every replica: it is
// read from the database, not counted in this process.
type Backlog struct {
	OrdersProcessing     int64
	DiscrepanciesOpen    int64
	OldestUnknownAttempt time.Time // zero: no attempt with an unknown outcome
	WebhookEventsPending int64     // stored but not yet applied (a delivery died half-way)
	DisputesOpen         int64     // disputes the customers' banks have not decided
	NotifyPending        int64     // events not yet told to the merchant's endpoints (ADR 0053)
	OldestNotifyPending  time.Time // zero: none
	NotifyHeld           int64     // pending deliveries to endpoints an operator disabled
	HoldsOpen            int64     // authorized orders: money held, not yet captured (ADR 0060)
	NextHoldLapse        time.Time // zero: no open hold
	OldestHold           time.Time // when the oldest open hold was authorized; zero: none
	// OldestRetained is, by table retention deletes from
	// (service.RetainedTables), when its oldest row retention counts
	// from became old; a table with none is absent.
	OldestRetained map[string]time.Time
}

// backlogDescs are the gauges a backlog collector exports.
var (
	descOrdersProcessing = prometheus.NewDesc("payd_orders_processing",
		"Orders claimed by a payment that has not ended yet (whole database).", nil, nil)
	descDiscrepanciesOpen = prometheus.NewDesc("payd_discrepancies_open",
		"Discrepancies waiting for an operator: status open or resolving (whole database).", nil, nil)
	descOldestUnknown = prometheus.NewDesc("payd_oldest_unknown_attempt_age_seconds",
		"Age of the oldest payment attempt whose outcome is unknown; 0 when there is none.", nil, nil)
	descWebhooksPending = prometheus.NewDesc("payd_webhook_events_pending",
		"Provider webhook events stored but not yet applied (whole database).", nil, nil)
	descDisputesOpen = prometheus.NewDesc("payd_disputes_open",
		"Customers' disputes of charges not yet decided by their bank: status open (whole database).", nil, nil)
	descNotifyBacklog = prometheus.NewDesc("payd_notify_backlog",
		"Events not yet told to the merchant's enabled endpoints: not fanned out, or a delivery pending (whole database).", nil, nil)
	descNotifyOldest = prometheus.NewDesc("payd_notify_oldest_pending_age_seconds",
		"Age of the oldest event not yet told to an enabled endpoint; 0 when there is none.", nil, nil)
	descNotifyHeld = prometheus.NewDesc("payd_notify_held",
		"Deliveries pending to endpoints an operator disabled: they go when it is enabled again, and are not in payd_notify_backlog (whole database).", nil, nil)
	descOldestRetained = prometheus.NewDesc("payd_retention_oldest_age_seconds",
		"By table retention deletes from (PAYD_RETENTION), the age of its oldest row that retention counts: applied for webhook_events, ended for notify_deliveries, created for notify_events; 0 when there is none. Above the retention, the job is behind.", []string{"table"}, nil)
	descHoldsOpen = prometheus.NewDesc("payd_holds_open",
		"Authorized orders: money the provider holds for them, not captured yet (whole database).", nil, nil)
	descOldestHold = prometheus.NewDesc("payd_oldest_hold_age_seconds",
		"Age of the oldest open hold, from its authorization; 0 when there is none.", nil, nil)
	descNextLapse = prometheus.NewDesc("payd_hold_next_lapse_seconds",
		"Seconds until the earliest open hold lapses (its capture_before; negative once past, until the holds job voids it); 0 when there is none (payd_holds_open says so).", nil, nil)
	descBacklogUp = prometheus.NewDesc("payd_backlog_scrape_success",
		"1 when the backlog gauges were read from the database (or its cache), 0 when that read failed.", nil, nil)
)

// backlogCollector reads the backlog when scraped, at most once per ttl
// (ADR 0022): scrapes within ttl of the last read, by any number of
// scrapers, are answered from the cache, so each replica costs the database
// a handful of indexed counts per ttl however often it is scraped. A read
// is bounded by timeout; a failed read exports only
// payd_backlog_scrape_success 0, never stale numbers as if fresh.
type backlogCollector struct {
	read         func(context.Context) (Backlog, error)
	ttl, timeout time.Duration
	now          func() time.Time

	mu     sync.Mutex
	at     time.Time
	cached Backlog
	err    error
}

// WatchBacklog exports the backlog gauges, read by read on scrape and
// cached for ttl.
func (m *Metrics) WatchBacklog(read func(context.Context) (Backlog, error), ttl, timeout time.Duration) {
	m.reg.MustRegister(&backlogCollector{read: read, ttl: ttl, timeout: timeout, now: time.Now})
}

// Describe sends the gauges' descriptions.
func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descOrdersProcessing, descDiscrepanciesOpen, descOldestUnknown, descWebhooksPending, descDisputesOpen,
		descNotifyBacklog, descNotifyOldest, descNotifyHeld, descOldestRetained, descHoldsOpen, descOldestHold, descNextLapse, descBacklogUp} {
		ch <- d
	}
}

// Collect sends the gauges, reading the database when the cache is stale.
// The lock makes concurrent scrapes wait for one read instead of each
// starting its own.
func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	now := c.now()
	if c.at.IsZero() || now.Sub(c.at) >= c.ttl {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		c.cached, c.err = c.read(ctx)
		cancel()
		c.at = now
	}
	b, err := c.cached, c.err
	c.mu.Unlock()
	if err != nil {
		ch <- prometheus.MustNewConstMetric(descBacklogUp, prometheus.GaugeValue, 0)
		return
	}
	age := 0.0
	if !b.OldestUnknownAttempt.IsZero() {
		age = max(now.Sub(b.OldestUnknownAttempt).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(descBacklogUp, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(descOrdersProcessing, prometheus.GaugeValue, float64(b.OrdersProcessing))
	ch <- prometheus.MustNewConstMetric(descDiscrepanciesOpen, prometheus.GaugeValue, float64(b.DiscrepanciesOpen))
	ch <- prometheus.MustNewConstMetric(descOldestUnknown, prometheus.GaugeValue, age)
	ch <- prometheus.MustNewConstMetric(descWebhooksPending, prometheus.GaugeValue, float64(b.WebhookEventsPending))
	ch <- prometheus.MustNewConstMetric(descDisputesOpen, prometheus.GaugeValue, float64(b.DisputesOpen))
	notifyAge := 0.0
	if !b.OldestNotifyPending.IsZero() {
		notifyAge = max(now.Sub(b.OldestNotifyPending).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(descNotifyBacklog, prometheus.GaugeValue, float64(b.NotifyPending))
	ch <- prometheus.MustNewConstMetric(descNotifyOldest, prometheus.GaugeValue, notifyAge)
	ch <- prometheus.MustNewConstMetric(descNotifyHeld, prometheus.GaugeValue, float64(b.NotifyHeld))
	holdAge := 0.0
	if !b.OldestHold.IsZero() {
		holdAge = max(now.Sub(b.OldestHold).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(descHoldsOpen, prometheus.GaugeValue, float64(b.HoldsOpen))
	ch <- prometheus.MustNewConstMetric(descOldestHold, prometheus.GaugeValue, holdAge)
	lapse := 0.0
	if !b.NextHoldLapse.IsZero() {
		lapse = b.NextHoldLapse.Sub(now).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(descNextLapse, prometheus.GaugeValue, lapse)
	for _, table := range []string{service.RetainedWebhookEvents, service.RetainedNotifyDeliveries, service.RetainedNotifyEvents, service.RetainedCheckpoints} {
		age := 0.0
		if at, ok := b.OldestRetained[table]; ok && !at.IsZero() {
			age = max(now.Sub(at).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(descOldestRetained, prometheus.GaugeValue, age, table)
	}
}
