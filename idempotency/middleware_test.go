package idempotency_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// server is an Echo instance with the middleware on a few routes and a
// stub handler that counts its executions. The stub answers with the
// status the request asks for (X-Test-Status, default 201) and a body that
// names the execution, so a replay is told from a second execution.
type server struct {
	e       *echo.Echo
	engine  *idempotency.Engine
	records idempotency.RecordStore
	clock   *clock
	runs    atomic.Int64
	prefix  string // put before every scope: rows share a database, never a scope
}

func newServer(t *testing.T, records idempotency.RecordStore) *server {
	t.Helper()
	s := &server{records: records, clock: &clock{}}
	s.engine = engineOn(t, records, testSecret)
	s.engine.Now = s.clock.Now
	s.engine.InflightWait = 100 * time.Millisecond
	s.e = echo.New()
	s.e.HTTPErrorHandler = codeOnly
	m := &idempotency.Middleware{Engine: s.engine, Log: slog.New(slog.DiscardHandler), Body: readBody,
		Scope: func(c echo.Context) string { return s.prefix + c.Request().Header.Get("X-Test-Scope") }}
	s.e.POST("/orders/:id/pay", s.stub, m.Wrap(idempotency.KeyRequired))
	s.e.PUT("/orders/:id/pay", s.stub, m.Wrap(idempotency.KeyRequired))
	s.e.POST("/orders", s.stub, m.Wrap(idempotency.KeyOptional))
	s.e.POST("/customers", s.stub, m.Wrap(idempotency.KeySealed))
	s.e.POST("/uploads", s.stub, idempotency.AcceptMultipart, m.Wrap(idempotency.KeyRequired))
	return s
}

// call is the idempotent call a request under key with body makes, in the
// row's scope, for setting up a record before the requests.
func (s *server) call(scope, key, path, body string) idempotency.Call {
	return idempotency.Call{Scope: s.prefix + scope, Key: key, Method: "POST", Path: path, Body: []byte(body),
		Seal: path == "/customers"}
}

// stub is the route's handler: it reads the body again (as a handler
// does), counts itself and answers. X-Test-Block makes it wait until the
// request's context ends or 300ms passed, as a slow execution.
func (s *server) stub(c echo.Context) error {
	if _, err := readBody(c); err != nil {
		return err
	}
	n := s.runs.Add(1)
	status := http.StatusCreated
	if v := c.Request().Header.Get("X-Test-Status"); v != "" {
		status, _ = strconv.Atoi(v)
	}
	if c.Request().Header.Get("X-Test-Final") != "" {
		idempotency.Final(c)
	}
	return c.JSON(status, map[string]any{"run": n, "key": idempotency.KeyOf(c), "fingerprint": idempotency.FingerprintOf(c) != ""})
}

// readBody stands in for handler's body reader: read once, kept for the handler.
func readBody(c echo.Context) ([]byte, error) {
	if b, ok := c.Get("test.body").([]byte); ok {
		return b, nil
	}
	b, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return nil, err
	}
	c.Request().Body = io.NopCloser(bytes.NewReader(b))
	c.Set("test.body", b)
	return b, nil
}

// codeOnly is a stand-in for handler's error table, reduced to what the
// middleware decides: which error, and the Retry-After of a key in use.
func codeOnly(err error, c echo.Context) {
	code, status := "internal_error", http.StatusInternalServerError
	var inUse *idempotency.InUseError
	var invalid *domain.ValidationError
	switch {
	case errors.Is(err, idempotency.ErrMalformedBody), errors.As(err, &invalid):
		code, status = "validation_failed", http.StatusBadRequest
	case errors.Is(err, idempotency.ErrKeyConflict):
		code, status = "key_conflict", http.StatusBadRequest
	case errors.Is(err, domain.ErrKeyMissing):
		code, status = "idempotency_key_missing", http.StatusBadRequest
	case errors.Is(err, domain.ErrKeyInvalid):
		code, status = "idempotency_key_invalid", http.StatusBadRequest
	case errors.Is(err, domain.ErrKeyReused):
		code, status = "idempotency_key_reused", http.StatusUnprocessableEntity
	case errors.As(err, &inUse):
		code, status = "idempotency_key_in_use", http.StatusConflict
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(inUse.RetryAfter.Round(time.Second)/time.Second)))
	case errors.Is(err, idempotency.ErrStoredResponseUnreadable):
		code, status = "stored_response_unreadable", http.StatusGone
	case errors.Is(err, domain.ErrUnavailable):
		code, status = "service_unavailable", http.StatusServiceUnavailable
		c.Response().Header().Set("Retry-After", "1")
	}
	_ = c.JSON(status, map[string]string{"code": code})
}

