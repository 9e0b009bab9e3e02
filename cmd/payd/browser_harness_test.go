package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/payd/payd/sandbox"
)

// chromium finds the browser for the checkout tests. Without one the tests
// skip, loudly, unless PAYD_TEST_REQUIRE_BROWSER=1 (CI) makes that a failure.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("PAYD_TEST_CHROMIUM"), "chromium", "chromium-browser"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const msg = "no Chromium found (apt-get install chromium, or set PAYD_TEST_CHROMIUM): checkout browser tests not run"
	if os.Getenv("PAYD_TEST_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg + "; PAYD_TEST_REQUIRE_BROWSER=1 requires them")
	}
	t.Skip(msg)
	return ""
}

// newBrowser starts a fresh headless Chromium (its own profile, so its own
// localStorage) that lives until the test ends.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(800, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	var mu sync.Mutex
	var thrown []string // uncaught exceptions in the page: each one is a bug
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			mu.Lock()
			defer mu.Unlock()
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			thrown = append(thrown, fmt.Sprintf("%s (%s:%d)", msg, d.URL, d.LineNumber+1))
		}
	}))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		mu.Lock()
		defer mu.Unlock()
		for _, e := range thrown {
			t.Errorf("uncaught exception in the checkout page: %s", e)
		}
	})
	// The first call starts the browser; it must not carry a timeout, or
	// the timeout would end the browser too.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// exchange is one request the browser sent through the tap, and its answer.
type exchange struct {
	Method, URI, Key string // URI as sent (path and query); Key is the Idempotency-Key
	Status           int
	Replayed         bool   // Idempotent-Replayed: true
	RetryAfter       string // the Retry-After header
	Body             []byte // kept for pay answers only
	Cut              bool   // payd answered, the browser never got the whole reply
}

func (x exchange) isPay() bool {
	return x.Method == http.MethodPost && strings.HasSuffix(x.URI, "/pay")
}

// tap stands between the browser and payd, as a load balancer would. It
// records every exchange and can cut the replies of the first pay requests
// after payd has answered them: payd did the work, the page hears nothing.
type tap struct {
	srv   *httptest.Server
	proxy *httputil.ReverseProxy
	cuts  atomic.Int32 // pay replies still to cut
	mu    sync.Mutex
	log   []exchange
}

type exchangeIndex struct{}

// errCut marks an answer the tap is to cut.
var errCut = errors.New("reply cut by the test")

func newTap(t *testing.T, target string) *tap {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &tap{proxy: httputil.NewSingleHostReverseProxy(u)}
	p.proxy.ErrorLog = log.New(io.Discard, "", 0) // streams cut by a reload are expected
	p.proxy.ModifyResponse = p.answered
	p.proxy.ErrorHandler = p.failed
	p.srv = httptest.NewServer(p)
	t.Cleanup(func() { p.srv.CloseClientConnections(); p.srv.Close() })
	return p
}

func (p *tap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := exchange{Method: r.Method, URI: r.URL.RequestURI(), Key: r.Header.Get("Idempotency-Key")}
	x.Cut = x.isPay() && p.cuts.Add(-1) >= 0
	p.mu.Lock()
	i := len(p.log)
	p.log = append(p.log, x)
	p.mu.Unlock()
	p.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), exchangeIndex{}, i)))
}

// answered records payd's answer (whole, for pay requests) and marks it
// for cutting when this pay request is one to cut.
func (p *tap) answered(res *http.Response) error {
	i := res.Request.Context().Value(exchangeIndex{}).(int)
	p.mu.Lock()
	defer p.mu.Unlock()
	x := &p.log[i]
	x.Status, x.Replayed = res.StatusCode, res.Header.Get("Idempotent-Replayed") == "true"
	x.RetryAfter = res.Header.Get("Retry-After")
	if !x.isPay() {
		return nil
	}
	body, err := io.ReadAll(res.Body) // payd has finished with the request
	res.Body.Close()
	if err != nil {
		return err
	}
	x.Body = body
	if x.Cut {
		return errCut
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}

// failed cuts a marked reply: the status line and headers go out, the body
// never does, so the page's fetch fails after payd has done the work (and
// Chromium, having seen a response, cannot quietly resend the request).
func (p *tap) failed(w http.ResponseWriter, r *http.Request, err error) {
	if !errors.Is(err, errCut) {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	i := r.Context().Value(exchangeIndex{}).(int)
	p.mu.Lock()
	x := p.log[i]
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(x.Body)))
	w.WriteHeader(x.Status)
	_ = http.NewResponseController(w).Flush()
	panic(http.ErrAbortHandler) // net/http closes the connection, mid-reply
}

// exchanges returns a copy of what passed through, optionally filtered.
func (p *tap) exchanges(keep func(exchange) bool) []exchange {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []exchange
	for _, x := range p.log {
		if keep == nil || keep(x) {
			out = append(out, x)
		}
	}
	return out
}

func (p *tap) pays() []exchange { return p.exchanges(exchange.isPay) }

// gate stands between the sandbox and payd's webhook endpoint. Shut, it
// answers 503 and the sandbox keeps retrying; open, it lets them through.
type gate struct {
	open  atomic.Bool
	proxy atomic.Pointer[httputil.ReverseProxy]
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p := g.proxy.Load(); p != nil && g.open.Load() {
		p.ServeHTTP(w, r)
		return
	}
	http.Error(w, "webhooks held by the test", http.StatusServiceUnavailable)
}

// startGatedStack is startStack with the sandbox's webhooks passing through
// a gate the test can hold shut, so "the payment is still pending" lasts
// exactly as long as the test needs it, whatever the machine's speed.
func startGatedStack(t *testing.T, dialect string, extra env) (*stack, *gate) {
	t.Helper()
	g := &gate{}
	hooks := httptest.NewServer(g)
	t.Cleanup(hooks.Close)
	s := startStackWith(t, dialect, extra, func(c *sandbox.Config) {
		// c.WebhookURL is payd's own endpoint: the gate forwards there.
		u, err := url.Parse(c.WebhookURL)
		if err != nil {
			t.Fatal(err)
		}
		u.Path = ""
		g.proxy.Store(httputil.NewSingleHostReverseProxy(u))
		c.WebhookURL = hooks.URL + "/v1/webhooks/provider"
		c.AsyncDelay, c.RetryMax = 500*time.Millisecond, 200*time.Millisecond
	})
	return s, g
}
