package app

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
	"github.com/payd/payd/telemetry"
)

// Config is every setting of payd. Each has an environment variable (a
// name operators rely on, never renamed: docs/guarantees.md#configuration)
// and a flag of the same name that overrides it.
type Config struct {
	Env                string
	Addr               string
	DatabaseURL        string
	AdminToken         string
	WebhookSecret      string
	SecretKey          string
	ProviderURL        string
	SandboxAddr        string
	SandboxDatabaseURL string
	SandboxWebhookURL  string
	IdempotencyTTL     time.Duration
	Retention          time.Duration // PAYD_RETENTION: inbox rows, deliveries and events older than this go (0: kept)
	InflightWait       time.Duration
	Lease              time.Duration
	OrderTTL           time.Duration
	// CaptureMethod is a buyer's order's capture method
	// (PAYD_CAPTURE_METHOD), AuthorizationTTL how long a hold lasts
	// (PAYD_AUTHORIZATION_TTL).
	CaptureMethod     string
	AuthorizationTTL  time.Duration
	MaxAmount         string
	LogLevel          string
	ReadTimeout       time.Duration // a whole request, body included, must arrive within it
	WriteTimeout      time.Duration // a reply must be written within it (event streams excepted)
	IdleTimeout       time.Duration // a keep-alive connection may wait this long for its next request
	ShutdownDelay     time.Duration // after SIGTERM, /readyz answers 503 this long before the listener drains (0: at once)
	MetricsAddr       string        // empty: /metrics on the main listener; else its own listener here
	PprofAddr         string        // empty: no profiler; else net/http/pprof on its own listener here
	MaxStreams        int           // open event streams one customer may hold
	maxStreams        string
	SandboxAsyncDelay time.Duration
	// SandboxAuthorizationTTL is how long the sandbox's holds last
	// (PAYD_SANDBOX_AUTHORIZATION_TTL).
	SandboxAuthorizationTTL time.Duration
	SandboxDuplicates       string
	SandboxReorder          string
	Fault                   string // test-only: kill the process at this point of a payment
	Mutant                  string // test-only: run with this guard removed, to prove the tests notice (repository.Mutate)
	NotifyVia               string // test-only: deliveries connect to this host:port whatever the endpoint's URL (notify.DialVia)
	ProviderTimeout         time.Duration

	operatorConfig                   // PAYD_ADMIN_TOKENS, PAYD_RECONCILE_EVERY (config_operators.go)
	Stripe         stripeConfig      // PAYD_PROVIDER and STRIPE_* (stripe.go)
	RedisURL       string            // empty: no Redis (ADR 0018)
	limitsConfig                     // PAYD_RATE_LIMIT, PAYD_WEBHOOK_RATE_LIMIT, PAYD_TRUSTED_PROXIES (config_limits.go)
	notifyConfig                     // PAYD_NOTIFY_* (config_notify.go, ADR 0053)
	merchantConfig                   // PAYD_MERCHANT_KEY, PAYD_MERCHANT_KEYS (config_merchant.go, ADR 0058)
	tracing        telemetry.Tracing // set by Build: Wire instruments the Redis client with it (ADR 0035)

	generated   []string          // names of secrets made up at start (development only)
	secretsFile string            // where the made-up secrets are kept (development only; ADR 12)
	flags       map[string]string // variable → flag, of the settings the command line gave
}

// setting ties one config field to its variable, flag and default.
type setting struct {
	env, flag, def, usage string
	str                   *string
	dur                   *time.Duration
}

// secretSettings are the settings whose values are secrets. This is the
// one place a setting is marked secret: its flag's help never shows the
// value taken from the environment (shownDefault), so `payd serve -h` on a
// configured host prints no secret.
var secretSettings = map[string]bool{
	"PAYD_ADMIN_TOKEN":      true,
	"PAYD_ADMIN_TOKENS":     true,
	"PAYD_WEBHOOK_SECRET":   true,
	"PAYD_SECRET_KEY":       true,
	"PAYD_NOTIFY_SECRET":    true,
	"PAYD_MERCHANT_KEY":     true,
	"PAYD_MERCHANT_KEYS":    true,
	"STRIPE_SECRET_KEY":     true,
	"STRIPE_WEBHOOK_SECRET": true,
	// URLs may carry a password (mysql://user:pass@…, redis://:pass@…):
	// help shows them with the password masked.
	"PAYD_DATABASE_URL":         true,
	"PAYD_SANDBOX_DATABASE_URL": true,
	"PAYD_REDIS_URL":            true,
}

