package app

import (
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/payd/payd/redisx"
	"github.com/payd/payd/service"
)

// minSecretBytes is the least a Standard Webhooks secret may decode to,
// and the least length of an admin token or secret key: 192 bits.
const minSecretBytes = 24

// checkSecret refuses, in production, a secret an attacker could guess. A
// webhook setting may list several whsec_ secrets (rotation): each one is
// checked, since payd accepts a signature by any of them.
func checkSecret(name, val string) error {
	if name != "PAYD_WEBHOOK_SECRET" {
		if weakSecret(val) || lowEntropy([]byte(val)) {
			return fmt.Errorf("%s must be set to a strong secret (24+ random characters, not a placeholder or a repeated pattern) when PAYD_ENV=production", name)
		}
		return nil
	}
	secrets := webhookSecrets(val)
	if len(secrets) == 0 {
		return fmt.Errorf("%s must be set to one or more whsec_... secrets when PAYD_ENV=production", name)
	}
	for i, s := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		if err != nil || len(key) < minSecretBytes || lowEntropy(key) || weakSecret(s) {
			// The position, never the secret, goes into the message.
			return fmt.Errorf("%s: secret %d of %d must be whsec_ and the base64 of at least %d random bytes when PAYD_ENV=production", name, i+1, len(secrets), minSecretBytes)
		}
	}
	return nil
}

// checkSecretKeyAlone refuses, in production, a PAYD_SECRET_KEY that is
// also another secret payd holds: an admin or operator token, or a webhook
// secret. Whoever holds that other secret (an operator, the provider, the
// sandbox's host) would hold the key that seals stored replies and signs
// customer tokens. The message names the other setting, never the secret.
func (c *Config) checkSecretKeyAlone(sub string) error {
	if c.Env != "production" || sub == "sandbox" || sub == "migrate" || c.SecretKey == "" {
		return nil
	}
	others := c.heldSecrets(heldSecret{"PAYD_ADMIN_TOKEN", c.AdminToken})
	for _, o := range others {
		if o.val != "" && subtle.ConstantTimeCompare([]byte(o.val), []byte(c.SecretKey)) == 1 {
			return fmt.Errorf("PAYD_SECRET_KEY must differ from %s when PAYD_ENV=production: each secret has its own holder", o.name)
		}
	}
	return nil
}

// lowEntropy reports a secret made of few distinct symbols or of one short
// unit repeated (aaaa…, abab…, ab12ab12…): long, yet easy to guess.
func lowEntropy(b []byte) bool {
	distinct := map[byte]bool{}
	for _, c := range b {
		distinct[c] = true
	}
	if len(distinct) < 8 {
		return true
	}
	for period := 1; period <= len(b)/2; period++ {
		repeats := true
		for i := period; i < len(b) && repeats; i++ {
			repeats = b[i] == b[i-period]
		}
		if repeats {
			return true
		}
	}
	return false
}

// checkSettings refuses, in every environment, settings that would let
// payd start and then fail at its first use of them.
func (c *Config) checkSettings() error {
	if c.ReadTimeout <= 0 || c.WriteTimeout <= 0 || c.IdleTimeout <= 0 {
		return errors.New("PAYD_READ_TIMEOUT, PAYD_WRITE_TIMEOUT and PAYD_IDLE_TIMEOUT must be positive: a connection without them is held by a slow client forever")
	}
	// A pay call waits for one provider call (PAYD_PROVIDER_TIMEOUT) and may
	// settle after it: it must be able to answer before the write deadline
	// cuts the connection, or the client sees a reset for a payment made.
	if m := service.InFlightMargin(c.ProviderTimeout); c.ProviderTimeout > 0 && c.WriteTimeout <= c.ProviderTimeout+m {
		return fmt.Errorf("PAYD_WRITE_TIMEOUT (%v) must be longer than PAYD_PROVIDER_TIMEOUT (%v) plus a margin of %v: a pay call must be able to answer",
			c.WriteTimeout, c.ProviderTimeout, m)
	}
	for _, u := range []struct{ name, val string }{
		{"PAYD_PROVIDER_URL", c.ProviderURL},
		{"PAYD_SANDBOX_WEBHOOK_URL", c.SandboxWebhookURL},
	} {
		if u.val == "" {
			continue
		}
		p, err := url.Parse(u.val)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("%s must be an http:// or https:// URL with a host, not %s", u.name, notURL(u.val))
		}
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("PAYD_LOG_LEVEL must be debug, info, warn or error, not %q", c.LogLevel)
	}
	n, err := strconv.Atoi(c.maxStreams)
	if err != nil || n < 1 {
		return fmt.Errorf("PAYD_MAX_STREAMS_PER_CUSTOMER must be a whole number of at least 1, not %q", c.maxStreams)
	}
	c.MaxStreams = n
	for _, a := range []struct{ name, val, example string }{
		{"PAYD_METRICS_ADDR", c.MetricsAddr, "127.0.0.1:9090"},
		{"PAYD_PPROF_ADDR", c.PprofAddr, "127.0.0.1:6060"},
	} {
		if err := checkHostPort(a.name, a.val, a.example); a.val != "" && err != nil {
			return err
		}
	}
	if _, port, _ := net.SplitHostPort(c.PprofAddr); c.PprofAddr != "" && c.PprofAddr == c.Addr && port != "0" { // :0 picks a port of its own
		return errors.New("PAYD_PPROF_ADDR must differ from PAYD_ADDR: the profiler is never served on the public listener")
	}
	return nil
}

