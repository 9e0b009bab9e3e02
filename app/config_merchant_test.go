package app

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigMerchantKeys: PAYD_MERCHANT_KEY is required and strong in
// production and unlike every other secret; PAYD_MERCHANT_KEYS is parsed
// into named keys, and a malformed entry, a reserved or repeated name, a
// key shared with another merchant key or any other secret is refused in
// every environment, a weak key in production. No error carries a key.
func TestConfigMerchantKeys(t *testing.T) {
	const shop, erp = "sk_7Hq2xWv9Lr4Kp8Zt3Ny6Bc1Md5Fg0Js", "sk_Qe3Rt7Yu1Io5Pa9Sd2Fg6Hj0Kl4Zx8Cv"
	prod := map[string]string{
		"PAYD_ENV": "production", "PAYD_ADMIN_TOKEN": "adm_9f8e7d6c5b4a39281716151413121110",
		"PAYD_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "PAYD_SECRET_KEY": "k-4f0c1a9e8b7d6c5e4f3a2b1c0d9e8f7a",
		"PAYD_MERCHANT_KEY": "sk_9d2f4a6c8e0b1d3f5a7c9e1b3d5f7a9c",
	}
	tests := []struct {
		name, env string
		set       map[string]string
		wantErr   string
		want      []string // the named keys
	}{
		{"production, one key", "production", nil, "", nil},
		{"production, named keys", "production", map[string]string{"PAYD_MERCHANT_KEYS": "shop:" + shop + ", erp:" + erp}, "", []string{"shop", "erp"}},
		{"production, none", "production", map[string]string{"PAYD_MERCHANT_KEY": ""}, "PAYD_MERCHANT_KEY must be set to a strong secret", nil},
		{"production, weak", "production", map[string]string{"PAYD_MERCHANT_KEY": "sk_changeme-changeme-changeme"}, "PAYD_MERCHANT_KEY must be set to a strong secret", nil},
		{"production, short", "production", map[string]string{"PAYD_MERCHANT_KEY": "sk_4f0c1a9e"}, "PAYD_MERCHANT_KEY must be set to a strong secret", nil},
		{"production, a pattern", "production", map[string]string{"PAYD_MERCHANT_KEY": "sk_" + strings.Repeat("ab12", 8)}, "PAYD_MERCHANT_KEY must be set to a strong secret", nil},
		{"no sk_", "development", map[string]string{"PAYD_MERCHANT_KEY": "9d2f4a6c8e0b1d3f5a7c9e1b3d5f7a9c"}, "PAYD_MERCHANT_KEY must start with sk_", nil},
		{"the admin token", "production", map[string]string{"PAYD_ADMIN_TOKEN": "sk_9d2f4a6c8e0b1d3f5a7c9e1b3d5f7a9c"}, "PAYD_MERCHANT_KEY must differ from PAYD_ADMIN_TOKEN", nil},
		{"the secret key", "production", map[string]string{"PAYD_SECRET_KEY": "sk_9d2f4a6c8e0b1d3f5a7c9e1b3d5f7a9c"}, "PAYD_MERCHANT_KEY must differ from PAYD_SECRET_KEY", nil},
		{"an operator's token", "production", map[string]string{"PAYD_ADMIN_TOKENS": "bob:" + shop, "PAYD_MERCHANT_KEYS": "shop:" + shop}, "merchant key shop must differ from PAYD_ADMIN_TOKENS (operator bob)", nil},
		{"not sk_ in PAYD_MERCHANT_KEYS", "development", map[string]string{"PAYD_NOTIFY_URL": "https://shop.example/hook", "PAYD_NOTIFY_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
			"PAYD_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSx", "PAYD_MERCHANT_KEYS": "shop:whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "entry 1 of 1 (shop) must be a key sk_", nil},
		{"no colon", "development", map[string]string{"PAYD_MERCHANT_KEYS": "shop" + shop}, "entry 1 of 1 must be name:sk_", nil},
		{"odd name", "development", map[string]string{"PAYD_MERCHANT_KEYS": "sh op:" + shop}, "entry 1 of 1 must be name:sk_", nil},
		{"reserved name", "development", map[string]string{"PAYD_MERCHANT_KEYS": "Default:" + shop}, "is PAYD_MERCHANT_KEY's", nil},
		{"repeated name", "development", map[string]string{"PAYD_MERCHANT_KEYS": "shop:" + shop + ",SHOP:" + erp}, "named twice", nil},
		{"empty key", "development", map[string]string{"PAYD_MERCHANT_KEYS": "shop:" + shop + ",erp:"}, "entry 2 of 2 (erp) must be a key sk_", nil},
		{"shared key", "development", map[string]string{"PAYD_MERCHANT_KEYS": "shop:" + shop + ",erp:" + shop}, "same key as merchant key shop", nil},
		{"PAYD_MERCHANT_KEY's", "production", map[string]string{"PAYD_MERCHANT_KEYS": "shop:" + prod["PAYD_MERCHANT_KEY"]}, "same key as PAYD_MERCHANT_KEY", nil},
		{"weak in production", "production", map[string]string{"PAYD_MERCHANT_KEYS": "shop:" + shop + ",erp:sk_changeme-changeme-changeme"}, "entry 2 of 2 (erp) must be a strong key", nil},
		{"weak in development", "development", map[string]string{"PAYD_MERCHANT_KEYS": "erp:sk_short"}, "", []string{"erp"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"PAYD_ENV": tt.env}
			if tt.env == "production" {
				for k, v := range prod {
					env[k] = v
				}
			}
			for k, v := range tt.set {
				env[k] = v
			}
			c, err := loadConfig("serve", nil, func(k string) string { return env[k] }, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("loadConfig(%v) = %v, want an error containing %q", tt.set, err, tt.wantErr)
				}
				for _, key := range []string{shop, erp, prod["PAYD_MERCHANT_KEY"], "changeme-changeme"} {
					if strings.Contains(err.Error(), key) {
						t.Errorf("the error %q shows a key", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("loadConfig(%v) = %v, want nil", tt.set, err)
			}
			var got []string
			for _, m := range c.merchants {
				got = append(got, m.Name)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("merchant keys = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestMerchantKeyKeptInDevelopment: in development a missing
// PAYD_MERCHANT_KEY is made up (sk_...), kept in the secrets file with the
// other development secrets, and the same one is read back at the next
// start; a key set in the environment wins and is not written.
func TestMerchantKeyKeptInDevelopment(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"PAYD_DATABASE_URL": "sqlite://" + filepath.Join(dir, "payd.db")}
	getenv := func(k string) string { return env[k] }
	first, err := loadConfig("serve", nil, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.keepDevSecrets(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.MerchantKey, "sk_") || len(first.MerchantKey) < 24 {
		t.Fatalf("made-up merchant key = %q, want sk_ and random", first.MerchantKey)
	}
	kept, err := os.ReadFile(filepath.Join(dir, "payd.secrets"))
	if err != nil || !strings.Contains(string(kept), "PAYD_MERCHANT_KEY="+first.MerchantKey+"\n") {
		t.Fatalf("payd.secrets = %q, %v; want it to keep PAYD_MERCHANT_KEY", kept, err)
	}
	second, err := loadConfig("serve", nil, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := second.keepDevSecrets(); err != nil {
		t.Fatal(err)
	}
	if second.MerchantKey != first.MerchantKey {
		t.Errorf("second start's merchant key differs from the kept one")
	}
	env["PAYD_MERCHANT_KEY"] = "sk_given0123456789abcdef0123"
	third, err := loadConfig("serve", nil, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := third.keepDevSecrets(); err != nil {
		t.Fatal(err)
	}
	if third.MerchantKey != env["PAYD_MERCHANT_KEY"] {
		t.Errorf("a merchant key set in the environment was replaced by the kept one")
	}
}
