package notify_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/notify"
)

const (
	secretA = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	secretB = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
)

// TestSignEverySecret: during a rotation's overlap the header carries one
// signature per secret, and a receiver holding either verifies it.
func TestSignEverySecret(t *testing.T) {
	now := time.Now()
	body := []byte(`{"id":"e1"}`)
	sig, err := notify.Sign([]string{secretB, secretA}, "e1", now, body)
	if err != nil || len(strings.Fields(sig)) != 2 {
		t.Fatalf("Sign = %q, %v; want two signatures", sig, err)
	}
	h := http.Header{}
	h.Set("webhook-id", "e1")
	h.Set("webhook-timestamp", itoa(now.Unix()))
	h.Set("webhook-signature", sig)
	for _, s := range []string{secretA, secretB} {
		wh, _ := standardwebhooks.NewWebhook(s)
		if err := wh.Verify(body, h); err != nil {
			t.Errorf("Verify with %s = %v", s[:10], err)
		}
	}
	other, _ := standardwebhooks.NewWebhook("whsec_" + strings.Repeat("QUJD", 8))
	if err := other.Verify(body, h); err == nil {
		t.Error("a third secret verified the signatures")
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestPolicyRefusesOwnNetwork: under the guard, loopback, private,
// link-local, unspecified and multicast addresses are refused, as URL
// literals and after resolution, unless allowed; without it they are
// reached.
func TestPolicyRefusesOwnNetwork(t *testing.T) {
	guard := notify.Policy{Guard: true}
	for _, u := range []string{"http://127.0.0.1:8080/x", "https://10.1.2.3/x", "http://[::1]/x", "http://169.254.169.254/latest",
		"http://0.0.0.0/", "http://192.168.1.1/", "http://localhost:9000/", "http://[::ffff:127.0.0.1]/", "http://224.0.0.1/"} {
		if err := guard.CheckURL(u); !errors.Is(err, notify.ErrRefusedAddress) {
			t.Errorf("CheckURL(%q) = %v, want refused", u, err)
		}
		if err := (notify.Policy{}).CheckURL(u); err != nil {
			t.Errorf("without the guard CheckURL(%q) = %v, want nil", u, err)
		}
	}
	for _, u := range []string{"ftp://shop.example/", "file:///etc/passwd", "/relative", "https://user:pw@shop.example/", "http://"} {
		if err := (notify.Policy{}).CheckURL(u); err == nil {
			t.Errorf("CheckURL(%q) = nil, want refused", u)
		}
	}
	if err := guard.CheckURL("https://shop.example/hooks"); err != nil {
		t.Errorf("CheckURL(public name) = %v", err)
	}
	allow, err := notify.ParseAllow("10.0.0.0/8, 127.0.0.1")
	if err != nil || len(allow) != 2 {
		t.Fatalf("ParseAllow = %v, %v", allow, err)
	}
	allowed := notify.Policy{Guard: true, Allow: allow}
	for _, ip := range []string{"10.9.9.9", "127.0.0.1"} {
		if !allowed.Allowed(netip.MustParseAddr(ip)) {
			t.Errorf("Allowed(%s) = false with it listed", ip)
		}
	}
	if allowed.Allowed(netip.MustParseAddr("127.0.0.2")) {
		t.Error("Allowed(127.0.0.2) = true, listed was 127.0.0.1 alone")
	}
	if _, err := notify.ParseAllow("10.0.0.0/33"); err == nil {
		t.Error("ParseAllow(10.0.0.0/33) = nil error")
	}
}

// TestSenderBounded: the guard refuses a loopback endpoint at connection
// time (a name resolving to it too); redirects are not followed; a slow
// endpoint is cut off at the timeout.
func TestSenderBounded(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/slow":
			time.Sleep(2 * time.Second)
		default:
			_, _ = io.Copy(io.Discard, r.Body)
		}
	}))
	defer srv.Close()
	ep := func(path string) domain.Endpoint {
		return domain.Endpoint{ID: "ep", URL: strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + path, Secret: secretA}
	}
	guarded := notify.Sender{Client: notify.NewClient(time.Second, notify.Policy{Guard: true}), Policy: notify.Policy{}}
	a := guarded.Send(context.Background(), ep("/ok"), "e1", []byte("{}"), time.Now())
	if !errors.Is(a.Err, notify.ErrRefusedAddress) || hits.Load() != 0 {
		t.Fatalf("guarded Send to localhost = %d %v (hits %d), want refused at the dialer", a.Status, a.Err, hits.Load())
	}
	open := notify.Sender{Client: notify.NewClient(500*time.Millisecond, notify.Policy{})}
	if a := open.Send(context.Background(), ep("/redirect"), "e1", []byte("{}"), time.Now()); a.Status != http.StatusFound || hits.Load() != 1 {
		t.Errorf("Send(redirect) = %d %v, hits %d; want the 302 itself, not followed", a.Status, a.Err, hits.Load())
	}
	if a := open.Send(context.Background(), ep("/slow"), "e1", []byte("{}"), time.Now()); a.Err == nil {
		t.Errorf("Send(slow) = %d, want a timeout", a.Status)
	}
	a = open.Send(context.Background(), ep("/ok"), "e1", []byte("{}"), time.Now())
	if a.Status != 200 || !strings.Contains(a.RequestHead, "Webhook-Id: e1") || !strings.HasPrefix(a.Response, "HTTP/1.1 200") {
		t.Errorf("Send = %+v", a)
	}
}

