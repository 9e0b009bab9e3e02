package app

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/payd/payd/handler"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/provider/stripeprovider"
	"github.com/payd/payd/service"
	"github.com/payd/payd/web"
)

// stripeConfig selects the provider and configures Stripe (ADR 0019). The
// Stripe variables keep Stripe's own names, as Stripe's docs and CLI use them.
type stripeConfig struct {
	Provider      string // sandbox (default) or stripe
	SecretKey     string // STRIPE_SECRET_KEY: sk_test_… / sk_live_… (or a restricted rk_…)
	WebhookSecret string // STRIPE_WEBHOOK_SECRET: whsec_… from the Dashboard or `stripe listen`
	APIBase       string // STRIPE_API_BASE: empty is Stripe; stripe-mock or a fake in tests
	// PublishableKey (STRIPE_PUBLISHABLE_KEY, pk_…) lets the checkout page
	// collect a card with Stripe.js Elements; it is public by design.
	PublishableKey string
}

func stripeSettings(c *Config) []setting {
	return []setting{
		{"PAYD_PROVIDER", "provider", "sandbox", "payment provider: sandbox or stripe", &c.Stripe.Provider, nil},
		{"STRIPE_SECRET_KEY", "stripe-secret-key", "", "Stripe API key sk_... (PAYD_PROVIDER=stripe)", &c.Stripe.SecretKey, nil},
		{"STRIPE_WEBHOOK_SECRET", "stripe-webhook-secret", "", "Stripe webhook signing secret whsec_..., several separated by spaces (PAYD_PROVIDER=stripe)", &c.Stripe.WebhookSecret, nil},
		{"STRIPE_API_BASE", "stripe-api-base", "", "Stripe API base URL; empty is Stripe (stripe-mock or a fake in tests)", &c.Stripe.APIBase, nil},
		{"STRIPE_PUBLISHABLE_KEY", "stripe-publishable-key", "", "Stripe publishable key pk_...: the checkout page collects cards with Stripe.js Elements", &c.Stripe.PublishableKey, nil},
	}
}

// checkStripe refuses a Stripe setup that could not take or verify a
// payment: without a key nothing can be charged; without a webhook secret
// no event could be believed. In production both must be set; in
// development a missing webhook secret is made up (and not shown), so nothing verifies
// until the real one (from `stripe listen`) is given.
func (c *Config) checkStripe(sub string) error {
	switch c.Stripe.Provider {
	case "sandbox":
		return nil
	case "stripe":
	default:
		return fmt.Errorf("PAYD_PROVIDER must be sandbox or stripe, not %q", c.Stripe.Provider)
	}
	if sub != "serve" {
		return nil
	}
	if c.ProviderURL != "" {
		return errors.New("PAYD_PROVIDER_URL is the sandbox's; with PAYD_PROVIDER=stripe use STRIPE_API_BASE")
	}
	k := c.Stripe.SecretKey
	if !strings.HasPrefix(k, "sk_") && !strings.HasPrefix(k, "rk_") {
		return errors.New("STRIPE_SECRET_KEY must be set to a Stripe secret key (sk_...) when PAYD_PROVIDER=stripe")
	}
	if c.Env == "production" && (strings.HasPrefix(k, "sk_test_") || strings.HasPrefix(k, "rk_test_")) {
		// A test-mode key in production takes no real money while payd
		// reports orders paid.
		return errors.New("STRIPE_SECRET_KEY is a test-mode key (sk_test_...); PAYD_ENV=production needs a live key (sk_live_...)")
	}
	if b := c.Stripe.APIBase; b != "" {
		if u, err := url.Parse(b); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("STRIPE_API_BASE must be an http(s):// URL with a host")
		} else if c.Env == "production" && u.Scheme != "https" {
			// The secret key travels in every request's Authorization header.
			return errors.New("STRIPE_API_BASE must be an https:// URL when PAYD_ENV=production: the secret key is sent with every request")
		}
	}
	if pk := c.Stripe.PublishableKey; pk != "" && !strings.HasPrefix(pk, "pk_") {
		return errors.New("STRIPE_PUBLISHABLE_KEY must be a publishable key (pk_...), never the secret key")
	}
	secrets := webhookSecrets(c.Stripe.WebhookSecret)
	if len(secrets) == 0 {
		if c.Env == "production" {
			return errors.New("STRIPE_WEBHOOK_SECRET must be set to Stripe's whsec_... signing secret when PAYD_ENV=production")
		}
		// Not printed nor kept: no event can be verified with it, which
		// is the point until the real secret is given.
		c.Stripe.WebhookSecret = "whsec_" + randomSecret("")
		return nil
	}
	for _, s := range secrets {
		if !strings.HasPrefix(s, "whsec_") || len(s) < len("whsec_")+16 {
			return errors.New("STRIPE_WEBHOOK_SECRET must be one or more whsec_... secrets separated by spaces")
		}
	}
	return nil
}

// newStripe builds the Stripe adapter; payd tells it what it recorded of
// an attempt with each question about it (ADR 0020).
func newStripe(cfg Config, log *slog.Logger, transport http.RoundTripper) (*stripeprovider.Client, error) {
	return stripeprovider.New(stripeprovider.Config{SecretKey: cfg.Stripe.SecretKey, APIBase: cfg.Stripe.APIBase,
		Timeout: cfg.ProviderTimeout, Now: now, HTTPClient: &http.Client{Transport: transport},
		Skipped: func(id, reason string) {
			log.Warn("reconciliation skipped a Stripe PaymentIntent payd cannot read", "payment_intent", id, "reason", reason)
		}})
}

// settlementsFor is the reader of the settlement files operators upload for
// reconciliation: the sandbox's CSV, or Stripe's balance-transactions export.
func settlementsFor(cfg Config) handler.SettlementParser {
	if cfg.Stripe.Provider == "stripe" {
		return stripeprovider.ParseBalanceCSV // charges only: refunds come from Stripe's list
	}
	return provider.ParseSettlement
}

// checkoutPage tells the checkout page which provider it pays with.
func checkoutPage(cfg Config) web.Config {
	if cfg.Stripe.Provider != "stripe" {
		return web.Config{Provider: "sandbox"}
	}
	return web.Config{Provider: "stripe", StripePublishableKey: cfg.Stripe.PublishableKey}
}

// stripeWebhooks is the /v1/webhooks/stripe handler when prov is Stripe, else nil.
func stripeWebhooks(cfg Config, prov PaymentProvider, receiver *service.Webhooks) (*handler.StripeWebhooks, error) {
	sp, ok := prov.(*stripeprovider.Client)
	if !ok {
		return nil, nil
	}
	w, err := sp.Webhooks(cfg.Stripe.WebhookSecret)
	if err != nil {
		return nil, err
	}
	return &handler.StripeWebhooks{Receiver: receiver, Parse: w.ParseStored}, nil
}