// req is one request of a table row.
type req struct {
	method, path, key, body string
	scope                   string // default customer:c1
	status                  int    // what the stub answers (X-Test-Status); 0: 201
	final                   bool   // the stub marks its answer final (X-Test-Final)
	contentType             string
}

// want is what the client must get for one request.
type want struct {
	status   int
	code     string // problem code for an error answer
	replayOf int    // >0: a byte-identical replay of the answer to request #replayOf (1-based)
	ran      bool   // the stub executed for this request
}

func (s *server) do(t *testing.T, r req) *httptest.ResponseRecorder {
	t.Helper()
	method := r.method
	if method == "" {
		method = http.MethodPost
	}
	hr := httptest.NewRequest(method, r.path, strings.NewReader(r.body))
	hr.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	if r.contentType != "" {
		hr.Header.Set(echo.HeaderContentType, r.contentType)
	}
	if r.key != "" {
		hr.Header.Set("Idempotency-Key", r.key)
	}
	scope := r.scope
	if scope == "" {
		scope = domain.CustomerScope("c1")
	}
	hr.Header.Set("X-Test-Scope", scope)
	if r.status != 0 {
		hr.Header.Set("X-Test-Status", strconv.Itoa(r.status))
	}
	if r.final {
		hr.Header.Set("X-Test-Final", "1")
	}
	w := httptest.NewRecorder()
	s.e.ServeHTTP(w, hr)
	return w
}

// uploadBody is a multipart form with one file, under boundary.
func uploadBody(t *testing.T, boundary, content string) (body, contentType string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	if err := mw.SetBoundary(boundary); err != nil {
		t.Fatal(err)
	}
	fw, err := mw.CreateFormFile("file", "settlement.csv")
	if err != nil {
		t.Fatal(err)
	}
	fw.Write([]byte(content))
	mw.WriteField("dry_run", "true")
	mw.Close()
	return b.String(), mw.FormDataContentType()
}

