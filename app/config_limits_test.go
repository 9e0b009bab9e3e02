package app

import (
	"io"
	"strings"
	"testing"
)

// TestConfigRateLimits: the limits' defaults are 20 per second with bursts
// of 40, webhooks 500 and 1000; 0 turns a limit off; a negative or
// unreadable value is refused with an error that begins with the
// setting's name; trusted proxies are CIDRs or addresses.
func TestConfigRateLimits(t *testing.T) {
	c, err := loadConfig("serve", nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if rl := c.RateLimits; rl.Rate != 20 || rl.Burst != 40 || rl.WebhookRate != 500 || rl.WebhookBurst != 1000 || rl.TrustedProxies != nil {
		t.Errorf("default limits = %+v, want 20/40, webhooks 500/1000, no trusted proxy", rl)
	}
	tests := []struct {
		env     map[string]string
		wantErr string // the setting the error begins with; "" none
	}{
		{map[string]string{"PAYD_RATE_LIMIT": "0", "PAYD_RATE_LIMIT_BURST": "0", "PAYD_WEBHOOK_RATE_LIMIT": "0"}, ""},
		{map[string]string{"PAYD_RATE_LIMIT": "0.5", "PAYD_RATE_LIMIT_BURST": "1"}, ""},
		{map[string]string{"PAYD_RATE_LIMIT": "-1"}, "PAYD_RATE_LIMIT"},
		{map[string]string{"PAYD_RATE_LIMIT": "fast"}, "PAYD_RATE_LIMIT"},
		{map[string]string{"PAYD_RATE_LIMIT": "NaN"}, "PAYD_RATE_LIMIT"},
		{map[string]string{"PAYD_RATE_LIMIT": "+Inf"}, "PAYD_RATE_LIMIT"},
		{map[string]string{"PAYD_RATE_LIMIT_BURST": "-5"}, "PAYD_RATE_LIMIT_BURST"},
		{map[string]string{"PAYD_RATE_LIMIT_BURST": "2.5"}, "PAYD_RATE_LIMIT_BURST"},
		{map[string]string{"PAYD_WEBHOOK_RATE_LIMIT": "-0.1"}, "PAYD_WEBHOOK_RATE_LIMIT"},
		{map[string]string{"PAYD_WEBHOOK_RATE_LIMIT_BURST": "-1"}, "PAYD_WEBHOOK_RATE_LIMIT_BURST"},
		{map[string]string{"PAYD_TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.7 ,2001:db8::/32"}, ""},
		{map[string]string{"PAYD_TRUSTED_PROXIES": "10.0.0.0/33"}, "PAYD_TRUSTED_PROXIES"},
		{map[string]string{"PAYD_TRUSTED_PROXIES": "proxy.internal"}, "PAYD_TRUSTED_PROXIES"},
	}
	for _, tt := range tests {
		c, err := loadConfig("serve", nil, func(k string) string { return tt.env[k] }, io.Discard)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%v: loadConfig = %v, want nil", tt.env, err)
		case tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr+" ") && !strings.HasPrefix(err.Error(), tt.wantErr+":")):
			t.Errorf("%v: loadConfig = %v, want an error beginning with %s", tt.env, err, tt.wantErr)
		case tt.wantErr == "" && tt.env["PAYD_TRUSTED_PROXIES"] != "":
			got := []string{}
			for _, n := range c.RateLimits.TrustedProxies {
				got = append(got, n.String())
			}
			if strings.Join(got, " ") != "10.0.0.0/8 192.0.2.7/32 2001:db8::/32" {
				t.Errorf("trusted proxies = %v, want 10.0.0.0/8 192.0.2.7/32 2001:db8::/32", got)
			}
		}
	}
	c, _ = loadConfig("serve", []string{"-rate-limit", "3", "-rate-limit-burst", "6"}, func(string) string { return "" }, io.Discard)
	if c.RateLimits.Rate != 3 || c.RateLimits.Burst != 6 {
		t.Errorf("flags -rate-limit 3 -rate-limit-burst 6 = %+v, want 3/6", c.RateLimits)
	}
}
