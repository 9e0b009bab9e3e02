package sandbox

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// DefaultDatabaseURL is where the sandbox keeps its state unless told
// otherwise (PAYD_SANDBOX_DATABASE_URL).
const DefaultDatabaseURL = "sqlite://sandbox.db"

// Config configures a sandbox Server. Zero fields take the defaults noted.
type Config struct {
	// DatabaseURL is sqlite://PATH or mysql://USER:PASS@HOST:PORT/DB
	// (default DefaultDatabaseURL).
	DatabaseURL string
	// WebhookURL receives the webhooks. Empty: events are still queued in the
	// outbox, durably, and delivered once a server with a URL runs.
	WebhookURL string
	// WebhookSecret is the Standard Webhooks secret ("whsec_" + base64)
	// shared with payd. Required when WebhookURL is set.
	WebhookSecret string

	// AsyncDelay is how long pm_async and pm_async_fail charges stay
	// pending, and how long after a pm_dispute charge its dispute opens
	// (default 2s).
	AsyncDelay time.Duration
	// AuthorizationTTL is how long a manual-capture charge's hold lasts
	// before it lapses (default DefaultAuthorizationTTL).
	AuthorizationTTL time.Duration
	// ChargeDelay holds every charge request this long after it arrives
	// and before the sandbox acts on it, and the request is then carried
	// out even if its client has given up meanwhile: a request delayed in
	// transit (a proxy, a queue, a loaded provider) that is processed late.
	// Zero (the default) acts at once.
	ChargeDelay time.Duration

	// Duplicates is how many times each event is delivered, every copy
	// with the same webhook-id (default 1).
	Duplicates int
	// Reorder shuffles each due batch, sends it concurrently and gives every
	// copy a random extra delay of up to ReorderWindow, so events arrive out
	// of order.
	Reorder bool
	// ReorderWindow bounds Reorder's random delay (default 1s).
	ReorderWindow time.Duration
	// WebhookDelay holds every event back this long before its first
	// delivery (default 0).
	WebhookDelay time.Duration
	// RetryBase is the first retry delay after a failed delivery; it doubles
	// with every attempt up to RetryMax (defaults 1s and 5m).
	RetryBase time.Duration
	// RetryMax caps the retry delay.
	RetryMax time.Duration
	// DeliveryTimeout bounds one webhook POST (default 5s).
	DeliveryTimeout time.Duration

	// PollInterval is how often the background workers look for due
	// deliveries, pending charges and due disputes (default 200ms).
	PollInterval time.Duration
	// BatchSize bounds the rows one worker pass handles (default 32).
	BatchSize int

	// HTTPClient sends the webhooks (default: a client of its own).
	HTTPClient *http.Client
	// Logger receives the sandbox's logs (default slog.Default()). It never
	// sees secrets or payment method data.
	Logger *slog.Logger
	// Clock tells the time (default time.Now); tests pin it to place charges
	// on a given day.
	Clock func() time.Time
}

// withDefaults fills zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.DatabaseURL == "" {
		c.DatabaseURL = DefaultDatabaseURL
	}
	setDuration(&c.AsyncDelay, 2*time.Second)
	setDuration(&c.AuthorizationTTL, DefaultAuthorizationTTL)
	setDuration(&c.ReorderWindow, time.Second)
	setDuration(&c.RetryBase, time.Second)
	setDuration(&c.RetryMax, 5*time.Minute)
	setDuration(&c.DeliveryTimeout, 5*time.Second)
	setDuration(&c.PollInterval, 200*time.Millisecond)
	if c.Duplicates <= 0 {
		c.Duplicates = 1
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 32
	}
	if c.RetryMax < c.RetryBase {
		c.RetryMax = c.RetryBase
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.WebhookURL != "" {
		u, err := url.Parse(c.WebhookURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c, fmt.Errorf("sandbox: webhook URL must be an absolute http(s) URL")
		}
		if c.WebhookSecret == "" {
			return c, fmt.Errorf("sandbox: a webhook secret is required to deliver webhooks")
		}
	}
	if c.WebhookSecret != "" {
		// Say what is wrong without echoing the secret.
		if !strings.HasPrefix(c.WebhookSecret, "whsec_") {
			return c, fmt.Errorf("sandbox: webhook secret must start with whsec_")
		}
		if _, err := standardwebhooks.NewWebhook(c.WebhookSecret); err != nil {
			return c, fmt.Errorf("sandbox: webhook secret must be whsec_ followed by base64")
		}
	}
	return c, nil
}

func setDuration(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// NewWebhookSecret returns a fresh random Standard Webhooks secret
// ("whsec_" + base64 of 32 random bytes), e.g. for a development default.
func NewWebhookSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := io.ReadFull(rand.Reader, b); err != nil {
		return "", fmt.Errorf("sandbox: webhook secret: %w", err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b), nil
}
