package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/payd/payd/app"
)

// healthcheckAbout is `payd help healthcheck`.
const healthcheckAbout = "GETs -url and exits 0 on a 2xx answer, 1 on anything else (another status, no answer,\n" +
	"no answer within -timeout, a usage error), with one line on stderr saying why: 0 or 1 only, as\n" +
	"Docker reserves 2. It needs no shell or curl, so the distroless image runs it as its HEALTHCHECK.\n\n" +
	"The default URL is /healthz on PAYD_ADDR, a wildcard or empty host (0.0.0.0, ::) asked on\n" +
	"127.0.0.1. /healthz, not /readyz: a container's health status is what Swarm and restart tools\n" +
	"act on, and neither a database outage nor the shutdown delay (PAYD_SHUTDOWN_DELAY, while\n" +
	"/readyz answers 503 on purpose) is a reason to replace payd. payd listens only once its\n" +
	"migrations are applied, so a healthy payd has its schema. Pass -url .../readyz where readiness\n" +
	"is meant, or -url http://HOST:8081/healthz for the sandbox."

// healthcheckTimeout is how long payd healthcheck waits by default: well
// under the 30s Docker gives a HEALTHCHECK.
const healthcheckTimeout = 2 * time.Second

// healthcheckFlags are the flags of payd healthcheck.
func healthcheckFlags() (*flag.FlagSet, *string, *time.Duration) {
	fs := flag.NewFlagSet("payd healthcheck", flag.ContinueOnError)
	u := fs.String("url", "", "URL to GET (default: http://HOST:PORT/healthz from PAYD_ADDR, "+app.FlagSet("serve").Lookup("addr").DefValue+" when unset)")
	timeout := fs.Duration("timeout", healthcheckTimeout, "how long to wait for the whole answer")
	return fs, u, timeout
}

// healthcheck is `payd healthcheck [-url URL] [-timeout D]`. It exits 0
// or 1 only, a usage error included: Docker reserves a health check's 2.
func healthcheck(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	err := checkHealth(ctx, args, getenv, stdout)
	if err == nil || errors.Is(err, errHelpShown) {
		return err
	}
	return &failure{err}
}

func checkHealth(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs, rawURL, timeout := healthcheckFlags()
	if err := parseFlags(fs, "healthcheck", args, stdout); err != nil {
		return err
	}
	target := *rawURL
	if target == "" {
		var err error
		if target, err = healthURL(getenv("PAYD_ADDR")); err != nil {
			return err
		}
	} else if u, err := url.Parse(target); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("-url %q must be an http:// or https:// URL with a host", shownBase(target))
	}
	if *timeout <= 0 {
		return usagef("-timeout must be positive, not %v", *timeout)
	}
	return probe(ctx, target, *timeout)
}

// healthURL is /healthz on the address payd listens on (PAYD_ADDR, else
// its default), asked on loopback when payd listens on every interface.
func healthURL(addr string) (string, error) {
	if addr == "" {
		addr = app.FlagSet("serve").Lookup("addr").DefValue
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return "", fmt.Errorf("PAYD_ADDR %q is not HOST:PORT; pass -url", addr)
	}
	if port == "0" {
		return "", fmt.Errorf("PAYD_ADDR %q picks a free port at start; pass -url", addr)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}

// probe GETs target: nil on a 2xx answer, else why not, in one line.
func probe(ctx context.Context, target string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := &http.Client{
		// A health check talks to payd itself: no proxy from the
		// environment, and a redirect is an answer, not a hop to follow.
		Transport:     &http.Transport{Proxy: nil, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("-url %q: %w", shownBase(target), err)
	}
	resp, err := c.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("unhealthy: GET %s: no answer within %v", shownBase(target), timeout)
		}
		return fmt.Errorf("unhealthy: %s", oneLine(err.Error()))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	why := resp.Status
	var p struct{ Code, Detail string }
	if json.Unmarshal(body, &p) == nil && p.Code != "" {
		why += " (" + p.Code + ": " + oneLine(p.Detail) + ")"
	}
	return fmt.Errorf("unhealthy: GET %s: %s", shownBase(target), why)
}

// oneLine keeps a message on one line of stderr.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
