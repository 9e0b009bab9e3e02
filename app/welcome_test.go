package app

import (
	"bytes"
	"strings"
	"testing"
)

// TestSecretFlagKeepsEnvironment: with every secret setting in the
// environment, the secret reaches the config, and a flag still overrides it.
func TestSecretFlagKeepsEnvironment(t *testing.T) {
	env := map[string]string{}
	for name := range secretSettings {
		env[name] = "s3cr3t-" + strings.ToLower(name)
	}
	getenv := func(k string) string { return env[k] }
	var c Config
	fs, _ := c.flagSet("serve", getenv)
	if err := fs.Parse([]string{"-secret-key", "from-the-flag"}); err != nil {
		t.Fatal(err)
	}
	if c.AdminToken != env["PAYD_ADMIN_TOKEN"] || c.AdminTokens != env["PAYD_ADMIN_TOKENS"] || c.WebhookSecret != env["PAYD_WEBHOOK_SECRET"] || c.SecretKey != "from-the-flag" {
		t.Errorf("config = admin %q, tokens %q, webhook %q, key %q; want the environment's, the key from the flag",
			c.AdminToken, c.AdminTokens, c.WebhookSecret, c.SecretKey)
	}
}

// TestBannerMasksPassword: the development banner prints the database and
// provider URLs without their passwords.
func TestBannerMasksPassword(t *testing.T) {
	var b bytes.Buffer
	printWelcome(&b, Config{Env: "development", DatabaseURL: "mysql://payd:hunter2-Secret@db:3306/payd",
		ProviderURL: "https://acct:Provider-Pass@psp.example/v1"}, "http://127.0.0.1:8080")
	if strings.Contains(b.String(), "hunter2-Secret") || !strings.Contains(b.String(), "mysql://payd:xxxxx@db:3306/payd") ||
		strings.Contains(b.String(), "Provider-Pass") {
		t.Errorf("banner:\n%s\nwant the database URL with its password masked", b.String())
	}
}

// TestBannerNamesLandingPage: a developer who reads the banner learns the
// address of the page that links everything else.
func TestBannerNamesLandingPage(t *testing.T) {
	var b bytes.Buffer
	printWelcome(&b, Config{Env: "development", DatabaseURL: "sqlite://payd.db"}, "http://127.0.0.1:8080")
	if !strings.Contains(b.String(), "\n  start page: http://127.0.0.1:8080/ ") {
		t.Errorf("banner:\n%s\nwant a line naming the landing page, http://127.0.0.1:8080/", b.String())
	}
}

// TestBannerPrintsMerchantKey: in development a made-up merchant key is
// printed with the other made-up secrets; in production nothing is.
func TestBannerPrintsMerchantKey(t *testing.T) {
	cfg := Config{Env: "development", DatabaseURL: "sqlite://payd.db", secretsFile: "payd.secrets",
		generated: []string{"PAYD_MERCHANT_KEY"}}
	cfg.MerchantKey = "sk_made_up_0123456789abcdef0123"
	var b bytes.Buffer
	printWelcome(&b, cfg, "http://127.0.0.1:8080")
	if !strings.Contains(b.String(), "  PAYD_MERCHANT_KEY="+cfg.MerchantKey+"\n") {
		t.Errorf("banner:\n%s\nwant the made-up PAYD_MERCHANT_KEY", b.String())
	}
	cfg.Env = "production"
	b.Reset()
	printWelcome(&b, cfg, "http://127.0.0.1:8080")
	if strings.Contains(b.String(), cfg.MerchantKey) {
		t.Errorf("production banner:\n%s\nshows the merchant key", b.String())
	}
}
