package app

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestConfigOperators: PAYD_ADMIN_TOKENS is parsed into named operators
// (flag beside variable); a malformed entry, a reserved or repeated name,
// a token two operators share (or share with PAYD_ADMIN_TOKEN) is refused
// in every environment, a weak token in production; no error message ever
// carries a token.
func TestConfigOperators(t *testing.T) {
	const alice, bob = "op-7Hq2xWv9Lr4Kp8Zt3Ny6Bc1Md5Fg0Js", "op-Qe3Rt7Yu1Io5Pa9Sd2Fg6Hj0Kl4Zx8Cv"
	prod := map[string]string{
		"PAYD_ENV": "production", "PAYD_ADMIN_TOKEN": "adm_9f8e7d6c5b4a39281716151413121110",
		"PAYD_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "PAYD_SECRET_KEY": "k-4f0c1a9e8b7d6c5e4f3a2b1c0d9e8f7a", "PAYD_MERCHANT_KEY": "sk_9d2f4a6c8e0b1d3f5a7c9e1b3d5f7a9c",
	}
	tests := []struct {
		name, env, tokens, wantErr string
		want                       []string
	}{
		{"none", "production", "", "", nil},
		{"two", "production", "alice:" + alice + ", bob:" + bob, "", []string{"alice", "bob"}},
		{"no colon", "development", "alice" + alice, "entry 1 of 1", nil},
		{"empty name", "development", ":" + alice, "entry 1 of 1", nil},
		{"odd name", "development", "al ice:" + alice, "entry 1 of 1", nil},
		{"long name", "development", strings.Repeat("a", 33) + ":" + alice, "entry 1 of 1", nil},
		{"reserved name", "development", "Admin:" + alice, "PAYD_ADMIN_TOKEN", nil},
		{"repeated name", "development", "alice:" + alice + ",ALICE:" + bob, "named twice", nil},
		{"empty token", "development", "alice:" + alice + ",bob:", "entry 2 of 2 (bob)", nil},
		{"shared token", "development", "alice:" + alice + ",bob:" + alice, "same token as operator alice", nil},
		{"the admin token", "production", "alice:" + prod["PAYD_ADMIN_TOKEN"], "same token as PAYD_ADMIN_TOKEN", nil},
		{"weak in production", "production", "alice:" + alice + ",bob:changeme-changeme-changeme", "entry 2 of 2 (bob) must be a strong token", nil},
		{"repeated pattern in production", "production", "bob:" + strings.Repeat("ab12", 8), "entry 1 of 1 (bob) must be a strong token", nil},
		{"weak in development", "development", "bob:short", "", []string{"bob"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"PAYD_ENV": tt.env, "PAYD_ADMIN_TOKENS": tt.tokens}
			if tt.env == "production" {
				for k, v := range prod {
					env[k] = v
				}
			}
			c, err := loadConfig("serve", nil, func(k string) string { return env[k] }, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("loadConfig(PAYD_ADMIN_TOKENS=%q) = %v, want an error containing %q", tt.tokens, err, tt.wantErr)
				}
				for _, tok := range []string{alice, bob, "changeme-changeme-changeme", prod["PAYD_ADMIN_TOKEN"]} {
					if strings.Contains(err.Error(), tok) {
						t.Errorf("the error %q shows a token", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("loadConfig(PAYD_ADMIN_TOKENS=%q) = %v", tt.tokens, err)
			}
			var names []string
			for _, op := range c.operators {
				names = append(names, op.Name)
			}
			if strings.Join(names, ",") != strings.Join(tt.want, ",") {
				t.Errorf("operators = %v, want %v", names, tt.want)
			}
		})
	}
	c, err := loadConfig("serve", []string{"-admin-tokens", "carol:" + bob}, func(string) string { return "" }, io.Discard)
	if err != nil || len(c.operators) != 1 || c.operators[0].Name != "carol" || c.operators[0].Token != bob {
		t.Errorf("-admin-tokens carol:… = %+v, %v; want operator carol", c.operators, err)
	}
}

// TestConfigReconcileEvery: PAYD_RECONCILE_EVERY is off by default, takes
// a duration from 1s to 15 days (variable or flag), and refuses others.
func TestConfigReconcileEvery(t *testing.T) {
	for _, tt := range []struct {
		env, flag string
		want      time.Duration
		wantErr   bool
	}{
		{"", "", 0, false},
		{"0", "", 0, false},
		{"1h", "", time.Hour, false},
		{"1h", "15m", 15 * time.Minute, false},
		{"360h", "", 360 * time.Hour, false},
		{"500ms", "", 0, true},
		{"361h", "", 0, true},
		{"-1h", "", 0, true},
		{"hourly", "", 0, true},
	} {
		var args []string
		if tt.flag != "" {
			args = []string{"-reconcile-every", tt.flag}
		}
		c, err := loadConfig("serve", args, func(k string) string {
			return map[string]string{"PAYD_RECONCILE_EVERY": tt.env}[k]
		}, io.Discard)
		if tt.wantErr {
			if err == nil || !strings.Contains(err.Error(), "PAYD_RECONCILE_EVERY") {
				t.Errorf("PAYD_RECONCILE_EVERY=%q: err = %v, want one naming PAYD_RECONCILE_EVERY", tt.env, err)
			}
			continue
		}
		if err != nil || c.ReconcileEvery != tt.want {
			t.Errorf("PAYD_RECONCILE_EVERY=%q -reconcile-every=%q = %v, %v; want %v", tt.env, tt.flag, c.ReconcileEvery, err, tt.want)
		}
	}
}
