package app

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/payd/payd/notify"
)

// notifyConfig is how payd tells the shop (ADR 0053): one endpoint from
// the environment for a quick start, and the bounds of every outbound
// request.
type notifyConfig struct {
	NotifyURL          string        // PAYD_NOTIFY_URL: one endpoint, every event type (empty: none from the environment)
	NotifySecret       string        // PAYD_NOTIFY_SECRET: its whsec_ secret
	NotifyTimeout      time.Duration // PAYD_NOTIFY_TIMEOUT: one delivery request's deadline
	NotifyAllowPrivate string        // PAYD_NOTIFY_ALLOW_PRIVATE: CIDRs reached in production although private

	notifyAllow []netip.Prefix // NotifyAllowPrivate, parsed by checkNotify
}

func (c *Config) notifySettings() []setting {
	return []setting{
		{"PAYD_NOTIFY_URL", "notify-url", "", "one endpoint the shop is told of every order event at (empty: endpoints through the admin API only)", &c.NotifyURL, nil},
		{"PAYD_NOTIFY_SECRET", "notify-secret", "", "the whsec_... secret deliveries to PAYD_NOTIFY_URL are signed with", &c.NotifySecret, nil},
		{"PAYD_NOTIFY_TIMEOUT", "notify-timeout", "10s", "deadline of one delivery request to a merchant endpoint", nil, &c.NotifyTimeout},
		{"PAYD_NOTIFY_ALLOW_PRIVATE", "notify-allow-private", "", "comma-separated CIDRs merchant endpoints may reach in production although private or loopback", &c.NotifyAllowPrivate, nil},
	}
}

// notifyPolicy is what a delivery may reach: in production, not payd's
// own network unless allowed.
func (c *Config) notifyPolicy() notify.Policy {
	return notify.Policy{Guard: c.Env == "production", Allow: c.notifyAllow}
}

// checkNotify checks the notify settings: a URL payd may send to, with a
// whsec_ secret of its own (as strong as PAYD_WEBHOOK_SECRET's in
// production), a positive timeout, CIDRs that parse.
func (c *Config) checkNotify(sub string) error {
	if sub == "sandbox" || sub == "migrate" {
		return nil
	}
	if c.NotifyTimeout <= 0 {
		return errors.New("PAYD_NOTIFY_TIMEOUT must be positive")
	}
	allow, err := notify.ParseAllow(c.NotifyAllowPrivate)
	if err != nil {
		return fmt.Errorf("PAYD_NOTIFY_ALLOW_PRIVATE: %w", err)
	}
	c.notifyAllow = allow
	if c.NotifyURL == "" {
		if c.NotifySecret != "" {
			return errors.New("PAYD_NOTIFY_SECRET is set without PAYD_NOTIFY_URL")
		}
		return nil
	}
	if err := c.notifyPolicy().CheckURL(c.NotifyURL); err != nil {
		return fmt.Errorf("PAYD_NOTIFY_URL: %w", err)
	}
	if c.NotifySecret == "" {
		return errors.New("PAYD_NOTIFY_SECRET must be set with PAYD_NOTIFY_URL: deliveries are signed with it")
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(c.NotifySecret, "whsec_"))
	if !strings.HasPrefix(c.NotifySecret, "whsec_") || err != nil || len(key) == 0 {
		return errors.New("PAYD_NOTIFY_SECRET must be one whsec_... secret (whsec_ and base64)")
	}
	if c.Env == "production" && (len(key) < minSecretBytes || lowEntropy(key) || weakSecret(c.NotifySecret)) {
		return fmt.Errorf("PAYD_NOTIFY_SECRET must be whsec_ and the base64 of at least %d random bytes when PAYD_ENV=production", minSecretBytes)
	}
	return nil
}
