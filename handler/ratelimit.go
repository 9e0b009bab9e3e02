package handler

import (
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/telemetry"
)

// RateLimits are payd's request rate limits (ADR 0037), token buckets of
// Rate requests per second and Burst at once. Rate and Burst hold for each
// authenticated customer (by customer ID), each operator (by name), each
// merchant key (by name) and
// each client IP on the routes without a token (registration, the
// document, the problem pages, the checkout page and the console) and for
// failed authentications. Provider
// webhooks have their own, WebhookRate and WebhookBurst per source IP. A
// zero rate or burst turns that limit off; the zero value is no limits.
type RateLimits struct {
	Rate         float64 // PAYD_RATE_LIMIT
	Burst        int     // PAYD_RATE_LIMIT_BURST
	WebhookRate  float64 // PAYD_WEBHOOK_RATE_LIMIT
	WebhookBurst int     // PAYD_WEBHOOK_RATE_LIMIT_BURST

	// TrustedProxies are the proxies (PAYD_TRUSTED_PROXIES) whose
	// X-Forwarded-For payd believes; without any, the client IP is the
	// connection's peer, as nobody else's header can be trusted.
	TrustedProxies []*net.IPNet
}

// limit is one rate limit: a bucket per key.
type limit struct {
	name    telemetry.RateLimit
	every   rate.Limit
	burst   int
	policy  string // the RateLimit-Policy field
	keys    *buckets
	now     func() time.Time
	limited func(telemetry.RateLimit)
}

// newLimit is the limit of perSecond and burst, or nil when either is 0
// (off).
func newLimit(name telemetry.RateLimit, perSecond float64, burst int, m *telemetry.Metrics) *limit {
	if perSecond <= 0 || burst <= 0 {
		return nil
	}
	// The policy's window is the time the bucket takes to refill: burst
	// requests at once, or burst per window on average.
	w := max(1, int(math.Ceil(float64(burst)/perSecond)))
	return &limit{
		name: name, every: rate.Limit(perSecond), burst: burst,
		policy: `"` + string(name) + `";q=` + strconv.Itoa(burst) + ";w=" + strconv.Itoa(w),
		keys:   newBuckets(rate.Limit(perSecond), burst, maxLimiterKeys),
		now:    time.Now, limited: m.RateLimited,
	}
}

// quota is what remains of a key's limit: whole requests, and the
// seconds until one more is allowed.
type quota struct {
	remaining, reset int
}

// take spends one request of key's quota. Over the limit it spends
// nothing and says how long until a request is allowed again.
func (l *limit) take(key string) (quota, time.Duration, bool) {
	now := l.now()
	lim := l.keys.get(key, now)
	ok := lim.AllowN(now, 1)
	tokens := lim.TokensAt(now)
	if !ok {
		return quota{}, l.untilWhole(tokens, 1), false
	}
	return l.quotaOf(tokens), 0, true
}

// over reports, without spending any, whether key has no request left,
// and how long until it has one.
func (l *limit) over(key string) (time.Duration, bool) {
	lim := l.keys.lookup(key)
	if lim == nil {
		return 0, false // no bucket: a full one
	}
	if tokens := lim.TokensAt(l.now()); tokens < 1 {
		return l.untilWhole(tokens, 1), true
	}
	return 0, false
}

// quotaOf is the quota of a bucket holding tokens, just spent from (so
// fewer than its burst): one more request comes with the next whole token.
func (l *limit) quotaOf(tokens float64) quota {
	whole := max(0, int(tokens))
	return quota{remaining: whole, reset: seconds(l.untilWhole(tokens, float64(whole+1)))}
}

// untilWhole is how long a bucket holding tokens takes to hold want.
func (l *limit) untilWhole(tokens, want float64) time.Duration {
	return time.Duration((want - tokens) / float64(l.every) * float64(time.Second))
}

// seconds is d in whole seconds, rounded up, at least 1: the resolution
// of Retry-After and of the RateLimit field's reset.
func seconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// announce writes the limit's fields (draft-ietf-httpapi-ratelimit-headers):
// its policy, and the quota left to this caller.
// The keys are written canonical (as Header.Set would make them) so that
// setting them costs no key allocation on every request.
func (l *limit) announce(c echo.Context, q quota) {
	h := c.Response().Header()
	h["Ratelimit-Policy"] = []string{l.policy}
	h["Ratelimit"] = []string{`"` + string(l.name) + `";r=` + strconv.Itoa(q.remaining) + ";t=" + strconv.Itoa(q.reset)}
}

// refuse is the answer to a request over the limit: 429 rate_limited with
// Retry-After, the time until one request is allowed, which the RateLimit
// field's reset repeats.
func (l *limit) refuse(c echo.Context, wait time.Duration) error {
	l.limited(l.name)
	secs := seconds(wait)
	l.announce(c, quota{remaining: 0, reset: secs})
	return rateLimited(secs)
}