// TestDialViaReachesTheAddressNotTheURL: a client made to dial through an
// address connects there whatever host the endpoint's URL names, and the
// URL's host is still the request's Host.
func TestDialViaReachesTheAddressNotTheURL(t *testing.T) {
	var host string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host = r.Host
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	c := notify.NewClient(2*time.Second, notify.Policy{})
	notify.DialVia(c, strings.TrimPrefix(srv.URL, "http://"))
	defer c.CloseIdleConnections()
	resp, err := c.Post("http://shop.nemesis.test/hooks", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatalf("through the address: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || host != "shop.nemesis.test" {
		t.Fatalf("answered %d with Host %q, want 204 from the address with the URL's host", resp.StatusCode, host)
	}
	guarded := notify.NewClient(2*time.Second, notify.Policy{Guard: true})
	notify.DialVia(guarded, strings.TrimPrefix(srv.URL, "http://"))
	if _, err := guarded.Post("http://shop.nemesis.test/hooks", "application/json", strings.NewReader("{}")); err == nil || !errors.Is(err, notify.ErrRefusedAddress) {
		t.Fatalf("a loopback address under the guard: %v, want notify.ErrRefusedAddress", err)
	}
}

// TestSenderCleansAnswer: an answer whose header bytes are not UTF-8 is
// kept as valid text, so the attempt can be recorded.
func TestSenderCleansAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["X-Bad"] = []string{"caf\xe9 \xff"}
		_, _ = w.Write([]byte("ok\xc3"))
	}))
	defer srv.Close()
	s := notify.Sender{Client: notify.NewClient(time.Second, notify.Policy{})}
	a := s.Send(context.Background(), domain.Endpoint{ID: "ep", URL: srv.URL, Secret: secretA}, "e1", []byte("{}"), time.Now())
	if a.Status != 200 || !utf8.ValidString(a.Response) || !strings.Contains(a.Response, "X-Bad: caf") {
		t.Fatalf("Send = %d %q, want a 200 kept as valid UTF-8", a.Status, a.Response)
	}
}

// TestPolicyRefusesDisguisedAddresses: numeric hosts that are not the
// canonical form, a trailing dot, IPv6 forms that embed a refused IPv4
// address, and a name resolving to a refused address are all refused.
func TestPolicyRefusesDisguisedAddresses(t *testing.T) {
	guard := notify.Policy{Guard: true, Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "vm":
			return []netip.Addr{netip.MustParseAddr("203.0.113.9"), netip.MustParseAddr("127.0.0.1")}, nil
		case "shop.example":
			return []netip.Addr{netip.MustParseAddr("203.0.113.9")}, nil
		}
		return nil, errors.New("no such host")
	}}
	for _, u := range []string{"http://localhost./", "http://LOCALHOST./", "http://2130706433/", "http://0x7f000001/", "http://127.1/",
		"http://0/", "http://017700000001/", "http://[::7f00:1]/", "http://[64:ff9b::7f00:1]/", "http://[64:ff9b::a9fe:a9fe]/",
		"http://[2002:7f00:1::]/", "http://vm:18091/"} {
		if err := guard.CheckEndpointURL(context.Background(), u); !errors.Is(err, notify.ErrRefusedAddress) {
			t.Errorf("CheckEndpointURL(%q) = %v, want refused", u, err)
		}
	}
	for _, ip := range []string{"64:ff9b::a9fe:a9fe", "2002:a00:1::", "::7f00:1", "64:ff9b:1::a00:1"} {
		if guard.Allowed(netip.MustParseAddr(ip)) {
			t.Errorf("Allowed(%s) = true, its embedded IPv4 address is refused", ip)
		}
	}
	for _, ip := range []string{"64:ff9b::cb00:7109", "2002:cb00:7109::", "2001:db8::1"} {
		if !guard.Allowed(netip.MustParseAddr(ip)) && ip != "2001:db8::1" {
			t.Errorf("Allowed(%s) = false, its embedded IPv4 address is public", ip)
		}
	}
	if err := guard.CheckEndpointURL(context.Background(), "https://shop.example/hooks"); err != nil {
		t.Errorf("CheckEndpointURL(public name) = %v", err)
	}
}

// TestEndpointURLAsWritten: a new endpoint URL is refused unless payd
// would call it exactly as written — no space, control or non-ASCII
// character, nothing the URL parser rewrites — and the refusal shows the
// URL as payd would call it; a URL written that way passes.
func TestEndpointURLAsWritten(t *testing.T) {
	open := notify.Policy{}
	for _, c := range []struct{ url, want string }{
		{"https://shop.example/hooks/payd events", "not one"},
		{"https://shop.example/hooks\t", "not one"},
		{"https://bücher.example/hooks", "punycode"},
		{"https://shop.example/ü", "percent-encode"},
		{"HTTPS://shop.example/hooks", "as payd calls it: https://shop.example/hooks"},
		{"https://shop.example/a/%7e/b", ""}, // a valid escape payd keeps as written
		{"https://shop.example/hooks?x=1&y=2", ""},
		{`https://shop.example/h?a="x"`, `'"' at byte 2`},
		{"https://shop.example/h?a=<x>", "'<' at byte 2"},
		{"https://shop.example/h?q=%zz", "'%' at byte 2"},
		{"https://shop.example/h?q=%4", "'%' at byte 2"},
		{`https://shop.example/h?q=a\b`, `'\\' at byte 3`},
		{"https://shop.example/h?q=%41&r=a:b@c/d?e", ""},
		{"https://xn--bcher-kva.example/hooks", ""},
		{"https://shop.example:8443/payd-events", ""},
	} {
		err := notify.CheckWritten(c.url)
		if err == nil {
			err = open.CheckEndpointURL(context.Background(), c.url)
		}
		switch {
		case c.want == "" && err != nil:
			t.Errorf("CheckEndpointURL(%q) = %v, want it accepted", c.url, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("CheckEndpointURL(%q) = %v, want a refusal saying %q", c.url, err, c.want)
		}
	}
}