// urlSettings are the settings whose values are URLs, secret or not: any
// may carry a password (https://user:pass@…, ?token=…), so help shows
// each through maskURL, as the banner does, never as written.
var urlSettings = map[string]bool{
	"PAYD_DATABASE_URL": true, "PAYD_SANDBOX_DATABASE_URL": true, "PAYD_REDIS_URL": true,
	"PAYD_PROVIDER_URL": true, "PAYD_SANDBOX_WEBHOOK_URL": true, "STRIPE_API_BASE": true, "PAYD_NOTIFY_URL": true,
}

// madeUpSecrets are the secrets payd makes up in development when they are
// not set (check), and requires in production.
var madeUpSecrets = map[string]bool{"PAYD_ADMIN_TOKEN": true, "PAYD_WEBHOOK_SECRET": true, "PAYD_SECRET_KEY": true, "PAYD_MERCHANT_KEY": true}

// shownDefault is what help prints as the default of secret or URL
// setting env whose value (from the environment, else its default) is
// val: a URL with its password masked, never a secret.
func shownDefault(env, val string) string {
	switch {
	case urlSettings[env] && val != "":
		return shownURL(env, val)
	case val != "":
		return "set in " + env + ", not shown"
	case madeUpSecrets[env]:
		return "made up at start in development, required in production"
	}
	return ""
}

// shownURL is URL val of setting env as help shows it, quoted, with its
// password masked; of a value that is not a URL nothing is shown.
func shownURL(env, val string) string {
	if m, ok := maskURL(val); ok {
		return fmt.Sprintf("%q", m)
	}
	return "set in " + env + ", not shown: not a URL"
}

// URLVar declares on fs flag name, a URL written into dst, defaulting to
// val, whose help shows val as every URL setting's is shown (masked), so
// a password in it never reaches the screen. env names where val came
// from, for a value that is not a URL.
func URLVar(fs *flag.FlagSet, dst *string, name, val, env, usage string) {
	*dst = val
	shown := ""
	if val != "" {
		shown = shownURL(env, val)
	}
	fs.Var(&secretFlag{dst: dst, shown: shown}, name, usage)
}

// secretFlag is the flag of a secret or URL setting: it writes the value
// given on the command line into dst, which already holds the
// environment's, and shows as its default only what shownDefault allows.
type secretFlag struct {
	dst   *string
	shown string
}

func (f *secretFlag) String() string {
	if f == nil {
		return ""
	}
	return f.shown
}

func (f *secretFlag) Set(v string) error {
	*f.dst = v
	return nil
}