// by limits requests by the key of each; a request over the limit never
// reaches next.
func (l *limit) by(key func(echo.Context) string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if l == nil {
			return next
		}
		return func(c echo.Context) error {
			q, wait, ok := l.take(key(c))
			if !ok {
				return l.refuse(c, wait)
			}
			l.announce(c, q)
			return next(c)
		}
	}
}

// limiters are payd's rate limits as they apply to routes.
type limiters struct {
	customer, operator, merchant, ip, webhook *limit
	// failed is the per-IP limit on failed authentications, a bucket of
	// its own: the pages and registration an address requests without a
	// token (behind a proxy, all its users') never refuse a valid token.
	failed *limit
}

func newLimiters(rl RateLimits, m *telemetry.Metrics) *limiters {
	return &limiters{
		customer: newLimit(telemetry.LimitCustomer, rl.Rate, rl.Burst, m),
		operator: newLimit(telemetry.LimitOperator, rl.Rate, rl.Burst, m),
		merchant: newLimit(telemetry.LimitMerchant, rl.Rate, rl.Burst, m),
		ip:       newLimit(telemetry.LimitIP, rl.Rate, rl.Burst, m),
		webhook:  newLimit(telemetry.LimitWebhook, rl.WebhookRate, rl.WebhookBurst, m),
		failed:   newLimit(telemetry.LimitIP, rl.Rate, rl.Burst, m),
	}
}

// public limits a route without a token by client IP.
func (ls *limiters) public() echo.MiddlewareFunc { return ls.ip.by(clientKey) }

// webhooks limits the provider's deliveries by source IP, apart from
// every other caller: a 429 is a delivery the provider sends again.
func (ls *limiters) webhooks() echo.MiddlewareFunc { return ls.webhook.by(clientKey) }

// buyers is auth (a customer's token or a client secret) limited twice: by
// client IP before it, where only failed authentications spend the quota,
// and per caller after it, before anything else (an idempotent replay
// counts like any request). A customer is limited by
// its ID, the holder of a client secret by its order, the merchant by its
// key's name (its own quota, as on the catalogue).
func (ls *limiters) buyers(auth echo.MiddlewareFunc) echo.MiddlewareFunc {
	byBuyer, byMerchant := ls.customer.by(buyerKey), ls.merchant.by(merchantOf)
	perCaller := func(next echo.HandlerFunc) echo.HandlerFunc {
		buyer, merchant := byBuyer(next), byMerchant(next)
		return func(c echo.Context) error {
			if merchantOf(c) != "" {
				return merchant(c)
			}
			return buyer(c)
		}
	}
	return ls.authenticated(auth, perCaller)
}

// operators is customers for an operator's token, limited by the
// operator's name.
func (ls *limiters) operators(auth echo.MiddlewareFunc) echo.MiddlewareFunc {
	return ls.authenticated(auth, ls.operator.by(operatorOf))
}

// merchants is customers for a merchant key, limited by the key's name:
// each key (each of the merchant's systems) has its own quota.
func (ls *limiters) merchants(auth echo.MiddlewareFunc) echo.MiddlewareFunc {
	return ls.authenticated(auth, ls.merchant.by(merchantOf))
}

// authenticated runs auth, then perCaller. A client IP whose failed
// authentications are over the IP limit is refused before auth does any
// work (a token lookup): a flood of made-up tokens costs a map lookup
// each. A request that authenticates spends nothing of its IP's quota, so
// customers behind one address are limited each by their own ID.
func (ls *limiters) authenticated(auth, perCaller echo.MiddlewareFunc) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		h := auth(perCaller(next))
		if ls.failed == nil {
			return h
		}
		return func(c echo.Context) error {
			ip := clientKey(c)
			if wait, over := ls.failed.over(ip); over {
				return ls.failed.refuse(c, wait)
			}
			err := h(c)
			if err != nil && scopeOf(c) == domain.ScopePublic { // authentication failed
				ls.failed.take(ip)
			}
			return err
		}
	}
}

// clientKey is the key of a request's client IP: the address itself, or
// for IPv6 its /64, the block one subscriber is usually given (keyed by
// address, one client could take 2^64 buckets).
func clientKey(c echo.Context) string {
	ip := c.RealIP()
	if !strings.Contains(ip, ":") {
		return ip
	}
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	if a.Is4In6() {
		return a.Unmap().String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}

// ipExtractor is how payd tells a request's client IP: the connection's
// peer, or behind trusted proxies the nearest X-Forwarded-For address not
// one of theirs. Loopback and private addresses are not trusted unless
// listed: a header from anyone else could be forged.
func ipExtractor(trusted []*net.IPNet) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range trusted {
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}
