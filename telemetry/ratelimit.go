package telemetry

import "github.com/prometheus/client_golang/prometheus"

// RateLimit names one of payd's request rate limits (ADR 0037): the
// rate_limited problem's policy and payd_rate_limited_total's limit label.
type RateLimit string

// The rate limits, each keyed by its own caller.
const (
	LimitCustomer RateLimit = "customer" // an authenticated customer, by customer ID
	LimitOperator RateLimit = "operator" // an authenticated operator, by name
	LimitMerchant RateLimit = "merchant" // the merchant's server, by merchant key name
	LimitIP       RateLimit = "ip"       // unauthenticated requests and failed authentications, by client IP
	LimitWebhook  RateLimit = "webhook"  // provider webhooks, by source IP
)

// RateLimits is every rate limit, each a pre-initialised series.
var RateLimits = []RateLimit{LimitCustomer, LimitOperator, LimitMerchant, LimitIP, LimitWebhook}

func newRateLimited() *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payd_rate_limited_total",
		Help: "Requests refused with 429 rate_limited, by limit: customer, operator, merchant, ip, webhook.",
	}, []string{"limit"})
	for _, l := range RateLimits { // each starts at 0: the first refusals are an increase()
		v.WithLabelValues(string(l))
	}
	return v
}

// RateLimited counts one request refused by limit.
func (m *Metrics) RateLimited(limit RateLimit) {
	m.rateLimited.WithLabelValues(string(limit)).Inc()
}