func (c *Config) settings(sub string) []setting {
	sandboxAddr := "127.0.0.1:0"
	if sub == "sandbox" {
		sandboxAddr = "127.0.0.1:8081"
	}
	return append([]setting{
		{"PAYD_ENV", "env", "development", "development or production", &c.Env, nil},
		{"PAYD_ADDR", "addr", "127.0.0.1:8080", "listen address (:0 picks a free port)", &c.Addr, nil},
		{"PAYD_DATABASE_URL", "database-url", "sqlite://payd.db", "sqlite://PATH or mysql://USER:PASS@HOST:PORT/DB", &c.DatabaseURL, nil},
		{"PAYD_ADMIN_TOKEN", "admin-token", "", "admin bearer token", &c.AdminToken, nil},
		{"PAYD_WEBHOOK_SECRET", "webhook-secret", "", "Standard Webhooks secret whsec_...", &c.WebhookSecret, nil},
		{"PAYD_SECRET_KEY", "secret-key", "", "key that derives customer tokens and seals stored secrets", &c.SecretKey, nil},
		{"PAYD_PROVIDER_URL", "provider-url", "", "provider API base URL; empty starts the sandbox in-process", &c.ProviderURL, nil},
		{"PAYD_SANDBOX_ADDR", "sandbox-addr", sandboxAddr, "where the sandbox listens", &c.SandboxAddr, nil},
		{"PAYD_SANDBOX_DATABASE_URL", "sandbox-database-url", "sqlite://sandbox.db", "the sandbox's own database", &c.SandboxDatabaseURL, nil},
		{"PAYD_SANDBOX_WEBHOOK_URL", "sandbox-webhook-url", "", "where the sandbox delivers webhooks (in-process: payd's own)", &c.SandboxWebhookURL, nil},
		{"PAYD_IDEMPOTENCY_TTL", "idempotency-ttl", "24h", "idempotency record retention", nil, &c.IdempotencyTTL},
		{"PAYD_RETENTION", "retention", "30d", "applied provider webhooks, finished deliveries to the shop and their events are deleted after this (0: kept forever)", nil, &c.Retention},
		{"PAYD_INFLIGHT_WAIT", "inflight-wait", "2s", "how long a duplicate waits for the original", nil, &c.InflightWait},
		{"PAYD_LEASE", "lease", "30s", "in-flight lease before recovery may take over", nil, &c.Lease},
		{"PAYD_ORDER_TTL", "order-ttl", "30m", "pending orders expire after this", nil, &c.OrderTTL},
		{"PAYD_CAPTURE_METHOD", "capture-method", "automatic", "how a buyer's order takes its money: automatic (charged at once) or manual (held until the merchant captures it)", &c.CaptureMethod, nil},
		{"PAYD_AUTHORIZATION_TTL", "authorization-ttl", "7d", "how long a manual-capture order's hold lasts before payd voids it (never past the provider's own limit)", nil, &c.AuthorizationTTL},
		{"PAYD_MAX_AMOUNT", "max-amount", "1000000", "largest order total, in major units", &c.MaxAmount, nil},
		{"PAYD_LOG_LEVEL", "log-level", "info", "debug, info, warn or error", &c.LogLevel, nil},
		{"PAYD_READ_TIMEOUT", "read-timeout", "30s", "the longest a client may take to send one request, body included", nil, &c.ReadTimeout},
		{"PAYD_WRITE_TIMEOUT", "write-timeout", "90s", "the longest one reply may take, handling included (event streams excepted)", nil, &c.WriteTimeout},
		{"PAYD_IDLE_TIMEOUT", "idle-timeout", "60s", "how long an idle keep-alive connection stays open", nil, &c.IdleTimeout},
		{"PAYD_SHUTDOWN_DELAY", "shutdown-delay", "5s", "after SIGTERM, serve this long with /readyz answering 503 before the listener drains (0: drain at once)", nil, &c.ShutdownDelay},
		{"PAYD_METRICS_ADDR", "metrics-addr", "", "a separate listen address for /metrics (empty: /metrics on the main listener)", &c.MetricsAddr, nil},
		{"PAYD_PPROF_ADDR", "pprof", "", "serve the Go profiler (/debug/pprof/) on this address, never the main one (empty: off; may equal PAYD_METRICS_ADDR)", &c.PprofAddr, nil},
		{"PAYD_MAX_STREAMS_PER_CUSTOMER", "max-streams-per-customer", "5", "open event streams one customer may hold; past it 429", &c.maxStreams, nil},
		{"PAYD_SANDBOX_ASYNC_DELAY", "sandbox-async-delay", "2s", "how long pm_async charges stay pending", nil, &c.SandboxAsyncDelay},
		{"PAYD_SANDBOX_AUTHORIZATION_TTL", "sandbox-authorization-ttl", "7d", "how long the sandbox holds a manual-capture charge's money before the hold lapses", nil, &c.SandboxAuthorizationTTL},
		{"PAYD_SANDBOX_DUPLICATES", "sandbox-duplicates", "1", "the sandbox delivers each webhook this many times", &c.SandboxDuplicates, nil},
		{"PAYD_SANDBOX_REORDER", "sandbox-reorder", "false", "the sandbox shuffles and delays webhook deliveries", &c.SandboxReorder, nil},
		{"PAYD_PROVIDER_TIMEOUT", "provider-timeout", "10s", "deadline of one provider call; PAYD_LEASE must be longer", nil, &c.ProviderTimeout},
		{"PAYD_REDIS_URL", "redis-url", "", "Redis in front of the database: redis://host:port/db, a cluster as redis://h1:p1?addr=h2:p2&addr=h3:p3 (empty: none)", &c.RedisURL, nil},
	}, append(append(append(append(testSettings(c), c.operatorSettings()...), c.merchantSettings()...), stripeSettings(c)...), append(c.limitSettings(), c.notifySettings()...)...)...)
}

