package app

import (
	"encoding/base64"
	"io"
	"strings"
	"testing"
	"time"
)

// TestConfigProduction: production refuses missing and placeholder secrets
// and the test-only fault switch; development makes secrets up; the
// sandbox needs only the webhook secret; flags override the environment.
func TestConfigProduction(t *testing.T) {
	strong := map[string]string{
		"PAYD_ENV": "production", "PAYD_ADMIN_TOKEN": "adm_9f8e7d6c5b4a39281716151413121110",
		"PAYD_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "PAYD_SECRET_KEY": "k-4f0c1a9e8b7d6c5e4f3a2b1c0d9e8f7a", "PAYD_MERCHANT_KEY": "sk_9d2f4a6c8e0b1d3f5a7c9e1b3d5f7a9c",
	}
	with := func(over map[string]string) func(string) string {
		return func(k string) string {
			if v, ok := over[k]; ok {
				return v
			}
			return strong[k]
		}
	}
	tests := []struct {
		name    string
		sub     string
		env     map[string]string
		args    []string
		wantErr string
	}{
		{"strong secrets", "serve", nil, nil, ""},
		{"missing admin token", "serve", map[string]string{"PAYD_ADMIN_TOKEN": ""}, nil, "PAYD_ADMIN_TOKEN"},
		{"short secret key", "serve", map[string]string{"PAYD_SECRET_KEY": "short"}, nil, "PAYD_SECRET_KEY"},
		{"placeholder webhook secret", "serve", map[string]string{"PAYD_WEBHOOK_SECRET": "whsec_change-me-change-me-change-me"}, nil, "PAYD_WEBHOOK_SECRET"},
		// Only a paydfault build knows the switch; a shipped build ignores the variable.
		{"fault switch", "serve", map[string]string{"PAYD_TEST_FAULT": "after_claim"}, nil, map[bool]string{true: "PAYD_TEST_FAULT"}[faultBuild]},
		{"mutant switch", "serve", map[string]string{"PAYD_TEST_MUTANT": "claim_unguarded"}, nil, map[bool]string{true: "PAYD_TEST_MUTANT"}[faultBuild]},
		{"refund mutant switch", "serve", map[string]string{"PAYD_TEST_MUTANT": "refund_unguarded"}, nil, map[bool]string{true: "PAYD_TEST_MUTANT"}[faultBuild]},
		{"notify via switch", "serve", map[string]string{"PAYD_TEST_NOTIFY_VIA": "127.0.0.1:9"}, nil, map[bool]string{true: "PAYD_TEST_NOTIFY_VIA"}[faultBuild]},
		{"webhook secret without prefix", "serve", map[string]string{"PAYD_WEBHOOK_SECRET": "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwxyz"}, nil, "whsec_"},
		{"sandbox needs no admin token", "sandbox", map[string]string{"PAYD_ADMIN_TOKEN": "", "PAYD_SECRET_KEY": ""}, nil, ""},
		{"sandbox needs the webhook secret", "sandbox", map[string]string{"PAYD_WEBHOOK_SECRET": ""}, nil, "PAYD_WEBHOOK_SECRET"},
		{"bad duration", "serve", map[string]string{"PAYD_LEASE": "soon"}, nil, "PAYD_LEASE"},
		{"lease longer than TTL", "serve", map[string]string{"PAYD_LEASE": "48h"}, nil, "PAYD_LEASE"},
		{"lease shorter than the provider timeout", "serve", map[string]string{"PAYD_LEASE": "3s"}, nil, "PAYD_PROVIDER_TIMEOUT"},
		{"lease without the in-flight margin", "serve", map[string]string{"PAYD_LEASE": "15s", "PAYD_PROVIDER_TIMEOUT": "10s"}, nil, "PAYD_LEASE"},
		{"lease past the timeout and its margin", "serve", map[string]string{"PAYD_LEASE": "1s", "PAYD_PROVIDER_TIMEOUT": "500ms"}, nil, ""},
		{"no provider timeout", "serve", map[string]string{"PAYD_PROVIDER_TIMEOUT": "0s"}, nil, "PAYD_PROVIDER_TIMEOUT"},
		{"write timeout within the provider timeout and margin", "serve", map[string]string{"PAYD_WRITE_TIMEOUT": "12s", "PAYD_PROVIDER_TIMEOUT": "10s"}, nil, "PAYD_WRITE_TIMEOUT"},
		{"write timeout past the provider timeout and margin", "serve", map[string]string{"PAYD_WRITE_TIMEOUT": "16s", "PAYD_PROVIDER_TIMEOUT": "10s"}, nil, ""},
		{"unknown env", "serve", map[string]string{"PAYD_ENV": "staging"}, nil, "PAYD_ENV"},
		{"flag overrides env", "serve", map[string]string{"PAYD_ADMIN_TOKEN": ""}, []string{"-admin-token", "adm_from_a_flag_0123456789abcdef"}, ""},
	}
	for _, tt := range tests {
		_, err := loadConfig(tt.sub, tt.args, with(tt.env), io.Discard)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: loadConfig = %v, want nil", tt.name, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: loadConfig = %v, want an error naming %s", tt.name, err, tt.wantErr)
		}
	}
}