// TestMiddlewareDecisionTable walks every row of docs/guarantees.md#idempotency-rules through the
// middleware, on a real database: each row is a sequence of requests, and
// for each the status, the problem code, whether the stub ran and whether
// the answer is a byte-identical replay (with Idempotent-Replayed: true).
func TestMiddlewareDecisionTable(t *testing.T) {
	upload1, uploadType1 := uploadBody(t, "boundary-one", "charge,amount\nch_1,10.00\n")
	upload2, uploadType2 := uploadBody(t, "boundary-two", "charge,amount\nch_1,10.00\n")
	upload3, uploadType3 := uploadBody(t, "boundary-three", "charge,amount\nch_1,99.00\n")
	pay := `{"payment_method":"pm_ok"}`

	tests := []struct {
		name  string
		setup func(t *testing.T, s *server) // state before the requests
		reqs  []req
		wants []want
	}{
		{name: "first request executes, same request after success replays",
			reqs:  []req{{path: "/orders/o1/pay", key: "k1", body: pay}, {path: "/orders/o1/pay", key: "k1", body: pay}},
			wants: []want{{status: 201, ran: true}, {status: 201, replayOf: 1}}},
		{name: "same payload in another JSON spelling is the same request",
			reqs: []req{{path: "/orders/o1/pay", key: "k1", body: `{"a":1,"b":[1,2]}`},
				{path: "/orders/o1/pay", key: "k1", body: "{ \"b\": [1, 2],\n \"a\": 1 }"}},
			wants: []want{{status: 201, ran: true}, {status: 201, replayOf: 1}}},
		{name: "same key, different payload is 422 reused, nothing executed",
			reqs:  []req{{path: "/orders/o1/pay", key: "k1", body: pay}, {path: "/orders/o1/pay", key: "k1", body: `{"payment_method":"pm_other"}`}},
			wants: []want{{status: 201, ran: true}, {status: 422, code: "idempotency_key_reused"}}},
		{name: "same key on another order (path) is 422 reused",
			reqs:  []req{{path: "/orders/o1/pay", key: "k1", body: pay}, {path: "/orders/o2/pay", key: "k1", body: pay}},
			wants: []want{{status: 201, ran: true}, {status: 422, code: "idempotency_key_reused"}}},
		{name: "same key with another method is 422 reused",
			reqs:  []req{{path: "/orders/o1/pay", key: "k1", body: pay}, {method: http.MethodPut, path: "/orders/o1/pay", key: "k1", body: pay}},
			wants: []want{{status: 201, ran: true}, {status: 422, code: "idempotency_key_reused"}}},
		{name: "reused after a failure too: the fingerprint is checked first",
			reqs:  []req{{path: "/orders/o1/pay", key: "k1", body: pay, status: 402}, {path: "/orders/o2/pay", key: "k1", body: pay}},
			wants: []want{{status: 402, ran: true}, {status: 422, code: "idempotency_key_reused"}}},
		{name: "original still processing: waits, then 409 in use with Retry-After",
			setup: func(t *testing.T, s *server) {
				begin(t, s.engine, s.call(domain.CustomerScope("c1"), "k1", "/orders/o1/pay", pay))
			},
			reqs:  []req{{path: "/orders/o1/pay", key: "k1", body: pay}},
			wants: []want{{status: 409, code: "idempotency_key_in_use"}}},
		{name: "original finishes during the wait: its answer is replayed",
			setup: func(t *testing.T, s *server) {
				c := s.call(domain.CustomerScope("c1"), "k1", "/orders/o1/pay", pay)
				begin(t, s.engine, c)
				s.engine.InflightWait = 2 * time.Second
				go func() {
					time.Sleep(50 * time.Millisecond)
					_, _ = s.engine.Finish(t.Context(), c, idempotency.Response{Status: 200, Body: []byte(`{"run":0}`)})
				}()
			},
			reqs:  []req{{path: "/orders/o1/pay", key: "k1", body: pay}},
			wants: []want{{status: 200, replayOf: -1}}},
		{name: "a 202 keeps the key in flight",
			reqs:  []req{{path: "/orders/o1/pay", key: "k1", body: pay, status: 202}, {path: "/orders/o1/pay", key: "k1", body: pay}},
			wants: []want{{status: 202, ran: true}, {status: 409, code: "idempotency_key_in_use"}}},
		{name: "original failed with a business failure: executed again as a new attempt",
			reqs: []req{{path: "/orders/o1/pay", key: "k1", body: pay, status: 402}, {path: "/orders/o1/pay", key: "k1", body: pay, status: 409},
				{path: "/orders/o1/pay", key: "k1", body: pay}, {path: "/orders/o1/pay", key: "k1", body: pay}},
			wants: []want{{status: 402, ran: true}, {status: 409, ran: true}, {status: 201, ran: true}, {status: 201, replayOf: 3}}},
		{name: "a failure the route marked final: stored once and replayed, never executed again",
			reqs: []req{{path: "/orders/o1/pay", key: "k1", body: pay, status: 502, final: true}, {path: "/orders/o1/pay", key: "k1", body: pay},
				{path: "/orders/o1/pay", key: "k1", body: pay}},
			wants: []want{{status: 502, ran: true}, {status: 502, replayOf: 1}, {status: 502, replayOf: 1}}},
		{name: "the same failure unmarked: executed again",
			reqs:  []req{{path: "/orders/o1/pay", key: "k1", body: pay, status: 502}, {path: "/orders/o1/pay", key: "k1", body: pay}},
			wants: []want{{status: 502, ran: true}, {status: 201, ran: true}}},
		{name: "original failed with an internal error: executed again",
			reqs:  []req{{path: "/orders/o1/pay", key: "k1", body: pay, status: 500}, {path: "/orders/o1/pay", key: "k1", body: pay}},
			wants: []want{{status: 500, ran: true}, {status: 201, ran: true}}},
		{name: "original's lease expired while processing: this request takes over",
			setup: func(t *testing.T, s *server) {
				begin(t, s.engine, s.call(domain.CustomerScope("c1"), "k1", "/orders/o1/pay", pay))
				s.clock.Advance(testLease + time.Second)
			},
			reqs:  []req{{path: "/orders/o1/pay", key: "k1", body: pay}, {path: "/orders/o1/pay", key: "k1", body: pay}},
			wants: []want{{status: 201, ran: true}, {status: 201, replayOf: 1}}},
		{name: "validation failure (400) is not recorded: the key stays free",
			reqs: []req{{path: "/orders/o1/pay", key: "k1", body: pay, status: 400}, {path: "/orders/o1/pay", key: "k1", body: `{"payment_method":"pm_fixed"}`},
				{path: "/orders/o1/pay", key: "k1", body: `{"payment_method":"pm_fixed"}`}},
			wants: []want{{status: 400, ran: true}, {status: 201, ran: true}, {status: 201, replayOf: 2}}},
		{name: "not found (404) and unprocessable (422) answers free the key too",
			reqs: []req{{path: "/orders/o1/pay", key: "k1", body: pay, status: 404}, {path: "/orders/o1/pay", key: "k1", body: pay, status: 422},
				{path: "/orders/o1/pay", key: "k1", body: pay}},
			wants: []want{{status: 404, ran: true}, {status: 422, ran: true}, {status: 201, ran: true}}},
		{name: "missing key where required is 400, nothing executed",
			reqs:  []req{{path: "/orders/o1/pay", body: pay}},
			wants: []want{{status: 400, code: "idempotency_key_missing"}}},
		{name: "invalid key is 400",
			reqs:  []req{{path: "/orders/o1/pay", key: "not a key!", body: pay}, {path: "/orders/o1/pay", key: strings.Repeat("k", 256), body: pay}},
			wants: []want{{status: 400, code: "idempotency_key_invalid"}, {status: 400, code: "idempotency_key_invalid"}}},
		{name: "optional key: without one, no dedupe",
			reqs:  []req{{path: "/orders", body: `{"currency":"EUR"}`}, {path: "/orders", body: `{"currency":"EUR"}`}},
			wants: []want{{status: 201, ran: true}, {status: 201, ran: true}}},
		{name: "optional key: with one, deduped",
			reqs:  []req{{path: "/orders", key: "create-1", body: `{"currency":"EUR"}`}, {path: "/orders", key: "create-1", body: `{"currency":"EUR"}`}},
			wants: []want{{status: 201, ran: true}, {status: 201, replayOf: 1}}},
		{name: "request_id in the body is the key; the header and the field agreeing is the same request",
			reqs: []req{{path: "/orders/o1/pay", body: `{"payment_method":"pm_ok","request_id":"k1"}`},
				{path: "/orders/o1/pay", key: "k1", body: pay}, {path: "/orders/o1/pay", key: "k1", body: `{"payment_method":"pm_ok","request_id":"k1"}`}},
			wants: []want{{status: 201, ran: true}, {status: 201, replayOf: 1}, {status: 201, replayOf: 1}}},
		{name: "header and body request_id differ: 400",
			reqs:  []req{{path: "/orders/o1/pay", key: "k1", body: `{"payment_method":"pm_ok","request_id":"k2"}`}},
			wants: []want{{status: 400, code: "key_conflict"}}},
		{name: "request_id that is not a string: 400",
			reqs:  []req{{path: "/orders/o1/pay", body: `{"payment_method":"pm_ok","request_id":7}`}},
			wants: []want{{status: 400, code: "validation_failed"}}},
		{name: "body that is not JSON: 400, nothing executed",
			reqs:  []req{{path: "/orders/o1/pay", key: "k1", body: `{"payment_method":`}, {path: "/orders/o1/pay", key: "k1", body: `{} {}`}},
			wants: []want{{status: 400, code: "validation_failed"}, {status: 400, code: "validation_failed"}}},
		{name: "keys are scoped to the caller",
			reqs: []req{{path: "/orders/o1/pay", key: "k1", body: pay}, {path: "/orders/o1/pay", key: "k1", body: pay, scope: domain.CustomerScope("c2")},
				{path: "/orders/o1/pay", key: "k1", body: pay, scope: domain.CustomerScope("c2")}},
			wants: []want{{status: 201, ran: true}, {status: 201, ran: true}, {status: 201, replayOf: 2}}},
		{name: "sealed route: replayed in clear, stored sealed",
			reqs:  []req{{path: "/customers", key: "reg-1", body: `{"email":"ada@example.com"}`, scope: domain.ScopePublic}, {path: "/customers", key: "reg-1", body: `{"email":"ada@example.com"}`, scope: domain.ScopePublic}},
			wants: []want{{status: 201, ran: true}, {status: 201, replayOf: 1}}},
		{name: "sealed with a secret payd no longer has: 410, not executed again",
			setup: func(t *testing.T, s *server) {
				old := engineOn(t, s.records, "the secret before rotation")
				c := s.call(domain.ScopePublic, "reg-1", "/customers", `{"email":"ada@example.com"}`)
				begin(t, old, c)
				finish(t, old, c, 201, `{"token":"ptk_old"}`)
			},
			reqs:  []req{{path: "/customers", key: "reg-1", body: `{"email":"ada@example.com"}`, scope: domain.ScopePublic}},
			wants: []want{{status: 410, code: "stored_response_unreadable"}}},
		{name: "multipart upload: the same file under a new boundary is the same request, another file is not",
			reqs: []req{{path: "/uploads", key: "up-1", body: upload1, contentType: uploadType1}, {path: "/uploads", key: "up-1", body: upload2, contentType: uploadType2},
				{path: "/uploads", key: "up-1", body: upload3, contentType: uploadType3}},
			wants: []want{{status: 201, ran: true}, {status: 201, replayOf: 1}, {status: 422, code: "idempotency_key_reused"}}},
		{name: "multipart on a JSON-only route is not parsed as a form",
			reqs:  []req{{path: "/orders/o1/pay", key: "k1", body: upload1, contentType: uploadType1}},
			wants: []want{{status: 400, code: "validation_failed"}}},
	}
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := newServer(t, repository.NewRecordStore(db))
				s.prefix = fmt.Sprintf("r%d-", i)
				if tt.setup != nil {
					tt.setup(t, s)
				}
				var bodies [][]byte
				for j, r := range tt.reqs {
					before := s.runs.Load()
					w := s.do(t, r)
					bodies = append(bodies, w.Body.Bytes())
					s.check(t, j, r, w, tt.wants[j], s.runs.Load() > before, bodies)
				}
			})
		}
	})
}

