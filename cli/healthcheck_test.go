package cli

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// healthcheckRun runs payd healthcheck with args and PAYD_ADDR=addr,
// returning its exit status and error.
func healthcheckRun(t *testing.T, addr string, args ...string) (int, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(k string) string {
		if k == "PAYD_ADDR" {
			return addr
		}
		return ""
	}
	err := Main(context.Background(), append([]string{"healthcheck"}, args...), getenv, &out, &errOut)
	return ExitStatus(err), err
}

// TestHealthcheckExitStatus: 2xx is 0; another status, a closed port and a
// server slower than -timeout are 1 with one line saying why; so is a
// usage error (Docker reserves a health check's 2).
func TestHealthcheckExitStatus(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			_, _ = w.Write([]byte(`{"status":"ok"}`))
		case "/readyz":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"type":"/problems/not_ready","status":503,"code":"not_ready","detail":"shutting down"}`))
		case "/moved":
			http.Redirect(w, r, "/healthz", http.StatusFound)
		case "/slow":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	defer close(release)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/healthz"
	ln.Close()

	tests := []struct {
		name string
		args []string
		want int
		why  string // in the error, on one line
	}{
		{"200", []string{"-url", srv.URL + "/healthz"}, 0, ""},
		{"503", []string{"-url", srv.URL + "/readyz"}, 1, "503 Service Unavailable (not_ready: shutting down)"},
		{"redirect", []string{"-url", srv.URL + "/moved"}, 1, "302 Found"},
		{"closed port", []string{"-url", closed}, 1, "connection refused"},
		{"timeout", []string{"-url", srv.URL + "/slow", "-timeout", "200ms"}, 1, "no answer within 200ms"},
		{"bad flag", []string{"-bogus"}, 1, "flag provided but not defined: -bogus"},
		{"argument", []string{"-url", srv.URL, "extra"}, 1, "unexpected arguments"},
		{"not a URL", []string{"-url", "localhost:8080/healthz"}, 1, "http:// or https://"},
		{"bad timeout", []string{"-url", srv.URL, "-timeout", "0s"}, 1, "-timeout must be positive"},
	}
	for _, tt := range tests {
		start := time.Now()
		got, err := healthcheckRun(t, "", tt.args...)
		if got != tt.want {
			t.Errorf("%s: payd healthcheck %s exit %d (%v), want %d", tt.name, strings.Join(tt.args, " "), got, err, tt.want)
			continue
		}
		if tt.want == 0 {
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tt.why) || strings.Contains(msg, "\n") {
			t.Errorf("%s: payd healthcheck %s = %q, want one line with %q", tt.name, strings.Join(tt.args, " "), msg, tt.why)
		}
		if tt.name == "timeout" && time.Since(start) > 10*time.Second {
			t.Errorf("timeout: payd healthcheck -timeout 200ms took %v", time.Since(start))
		}
	}
}

// TestHealthcheckDefaultURL: without -url the check asks /healthz where
// PAYD_ADDR listens, on loopback for a wildcard host, and refuses an
// address it cannot ask.
func TestHealthcheckDefaultURL(t *testing.T) {
	tests := []struct{ addr, want, wantErr string }{
		{"", "http://127.0.0.1:8080/healthz", ""},
		{"0.0.0.0:8080", "http://127.0.0.1:8080/healthz", ""},
		{":9000", "http://127.0.0.1:9000/healthz", ""},
		{"[::]:8080", "http://127.0.0.1:8080/healthz", ""},
		{"10.1.2.3:80", "http://10.1.2.3:80/healthz", ""},
		{"[::1]:8080", "http://[::1]:8080/healthz", ""},
		{"payd:8080", "http://payd:8080/healthz", ""},
		{"127.0.0.1:0", "", "picks a free port"},
		{"8080", "", "not HOST:PORT"},
		{"127.0.0.1:", "", "not HOST:PORT"},
	}
	for _, tt := range tests {
		got, err := healthURL(tt.addr)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "-url") {
				t.Errorf("healthURL(%q) = %q, %v, want an error with %q pointing at -url", tt.addr, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("healthURL(%q) = %q, %v, want %q", tt.addr, got, err, tt.want)
		}
	}

	// And the command uses it: PAYD_ADDR on every interface, asked on loopback.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	if got, err := healthcheckRun(t, "0.0.0.0:"+port); got != 0 {
		t.Errorf("payd healthcheck with PAYD_ADDR=0.0.0.0:%s exit %d (%v), want 0", port, got, err)
	}
	if got, err := healthcheckRun(t, "127.0.0.1:0"); got != 1 {
		t.Errorf("payd healthcheck with PAYD_ADDR=127.0.0.1:0 exit %d (%v), want 1", got, err)
	}
}

// TestExitStatus: help is 0; a usage error is 2, except payd
// healthcheck's, which is 1 (Docker reserves a health check's 2).
func TestExitStatus(t *testing.T) {
	if got, err := healthcheckRun(t, "", "-h"); got != 0 {
		t.Errorf("payd healthcheck -h exit %d (%v), want 0", got, err)
	}
	for _, args := range [][]string{{"bogus"}, {"serve", "-bogus"}} {
		if _, _, err := runArgs(t, args...); ExitStatus(err) != 2 {
			t.Errorf("payd %s exit %d (%v), want 2", strings.Join(args, " "), ExitStatus(err), err)
		}
	}
	for _, args := range [][]string{{"-bogus"}, {"-timeout", "soon"}, {"-timeout", "0s"}, {"-url", "ftp://x"}, {"extra"}} {
		if got, err := healthcheckRun(t, "", args...); got != 1 || !errors.As(err, new(*usageError)) {
			t.Errorf("payd healthcheck %s exit %d (%v), want 1 for a usage error", strings.Join(args, " "), got, err)
		}
	}
}