func TestConfigDevelopmentDefaults(t *testing.T) {
	c, err := loadConfig("serve", nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatalf("loadConfig(empty env) = %v", err)
	}
	if c.Addr != "127.0.0.1:8080" || c.DatabaseURL != "sqlite://payd.db" || c.Lease != 30*time.Second ||
		c.InflightWait != 2*time.Second || c.IdempotencyTTL != 24*time.Hour || c.OrderTTL != 30*time.Minute || c.SandboxAddr != "127.0.0.1:0" ||
		c.Retention != 30*24*time.Hour {
		t.Errorf("defaults = %+v, want the documented defaults (docs/guarantees.md#configuration)", c)
	}
	if len(c.generated) != 4 || !strings.HasPrefix(c.WebhookSecret, "whsec_") || len(c.AdminToken) < 24 || len(c.SecretKey) < 24 ||
		!strings.HasPrefix(c.MerchantKey, "sk_") || len(c.MerchantKey) < 24 {
		t.Errorf("development secrets = %v, want all four made up", c.generated)
	}
	if s, _ := loadConfig("sandbox", nil, func(string) string { return "" }, io.Discard); s.SandboxAddr != "127.0.0.1:8081" {
		t.Errorf("payd sandbox listens on %q by default, want 127.0.0.1:8081", s.SandboxAddr)
	}
}