func (s *server) check(t *testing.T, j int, r req, w *httptest.ResponseRecorder, wt want, ran bool, bodies [][]byte) {
	t.Helper()
	where := fmt.Sprintf("request #%d %s %s key %q", j+1, r.method, r.path, r.key)
	if w.Code != wt.status {
		t.Errorf("%s: status %d (%s), want %d", where, w.Code, w.Body, wt.status)
	}
	if ran != wt.ran {
		t.Errorf("%s: executed = %v, want %v", where, ran, wt.ran)
	}
	replayed := w.Header().Get("Idempotent-Replayed") == "true"
	if replayed != (wt.replayOf != 0) {
		t.Errorf("%s: Idempotent-Replayed = %q, want replayed %v", where, w.Header().Get("Idempotent-Replayed"), wt.replayOf != 0)
	}
	if wt.replayOf > 0 && !bytes.Equal(w.Body.Bytes(), bodies[wt.replayOf-1]) {
		t.Errorf("%s: replay body %s, want byte-identical %s", where, w.Body, bodies[wt.replayOf-1])
	}
	if wt.code != "" {
		var p struct{ Code string }
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Code != wt.code {
			t.Errorf("%s: code %q (%s), want %q", where, p.Code, w.Body, wt.code)
		}
	}
	if wt.code == "idempotency_key_in_use" {
		if ra, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || ra < 1 {
			t.Errorf("%s: Retry-After %q, want whole seconds >= 1", where, w.Header().Get("Retry-After"))
		}
	}
}