// checkAddrs refuses, before anything is opened, a listen address of
// payd's or of its sandbox that is not host:port, naming its setting:
// listen would refuse it only once the databases and the secrets file
// were made, in words that name neither. Each is checked where it is
// used: PAYD_ADDR by serve, PAYD_SANDBOX_ADDR by the sandbox, in-process
// or on its own. A port in use is found only at listen.
func (c *Config) checkAddrs(sub string) error {
	if sub == "serve" {
		if err := checkHostPort("PAYD_ADDR", c.Addr, "127.0.0.1:8080, or :0 for a free port"); err != nil {
			return err
		}
	}
	if sub == "sandbox" || c.inProcessSandbox(sub) {
		return checkHostPort("PAYD_SANDBOX_ADDR", c.SandboxAddr, "127.0.0.1:8081, or :0 for a free port")
	}
	return nil
}

// checkHostPort refuses listen address val of setting name unless it is
// host:port with a port from 0 to 65535 (the host may be empty: every
// interface).
func checkHostPort(name, val, example string) error {
	_, port, err := net.SplitHostPort(val)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%s must be host:port (such as %s), not %q", name, example, val)
	}
	return nil
}

// checkURLs refuses, at start, a database or Redis URL payd could not
// open, naming its setting; the password never goes into the message.
func (c *Config) checkURLs(sub string) error {
	dbs := []struct{ name, val string }{{"PAYD_DATABASE_URL", c.DatabaseURL}, {"PAYD_SANDBOX_DATABASE_URL", c.SandboxDatabaseURL}}
	switch {
	case sub == "sandbox":
		dbs = dbs[1:]
	case !c.inProcessSandbox(sub):
		dbs = dbs[:1]
	}
	for _, d := range dbs {
		if scheme, rest, _ := strings.Cut(d.val, "://"); (scheme != "sqlite" && scheme != "mysql") || rest == "" {
			return fmt.Errorf("%s must be sqlite://PATH or mysql://USER:PASS@HOST:PORT/DB, not %s", d.name, notURL(d.val))
		}
	}
	if sub == "serve" && c.RedisURL != "" {
		r, err := redisx.Open(c.RedisURL) // parses the URL; dials nothing
		if err != nil {
			return err
		}
		_ = r.Close()
	}
	return nil
}

// inProcessSandbox is whether payd serve starts the sandbox itself.
func (c *Config) inProcessSandbox(sub string) bool {
	return sub == "serve" && c.ProviderURL == "" && c.Stripe.Provider != "stripe"
}

// redactURL keeps a URL's password out of a banner: the URL masked
// (maskURL), or a placeholder for a value that is not a URL.
func redactURL(s string) string {
	if m, ok := maskURL(s); ok {
		return m
	}
	return "(not a URL; not shown)"
}

// notURL is how an error quotes a refused URL setting's value s, after
// "not": the URL quoted with its password masked; a value that is not a
// URL quoted as it is when it holds nothing like a credential (no @, no
// word such as password), else only the words "a URL", since a driver DSN
// may hold a password anywhere.
func notURL(s string) string {
	if v, ok := ShownValue(s); ok {
		return strconv.Quote(v)
	}
	return "a URL (the value is not shown: it may hold a password)"
}

// ShownValue is a URL-valued setting's value s as a message may show it:
// a URL with its password masked (maskURL), another value as it is when
// it holds nothing like a credential (no @, no word such as password).
// ok is false when nothing of s may be shown. payd's command line shows
// the URLs it was given through it, as help and the checks here do.
func ShownValue(s string) (shown string, ok bool) {
	if m, ok := maskURL(s); ok {
		return m, true
	}
	if strings.Contains(s, "@") || secretParam.MatchString(s) {
		return "", false
	}
	return s, true
}

// maskURL is URL s with its password, and the value of any query
// parameter named like a secret, masked as xxxxx. A value that is not a
// scheme://... URL (a driver DSN such as user:pass@tcp(host)/db) could
// hold a password anywhere: ok is false and nothing of it is shown.
func maskURL(s string) (masked string, ok bool) {
	p, err := url.Parse(s)
	if err != nil || p.Scheme == "" || p.Opaque != "" {
		return "", false
	}
	if q := p.Query(); len(q) > 0 {
		hidden := false
		for k := range q {
			if secretParam.MatchString(k) {
				q[k], hidden = []string{"xxxxx"}, true
			}
		}
		if hidden {
			p.RawQuery = q.Encode()
		}
	}
	return p.Redacted(), true
}

// secretParam is a query parameter whose value may be a secret.
var secretParam = regexp.MustCompile(`(?i)pass|secret|token|key|auth`)

// heldSecret is one of payd's secrets, named by its setting.
type heldSecret struct{ name, val string }

// heldSecrets is first, then the named operators' tokens and every webhook
// signing secret (each rotation's too): the secrets another one must
// differ from, so that each has its own holder.
func (c *Config) heldSecrets(first ...heldSecret) []heldSecret {
	others := first
	for _, o := range c.operators {
		others = append(others, heldSecret{"PAYD_ADMIN_TOKENS (operator " + o.Name + ")", o.Token})
	}
	for _, w := range []heldSecret{{"PAYD_WEBHOOK_SECRET", c.WebhookSecret}, {"STRIPE_WEBHOOK_SECRET", c.Stripe.WebhookSecret}} {
		others = append(others, w)
		for _, s := range webhookSecrets(w.val) {
			others = append(others, heldSecret{w.name, s})
		}
	}
	return others
}