// TestConfigRefusesWeakSettings: production refuses each weak webhook
// secret of a rotation list and low-entropy admin tokens and secret keys;
// every environment refuses a provider URL that is not http(s) with a host,
// an unknown log level and a missing timeout.
func TestConfigRefusesWeakSettings(t *testing.T) {
	strong := map[string]string{
		"PAYD_ENV": "production", "PAYD_ADMIN_TOKEN": "adm_9f8e7d6c5b4a39281716151413121110",
		"PAYD_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "PAYD_SECRET_KEY": "k-4f0c1a9e8b7d6c5e4f3a2b1c0d9e8f7a", "PAYD_MERCHANT_KEY": "sk_9d2f4a6c8e0b1d3f5a7c9e1b3d5f7a9c",
	}
	dev := map[string]string{"PAYD_ENV": "development", "PAYD_ADMIN_TOKEN": "", "PAYD_WEBHOOK_SECRET": "", "PAYD_SECRET_KEY": ""}
	zeros := "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 32))
	short := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdefghijklm")) // 23 bytes
	tests := []struct {
		name    string
		base    map[string]string
		env     map[string]string
		wantErr string
	}{
		{"strong", strong, nil, ""},
		{"rotation of two strong secrets", strong, map[string]string{"PAYD_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw whsec_Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg=="}, ""},
		{"weak secret beside a strong one", strong, map[string]string{"PAYD_WEBHOOK_SECRET": "whsec_AAAA whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "PAYD_WEBHOOK_SECRET"},
		{"23-byte webhook secret", strong, map[string]string{"PAYD_WEBHOOK_SECRET": short}, "PAYD_WEBHOOK_SECRET"},
		{"webhook secret of zero bytes", strong, map[string]string{"PAYD_WEBHOOK_SECRET": zeros}, "PAYD_WEBHOOK_SECRET"},
		{"webhook secret not base64", strong, map[string]string{"PAYD_WEBHOOK_SECRET": "whsec_not*base64*at*all*but*quite*long*enough"}, "PAYD_WEBHOOK_SECRET"},
		{"one-character admin token", strong, map[string]string{"PAYD_ADMIN_TOKEN": strings.Repeat("a", 28)}, "PAYD_ADMIN_TOKEN"},
		{"repeated-pattern admin token", strong, map[string]string{"PAYD_ADMIN_TOKEN": strings.Repeat("ab12", 8)}, "PAYD_ADMIN_TOKEN"},
		{"one-character secret key", strong, map[string]string{"PAYD_SECRET_KEY": strings.Repeat("a", 28)}, "PAYD_SECRET_KEY"},
		{"few-character secret key", strong, map[string]string{"PAYD_SECRET_KEY": "aaaabbbbccccaaaabbbbccccaaaabbbb"}, "PAYD_SECRET_KEY"},
		{"ftp provider", strong, map[string]string{"PAYD_PROVIDER_URL": "ftp://x"}, "PAYD_PROVIDER_URL"},
		{"ftp provider in development", dev, map[string]string{"PAYD_PROVIDER_URL": "ftp://x"}, "PAYD_PROVIDER_URL"},
		{"OTLP endpoint without a scheme", dev, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{"OTLP traces endpoint without a host", dev, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http:///v1/traces"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{"OTLP protocol unknown", dev, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"unknown propagator", dev, map[string]string{"OTEL_PROPAGATORS": "tracecontext,w3c"}, "OTEL_PROPAGATORS"},
		{"unknown sampler", dev, map[string]string{"OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER"},
		{"OTLP over gRPC", dev, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, ""},
		{"provider without host", dev, map[string]string{"PAYD_PROVIDER_URL": "http://"}, "PAYD_PROVIDER_URL"},
		{"provider without scheme", dev, map[string]string{"PAYD_PROVIDER_URL": "provider.example.com"}, "PAYD_PROVIDER_URL"},
		{"https provider", strong, map[string]string{"PAYD_PROVIDER_URL": "https://api.provider.example/v1"}, ""},
		{"http provider in development", dev, map[string]string{"PAYD_PROVIDER_URL": "http://127.0.0.1:8081"}, ""},
		{"unknown log level", strong, map[string]string{"PAYD_LOG_LEVEL": "verbose"}, "PAYD_LOG_LEVEL"},
		{"unknown log level in development", dev, map[string]string{"PAYD_LOG_LEVEL": "trace"}, "PAYD_LOG_LEVEL"},
		{"upper-case log level", dev, map[string]string{"PAYD_LOG_LEVEL": "DEBUG"}, ""},
		{"zero read timeout", dev, map[string]string{"PAYD_READ_TIMEOUT": "0s"}, "PAYD_READ_TIMEOUT"},
		{"zero idle timeout", dev, map[string]string{"PAYD_IDLE_TIMEOUT": "0s"}, "PAYD_IDLE_TIMEOUT"},
		{"zero stream cap", dev, map[string]string{"PAYD_MAX_STREAMS_PER_CUSTOMER": "0"}, "PAYD_MAX_STREAMS_PER_CUSTOMER"},
		{"bad metrics address", dev, map[string]string{"PAYD_METRICS_ADDR": "not an address"}, "PAYD_METRICS_ADDR"},
		{"metrics address", dev, map[string]string{"PAYD_METRICS_ADDR": "127.0.0.1:0"}, ""},
		{"bad pprof address", dev, map[string]string{"PAYD_PPROF_ADDR": "6060"}, "PAYD_PPROF_ADDR"},
		{"pprof on the main listener", dev, map[string]string{"PAYD_PPROF_ADDR": "127.0.0.1:8080"}, "PAYD_PPROF_ADDR"},
		{"pprof address", dev, map[string]string{"PAYD_PPROF_ADDR": "127.0.0.1:0"}, ""},
	}
	for _, tt := range tests {
		getenv := func(k string) string {
			if v, ok := tt.env[k]; ok {
				return v
			}
			return tt.base[k]
		}
		_, err := loadConfig("serve", nil, getenv, io.Discard)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: loadConfig = %v, want nil", tt.name, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: loadConfig = %v, want an error naming %s", tt.name, err, tt.wantErr)
		}
	}
}

// TestConfigSecretKeyAlone: production refuses a PAYD_SECRET_KEY that is
// also an admin or operator token or a webhook secret (one of several
// too), naming the other setting and never the secret; development and
// the sandbox let it pass.
func TestConfigSecretKeyAlone(t *testing.T) {
	const key = "whsec_Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg==" // strong as a key, a token and a webhook secret
	strong := map[string]string{
		"PAYD_ENV": "production", "PAYD_ADMIN_TOKEN": "adm_9f8e7d6c5b4a39281716151413121110",
		"PAYD_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "PAYD_SECRET_KEY": key, "PAYD_MERCHANT_KEY": "sk_9d2f4a6c8e0b1d3f5a7c9e1b3d5f7a9c",
	}
	stripe := map[string]string{"PAYD_PROVIDER": "stripe", "STRIPE_SECRET_KEY": "sk_live_51Habc0123456789", "STRIPE_WEBHOOK_SECRET": "whsec_0123456789abcdefABCDEF"}
	tests := []struct {
		name    string
		sub     string
		env     []map[string]string
		wantErr string
	}{
		{"a key of its own", "serve", nil, ""},
		{"the admin token", "serve", []map[string]string{{"PAYD_ADMIN_TOKEN": key}}, "PAYD_ADMIN_TOKEN"},
		{"an operator's token", "serve", []map[string]string{{"PAYD_ADMIN_TOKENS": "ann:tok_3f9a8b7c6d5e4f30a1b2c3d4e5f6a7b8,bob:" + key}}, "operator bob"},
		{"the webhook secret", "serve", []map[string]string{{"PAYD_WEBHOOK_SECRET": key}}, "PAYD_WEBHOOK_SECRET"},
		{"one of two webhook secrets", "serve", []map[string]string{{"PAYD_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw " + key}}, "PAYD_WEBHOOK_SECRET"},
		{"Stripe's webhook secret", "serve", []map[string]string{stripe, {"STRIPE_WEBHOOK_SECRET": key}}, "STRIPE_WEBHOOK_SECRET"},
		{"Stripe mode, a key of its own", "serve", []map[string]string{stripe}, ""},
		{"development", "serve", []map[string]string{{"PAYD_ENV": "development", "PAYD_ADMIN_TOKEN": key}}, ""},
		{"the sandbox holds no key", "sandbox", []map[string]string{{"PAYD_WEBHOOK_SECRET": key}}, ""},
	}
	for _, tt := range tests {
		getenv := func(k string) string {
			for i := len(tt.env) - 1; i >= 0; i-- {
				if v, ok := tt.env[i][k]; ok {
					return v
				}
			}
			return strong[k]
		}
		_, err := loadConfig(tt.sub, nil, getenv, io.Discard)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: loadConfig = %v, want nil", tt.name, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "PAYD_SECRET_KEY")):
			t.Errorf("%s: loadConfig = %v, want an error naming PAYD_SECRET_KEY and %s", tt.name, err, tt.wantErr)
		case err != nil && strings.Contains(err.Error(), key):
			t.Errorf("%s: loadConfig = %v, prints the secret", tt.name, err)
		}
	}
}

// TestConfigListenAddrs: PAYD_ADDR and PAYD_SANDBOX_ADDR are checked as
// host:port where they are used, before anything is opened; :0 and a
// loopback address with port 0 pick a free port and are fine; migrate,
// which listens on nothing, takes any PAYD_ADDR.
func TestConfigListenAddrs(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, ok := range []string{":0", "127.0.0.1:0", "[::1]:8080", "localhost:65535", "0.0.0.0:8080"} {
		for _, tc := range []struct{ sub, name string }{{"serve", "PAYD_ADDR"}, {"serve", "PAYD_SANDBOX_ADDR"}, {"sandbox", "PAYD_SANDBOX_ADDR"}} {
			if _, err := loadConfig(tc.sub, nil, env(tc.name, ok), nil); err != nil {
				t.Errorf("%s=%s payd %s: %v, want it taken", tc.name, ok, tc.sub, err)
			}
		}
	}
	for _, bad := range []string{"9090", "localhost", "127.0.0.1:http", ":65536", ":-1", "not an address"} {
		for _, tc := range []struct{ sub, name string }{{"serve", "PAYD_ADDR"}, {"serve", "PAYD_SANDBOX_ADDR"}, {"sandbox", "PAYD_SANDBOX_ADDR"}} {
			_, err := loadConfig(tc.sub, nil, env(tc.name, bad), nil)
			if want := tc.name + " must be host:port"; err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("%s=%s payd %s: %v, want %q", tc.name, bad, tc.sub, err, want)
			}
		}
	}
	// Where the address is not used, it is not checked.
	for _, tc := range []struct {
		sub string
		env func(string) string
	}{
		{"migrate", env("PAYD_ADDR", "9090", "PAYD_SANDBOX_ADDR", "9090")},
		{"sandbox", env("PAYD_ADDR", "9090")},
		{"serve", env("PAYD_PROVIDER_URL", "http://prov.example", "PAYD_SANDBOX_ADDR", "9090")},
	} {
		if _, err := loadConfig(tc.sub, nil, tc.env, nil); err != nil {
			t.Errorf("payd %s: %v, want an address it does not use left alone", tc.sub, err)
		}
	}
}

// TestConfigRetention: PAYD_RETENTION takes days as well as Go durations,
// 0 keeps everything, and anything else is refused naming the variable.
func TestConfigRetention(t *testing.T) {
	for _, tt := range []struct {
		value   string
		want    time.Duration
		wantErr string
	}{
		{"7d", 7 * 24 * time.Hour, ""},
		{"90d", 90 * 24 * time.Hour, ""},
		{"36h", 36 * time.Hour, ""},
		{"0", 0, ""},
		{"d", 0, "PAYD_RETENTION"},
		{"1.5d", 0, "PAYD_RETENTION"},
		{"-1d", 0, "PAYD_RETENTION"},
		{"thirty days", 0, "PAYD_RETENTION"},
	} {
		c, err := loadConfig("serve", nil, func(k string) string {
			if k == "PAYD_RETENTION" {
				return tt.value
			}
			return ""
		}, io.Discard)
		switch {
		case tt.wantErr == "" && (err != nil || c.Retention != tt.want):
			t.Errorf("PAYD_RETENTION=%s: %v, %v; want %v", tt.value, c.Retention, err, tt.want)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("PAYD_RETENTION=%s: %v, want an error naming %s", tt.value, err, tt.wantErr)
		}
	}
}