// flagsOf lists the settings a subcommand other than serve takes as flags
// (serve takes them all): each subcommand's help shows only its own. The
// others still read their variables, so checks see the same values.
var flagsOf = map[string]map[string]bool{
	"sandbox": {"PAYD_ENV": true, "PAYD_WEBHOOK_SECRET": true, "PAYD_SANDBOX_ADDR": true, "PAYD_SANDBOX_DATABASE_URL": true,
		"PAYD_SANDBOX_WEBHOOK_URL": true, "PAYD_SANDBOX_ASYNC_DELAY": true, "PAYD_SANDBOX_DUPLICATES": true,
		"PAYD_SANDBOX_AUTHORIZATION_TTL": true,
		"PAYD_SANDBOX_REORDER":           true, "PAYD_LOG_LEVEL": true},
	"migrate": {"PAYD_ENV": true, "PAYD_DATABASE_URL": true, "PAYD_LOG_LEVEL": true},
}

// flagSet declares the flags of subcommand sub on c, each defaulting to its
// variable, else its default; durations are returned as text to parse.
func (c *Config) flagSet(sub string, getenv func(string) string) (*flag.FlagSet, map[string]*string) {
	fs := flag.NewFlagSet("payd "+sub, flag.ContinueOnError)
	durs := map[string]*string{}
	for _, s := range c.settings(sub) {
		val := s.def
		if v := getenv(s.env); v != "" {
			val = v
		}
		if only, ok := flagsOf[sub]; ok && !only[s.env] {
			if s.str != nil {
				*s.str = val
			} else {
				durs[s.env] = &val
			}
			continue
		}
		usage := fmt.Sprintf("%s (env %s)", s.usage, s.env)
		if s.str != nil && (secretSettings[s.env] || urlSettings[s.env]) {
			*s.str = val
			fs.Var(&secretFlag{dst: s.str, shown: shownDefault(s.env, val)}, s.flag, usage)
			continue
		}
		if s.str != nil {
			fs.StringVar(s.str, s.flag, val, usage)
			continue
		}
		durs[s.env] = fs.String(s.flag, val, usage)
	}
	return fs, durs
}

// LoadConfig reads the environment, then the flags of subcommand sub
// (serve, migrate or sandbox): parse parses the command line into the flag
// set, and its error (help shown, a wrong flag) is returned as it is.
// Settings are checked as they would be used; an error names a setting
// given as a flag by its flag (-lease), as a *FlagError, and one from the
// environment by its variable (PAYD_LEASE).
func LoadConfig(sub string, getenv func(string) string, parse func(*flag.FlagSet) error) (Config, error) {
	var c Config
	fs, durs := c.flagSet(sub, getenv)
	if err := parse(fs); err != nil {
		return c, err
	}
	envOf := map[string]string{}
	for _, s := range c.settings(sub) {
		envOf[s.flag] = s.env
	}
	flagOf := map[string]string{} // variable → flag, of the settings given as flags
	fs.Visit(func(f *flag.Flag) { flagOf[envOf[f.Name]] = "-" + f.Name })
	c.flags = flagOf
	return c, byFlag(c.load(sub, getenv, durs), flagOf)
}

