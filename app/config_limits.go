package app

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"

	"github.com/payd/payd/handler"
)

// limitsConfig is the request rate limits' settings (ADR 0037).
type limitsConfig struct {
	rateLimit, rateBurst, webhookRate, webhookBurst, trustedProxies string

	// RateLimits is the settings parsed by checkLimits.
	RateLimits handler.RateLimits
}

func (c *Config) limitSettings() []setting {
	return []setting{
		{"PAYD_RATE_LIMIT", "rate-limit", "20", "requests per second per customer, per operator and per client IP without a valid token; 0 = no limit", &c.rateLimit, nil},
		{"PAYD_RATE_LIMIT_BURST", "rate-limit-burst", "40", "the bucket's size: requests an idle caller may send at once; 0 = no limit", &c.rateBurst, nil},
		{"PAYD_WEBHOOK_RATE_LIMIT", "webhook-rate-limit", "500", "provider webhook deliveries per second per source IP; 0 = no limit", &c.webhookRate, nil},
		{"PAYD_WEBHOOK_RATE_LIMIT_BURST", "webhook-rate-limit-burst", "1000", "the webhook bucket's size: deliveries an idle source may send at once; 0 = no limit", &c.webhookBurst, nil},
		{"PAYD_TRUSTED_PROXIES", "trusted-proxies", "", "CIDRs of the proxies whose X-Forwarded-For tells the client IP, comma-separated (empty: the connection's peer is the client)", &c.trustedProxies, nil},
	}
}

// checkLimits parses the rate limits' settings; a wrong one is an error
// that names it.
func (c *Config) checkLimits() error {
	rl := &c.RateLimits
	var err error
	if rl.Rate, err = perSecond("PAYD_RATE_LIMIT", c.rateLimit); err != nil {
		return err
	}
	if rl.Burst, err = burst("PAYD_RATE_LIMIT_BURST", c.rateBurst); err != nil {
		return err
	}
	if rl.WebhookRate, err = perSecond("PAYD_WEBHOOK_RATE_LIMIT", c.webhookRate); err != nil {
		return err
	}
	if rl.WebhookBurst, err = burst("PAYD_WEBHOOK_RATE_LIMIT_BURST", c.webhookBurst); err != nil {
		return err
	}
	rl.TrustedProxies = nil
	for _, s := range strings.Split(c.trustedProxies, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := cidr(s)
		if err != nil {
			return fmt.Errorf("PAYD_TRUSTED_PROXIES: %q is not a CIDR such as 10.0.0.0/8 or an IP address", s)
		}
		rl.TrustedProxies = append(rl.TrustedProxies, n)
	}
	return nil
}

// perSecond parses a rate: a number of requests per second, 0 or more.
func perSecond(name, v string) (float64, error) {
	r, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || r < 0 || math.IsInf(r, 0) || math.IsNaN(r) {
		return 0, fmt.Errorf("%s must be a number of requests per second, 0 (no limit) or more, not %q", name, v)
	}
	return r, nil
}

// burst parses a burst: a whole number of requests, 0 or more.
func burst(name, v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s must be a whole number of requests, 0 (no limit) or more, not %q", name, v)
	}
	return n, nil
}

// cidr parses a CIDR, or one address as its own /32 or /128.
func cidr(s string) (*net.IPNet, error) {
	if !strings.Contains(s, "/") {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("not an IP address")
		}
		bits := 128
		if ip.To4() != nil {
			ip, bits = ip.To4(), 32
		}
		return &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)}, nil
	}
	_, n, err := net.ParseCIDR(s)
	return n, err
}
