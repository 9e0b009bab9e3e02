package app

import (
	"io"
	"strings"
	"testing"
)

// TestConfigStripe: PAYD_PROVIDER selects the provider; Stripe mode needs a
// key everywhere and, in production, Stripe's webhook secret.
func TestConfigStripe(t *testing.T) {
	prod := map[string]string{
		"PAYD_ENV": "production", "PAYD_ADMIN_TOKEN": "adm_9f8e7d6c5b4a39281716151413121110",
		"PAYD_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "PAYD_SECRET_KEY": "k-4f0c1a9e8b7d6c5e4f3a2b1c0d9e8f7a", "PAYD_MERCHANT_KEY": "sk_9d2f4a6c8e0b1d3f5a7c9e1b3d5f7a9c",
		"PAYD_PROVIDER": "stripe", "STRIPE_SECRET_KEY": "sk_live_51Habc0123456789", "STRIPE_WEBHOOK_SECRET": "whsec_0123456789abcdefABCDEF",
	}
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"production, complete", nil, ""},
		{"production, no key", map[string]string{"STRIPE_SECRET_KEY": ""}, "STRIPE_SECRET_KEY"},
		{"production, a publishable key", map[string]string{"STRIPE_SECRET_KEY": "pk_live_abc"}, "STRIPE_SECRET_KEY"},
		{"production, no webhook secret", map[string]string{"STRIPE_WEBHOOK_SECRET": ""}, "STRIPE_WEBHOOK_SECRET"},
		{"webhook secret without prefix", map[string]string{"STRIPE_WEBHOOK_SECRET": "0123456789abcdefABCDEFxyz"}, "STRIPE_WEBHOOK_SECRET"},
		{"development, no webhook secret", map[string]string{"PAYD_ENV": "development", "STRIPE_WEBHOOK_SECRET": ""}, ""},
		{"development, no key", map[string]string{"PAYD_ENV": "development", "STRIPE_SECRET_KEY": ""}, "STRIPE_SECRET_KEY"},
		{"API base not a URL", map[string]string{"STRIPE_API_BASE": "localhost:12111"}, "STRIPE_API_BASE"},
		{"production, a test-mode key", map[string]string{"STRIPE_SECRET_KEY": "sk_test_51Habc0123456789"}, "STRIPE_SECRET_KEY"},
		{"production, a restricted test-mode key", map[string]string{"STRIPE_SECRET_KEY": "rk_test_51Habc0123456789"}, "STRIPE_SECRET_KEY"},
		{"production, plain http API base", map[string]string{"STRIPE_API_BASE": "http://stripe.internal:12111"}, "STRIPE_API_BASE"},
		{"production, https API base", map[string]string{"STRIPE_API_BASE": "https://stripe.internal"}, ""},
		{"development, a test-mode key over http", map[string]string{"PAYD_ENV": "development", "STRIPE_SECRET_KEY": "sk_test_x",
			"STRIPE_API_BASE": "http://127.0.0.1:12111"}, ""},
		{"publishable key that is not one", map[string]string{"STRIPE_PUBLISHABLE_KEY": "sk_live_oops"}, "STRIPE_PUBLISHABLE_KEY"},
		{"unknown provider", map[string]string{"PAYD_PROVIDER": "paypal"}, "PAYD_PROVIDER"},
		{"sandbox URL in Stripe mode", map[string]string{"PAYD_PROVIDER_URL": "http://127.0.0.1:8081"}, "STRIPE_API_BASE"},
		{"sandbox needs no Stripe key", map[string]string{"PAYD_PROVIDER": "", "STRIPE_SECRET_KEY": "", "STRIPE_WEBHOOK_SECRET": ""}, ""},
	}
	for _, tt := range tests {
		get := func(k string) string {
			if v, ok := tt.env[k]; ok {
				return v
			}
			return prod[k]
		}
		c, err := loadConfig("serve", nil, get, io.Discard)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: loadConfig = %v, want nil", tt.name, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: loadConfig = %v, want an error naming %s", tt.name, err, tt.wantErr)
		case err == nil && strings.Contains(tt.name, "development, no webhook secret") && !strings.HasPrefix(c.Stripe.WebhookSecret, "whsec_"):
			t.Errorf("%s: STRIPE_WEBHOOK_SECRET = %q, want one made up", tt.name, c.Stripe.WebhookSecret)
		}
	}
}