// load parses the durations and checks every setting.
func (c *Config) load(sub string, getenv func(string) string, durs map[string]*string) error {
	for _, s := range c.settings(sub) {
		if s.dur == nil {
			continue
		}
		d, err := parseDuration(*durs[s.env])
		if err != nil {
			return fmt.Errorf("%s: %q is not a duration such as 30s or 30d", s.env, *durs[s.env])
		}
		if d < 0 {
			return fmt.Errorf("%s: %q is negative, want 0 or a duration such as 30s", s.env, *durs[s.env])
		}
		*s.dur = d
	}
	if err := c.check(sub); err != nil {
		return err
	}
	if sub == "serve" { // tracing is the OTEL_* variables' alone (ADR 0035)
		return telemetry.CheckTracingEnv(getenv)
	}
	return nil
}

// FlagError is a setting's error that names a setting given on the
// command line, by its flag: the command line is wrong, not the
// environment.
type FlagError struct {
	msg string
	err error // the error as the check wrote it, naming variables
}

func (e *FlagError) Error() string { return e.msg }
func (e *FlagError) Unwrap() error { return e.err }

// byFlag renames, in err, each variable of a setting given as a flag to
// that flag (PAYD_LEASE → -lease): every check names the variables it
// checks, and the user reads the name they typed.
func byFlag(err error, flagOf map[string]string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for env, f := range flagOf {
		// Whole names only: PAYD_ADMIN_TOKEN is not the start of PAYD_ADMIN_TOKENS.
		msg = regexp.MustCompile(`\b`+regexp.QuoteMeta(env)+`\b`).ReplaceAllLiteralString(msg, f)
	}
	if msg == err.Error() {
		return err
	}
	return &FlagError{msg: msg, err: err}
}

// settingName names the setting of variable env as it was given: by its
// flag when the command line gave it (-metrics-addr), else by the variable.
func (c Config) settingName(env string) string {
	if f, ok := c.flags[env]; ok {
		return f
	}
	return env
}

// FlagSet is the flags of subcommand sub with their defaults, for its help.
func FlagSet(sub string) *flag.FlagSet {
	var c Config
	fs, _ := c.flagSet(sub, func(string) string { return "" })
	return fs
}

// weakMarkers are words that give a placeholder secret away.
var weakMarkers = []string{"changeme", "change-me", "change_me", "example", "placeholder", "insecure", "development", "secret123"}

