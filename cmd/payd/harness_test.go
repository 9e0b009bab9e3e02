package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
	"github.com/payd/payd/sandbox"
)

const (
	testAdminToken    = "adm_test_0123456789abcdef0123456789"
	testWebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	testSecretKey     = "test-secret-key-0123456789abcdef"
)

// env is a test's PAYD_* settings.
type env map[string]string

func (e env) get(k string) string { return e[k] }

// stack is payd started through run on port 0, with its own sandbox
// provider (so the test can count what was really charged) and a handle on
// payd's database to check what was written.
type stack struct {
	t        *testing.T
	base     string
	sandbox  *sandbox.Server
	db       *repository.DB
	logs     *syncBuffer
	cancel   context.CancelFunc
	done     chan error
	dialect  string
	dbURL    string
	sandboxL net.Listener
}

// startStack boots a sandbox and payd (through run, as `go run ./cmd/payd`
// does) on a fresh database of the given dialect.
func startStack(t *testing.T, dialect string, extra env) *stack {
	t.Helper()
	return startStackWith(t, dialect, extra)
}

// startStackWith is startStack with the test sandbox's configuration
// adjusted by each tune (no webhooks, duplicates, reordering, delays).
func startStackWith(t *testing.T, dialect string, extra env, tunes ...func(*sandbox.Config)) *stack {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{t: t, dialect: dialect, dbURL: dbtest.NewURL(t, migrations.Dialect(dialect)), sandboxL: ln, logs: &syncBuffer{}}
	e := env{
		"PAYD_ADDR": "127.0.0.1:0", "PAYD_DATABASE_URL": s.dbURL,
		"PAYD_ADMIN_TOKEN": testAdminToken, "PAYD_WEBHOOK_SECRET": testWebhookSecret, "PAYD_SECRET_KEY": testSecretKey,
		"PAYD_PROVIDER_URL": "http://" + ln.Addr().String(), "PAYD_LOG_LEVEL": "info",
	}
	for k, v := range extra {
		e[k] = v
	}
	s.start(e)
	cfg := sandbox.Config{
		DatabaseURL: "sqlite://" + filepath.Join(dir, "sandbox.db"), WebhookURL: s.base + "/v1/webhooks/provider",
		WebhookSecret: testWebhookSecret, AsyncDelay: 100 * time.Millisecond, RetryBase: 50 * time.Millisecond,
		PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	}
	for _, tune := range tunes {
		tune(&cfg)
	}
	sb, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.sandbox = sb
	ctx, cancel := context.WithCancel(context.Background())
	sbDone := make(chan struct{})
	go func() { defer close(sbDone); _ = sb.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-sbDone; sb.Close() })

	if s.db, err = repository.Open(context.Background(), s.dbURL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.db.Close() })
	return s
}

// start runs payd with e and waits until it listens.
func (s *stack) start(e env) {
	t := s.t
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	s.cancel, s.done = cancel, make(chan error, 1)
	go func() { s.done <- run(ctx, nil, e.get, pw, s.logs); pw.Close() }()
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "payd listening on "); ok {
			s.base = rest
			break
		}
	}
	if s.base == "" {
		cancel()
		t.Fatalf("payd did not start: %v\nlogs:\n%s", <-s.done, s.logs.String())
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	t.Cleanup(s.stop)
}

// stop shuts payd down gracefully and reports an unclean exit.
func (s *stack) stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	if err := <-s.done; err != nil {
		s.t.Errorf("run() = %v, want nil after shutdown", err)
	}
}

// charges counts what the provider really charged (succeeded charges).
func (s *stack) charges(orderID string) int {
	s.t.Helper()
	all, err := s.sandbox.Charges(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	n := 0
	for _, c := range all {
		if c.OrderID == orderID && c.Status == "succeeded" {
			n++
		}
	}
	return n
}

// count runs SELECT COUNT(*) on payd's database.
func (s *stack) count(query string, args ...any) int64 {
	s.t.Helper()
	var n int64
	if err := s.db.Gorm().Raw("SELECT COUNT(*) FROM "+query, args...).Scan(&n).Error; err != nil {
		s.t.Fatalf("count %s: %v", query, err)
	}
	return n
}

// reply is one HTTP answer, read whole.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("reply %d is not a JSON object: %v\n%s", r.Status, err, r.Body)
	}
	return m
}

// code is the problem code of an error reply.
func (r reply) code(t *testing.T) string {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Errorf("Content-Type = %q, want application/problem+json (status %d, body %s)", ct, r.Status, r.Body)
	}
	c, _ := r.json(t)["code"].(string)
	return c
}

// request is one call to payd.
type request struct {
	method, path, token, key, contentType string
	body                                  any // string, []byte or a value to marshal
}

func (s *stack) do(r request) reply {
	s.t.Helper()
	var body io.Reader
	switch b := r.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			s.t.Fatal(err)
		}
		body = bytes.NewReader(j)
	}
	req, err := http.NewRequest(r.method, s.base+r.path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	if body != nil {
		ct := r.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	if r.key != "" {
		req.Header.Set("Idempotency-Key", r.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	checkContract(s.t, req, resp.StatusCode, resp.Header, b) // every answer is held to openapi.yaml
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// register creates a customer and returns its ID and token.
func (s *stack) register(email string) (string, string) {
	s.t.Helper()
	r := s.do(request{method: "POST", path: "/v1/customers", key: uuid.NewString(), body: map[string]string{"email": email, "name": "Test Customer"}})
	if r.Status != http.StatusCreated {
		s.t.Fatalf("register(%s) = %d %s, want 201", email, r.Status, r.Body)
	}
	m := r.json(s.t)
	return m["customer"].(map[string]any)["id"].(string), m["token"].(string)
}

// order creates a USD order of amount and returns its ID.
func (s *stack) order(token, amount string) string {
	s.t.Helper()
	r := s.do(request{method: "POST", path: "/v1/orders", token: token, body: map[string]any{
		"currency": "USD", "items": []map[string]any{{"sku": "sku-1", "name": "Thing", "quantity": 1, "unit_price": amount}},
	}})
	if r.Status != http.StatusCreated {
		s.t.Fatalf("create order = %d %s, want 201", r.Status, r.Body)
	}
	return r.json(s.t)["id"].(string)
}

func (s *stack) pay(token, orderID, key, method string) reply {
	s.t.Helper()
	return s.do(request{method: "POST", path: "/v1/orders/" + orderID + "/pay", token: token, key: key, body: map[string]string{"payment_method": method}})
}

// syncBuffer is a bytes.Buffer safe for the logger and the test at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func dialects() []string { return []string{"sqlite", "mysql"} }

func eachDialect(t *testing.T, fn func(t *testing.T, dialect string)) {
	for _, d := range dialects() {
		t.Run(d, func(t *testing.T) { fn(t, d) })
	}
}

var _ = fmt.Sprint