// check refuses unsafe settings. In production every secret the subcommand
// uses must be set and not a placeholder; in development missing secrets
// are made up. The sandbox holds only the webhook secret: a provider never
// needs payd's admin token or secret key.
func (c *Config) check(sub string) error {
	if c.Env != "development" && c.Env != "production" {
		return fmt.Errorf("PAYD_ENV must be development or production, not %q", c.Env)
	}
	if m, err := decimal.NewFromString(c.MaxAmount); err != nil || !m.IsPositive() {
		return fmt.Errorf("PAYD_MAX_AMOUNT must be a positive decimal, not %q", c.MaxAmount)
	}
	if c.Fault != "" && c.Env == "production" {
		return errors.New("PAYD_TEST_FAULT is for tests and may not be set in production")
	}
	if c.Mutant != "" && c.Env == "production" {
		return errors.New("PAYD_TEST_MUTANT is for tests and may not be set in production")
	}
	if c.NotifyVia != "" && c.Env == "production" {
		return errors.New("PAYD_TEST_NOTIFY_VIA is for tests and may not be set in production")
	}
	if m := domain.CaptureMethod(c.CaptureMethod); !m.Valid() {
		return fmt.Errorf("PAYD_CAPTURE_METHOD must be automatic or manual, not %q", c.CaptureMethod)
	}
	if c.AuthorizationTTL <= 0 {
		return errors.New("PAYD_AUTHORIZATION_TTL must be a positive duration such as 7d")
	}
	if c.Lease <= 0 || c.IdempotencyTTL <= c.Lease {
		return errors.New("PAYD_LEASE must be positive and shorter than PAYD_IDEMPOTENCY_TTL")
	}
	if err := c.checkLease(); err != nil {
		return err
	}
	secrets := []struct {
		name   string
		val    *string
		prefix string
	}{
		{"PAYD_ADMIN_TOKEN", &c.AdminToken, "adm_"},
		{"PAYD_WEBHOOK_SECRET", &c.WebhookSecret, "whsec_"},
		{"PAYD_SECRET_KEY", &c.SecretKey, ""},
		{"PAYD_MERCHANT_KEY", &c.MerchantKey, merchantKeyPrefix},
	}
	for _, s := range secrets {
		if sub == "sandbox" && s.name != "PAYD_WEBHOOK_SECRET" || sub == "migrate" {
			continue
		}
		if c.Env == "production" {
			if err := checkSecret(s.name, *s.val); err != nil {
				return err
			}
			continue
		}
		if *s.val == "" {
			*s.val = s.prefix + randomSecret(s.prefix)
			c.generated = append(c.generated, s.name)
		}
	}
	for _, s := range webhookSecrets(c.WebhookSecret) {
		if !strings.HasPrefix(s, "whsec_") {
			return errors.New("PAYD_WEBHOOK_SECRET must be one or more whsec_... secrets separated by spaces")
		}
	}
	if err := c.checkOperators(sub); err != nil {
		return err
	}
	if err := c.checkStripe(sub); err != nil {
		return err
	}
	if err := c.checkSecretKeyAlone(sub); err != nil {
		return err
	}
	if err := c.checkLimits(); err != nil {
		return err
	}
	if err := c.checkNotify(sub); err != nil {
		return err
	}
	if err := c.checkMerchants(sub); err != nil {
		return err
	}
	if err := c.checkURLs(sub); err != nil {
		return err
	}
	if err := c.checkAddrs(sub); err != nil {
		return err
	}
	if sub == "sandbox" || c.inProcessSandbox(sub) {
		if _, _, err := sandboxKnobs(c); err != nil {
			return err
		}
	}
	return c.checkSettings()
}

// checkLease enforces the in-flight rule (ADR 9): a charge request may
// reach the provider until PAYD_PROVIDER_TIMEOUT has passed, and a margin
// after, and the request that sends it holds the attempt that long. A lease
// that ends sooner would let a retry or the recoverer take a charge still
// in flight for one that never happened.
func (c *Config) checkLease() error {
	if c.ProviderTimeout <= 0 {
		return errors.New("PAYD_PROVIDER_TIMEOUT must be positive")
	}
	margin := service.InFlightMargin(c.ProviderTimeout)
	if c.Lease <= c.ProviderTimeout+margin {
		return fmt.Errorf("PAYD_LEASE (%v) must be longer than PAYD_PROVIDER_TIMEOUT (%v) plus a margin of %v: a charge may still be in flight until then",
			c.Lease, c.ProviderTimeout, margin)
	}
	return nil
}

func weakSecret(v string) bool {
	if len(v) < 24 {
		return true
	}
	lower := strings.ToLower(v)
	for _, m := range weakMarkers {
		if strings.Contains(lower, m) {
			return true
		}
	}
	return false
}

// randomSecret makes up a development secret: base64 for a Standard
// Webhooks secret (the format requires it), hex otherwise.
func randomSecret(prefix string) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	if prefix == "whsec_" {
		return base64.StdEncoding.EncodeToString(b)
	}
	return hex.EncodeToString(b)
}

// webhookSecrets splits PAYD_WEBHOOK_SECRET: several secrets, separated by
// spaces or commas, are all accepted on incoming webhooks (rotation); the
// first is the one the in-process sandbox signs with.
func webhookSecrets(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' })
}

// SecretSettings names the settings whose values are secrets, sorted.
func SecretSettings() []string {
	return slices.Sorted(maps.Keys(secretSettings))
}

// parseDuration is time.ParseDuration, and whole days as "30d".
func parseDuration(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 365*100 {
			return 0, fmt.Errorf("%q is not a number of days", v)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(v)
}
