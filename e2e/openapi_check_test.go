package e2e

import (
	"bytes"
	"context"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/payd/payd/handler"
)

// The document and its router are built once per test process: every
// end-to-end call is checked against them, so the check must stay cheap.
var contract struct {
	once   sync.Once
	router routers.Router
	err    error
}

func contractRouter() (routers.Router, error) {
	contract.once.Do(func() {
		doc, err := openapi3.NewLoader().LoadFromData(handler.OpenAPI)
		if err != nil {
			contract.err = err
			return
		}
		if err = doc.Validate(context.Background()); err != nil {
			contract.err = err
			return
		}
		// The document names the development address; the tests' payd
		// listens on a port of its own, so match paths on any host.
		doc.Servers = nil
		contract.router, contract.err = gorillamux.NewRouter(doc)
	})
	return contract.router, contract.err
}

// jsonBody reports whether a media type is JSON, the only bodies checked
// against a schema. The others (the event stream, /metrics' text, the YAML
// document itself, the checkout page's HTML, script and style sheet) are
// checked for status, headers and a documented media type only.
func jsonBody(contentType string) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// checkContract validates one answer payd gave against openapi.yaml (see
// contractError) and fails the test when it does not conform.
func checkContract(t *testing.T, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	if err := contractError(req, status, header, body); err != nil {
		t.Errorf("contract: %s %s answered %d, not as openapi.yaml says: %v\nbody: %s",
			req.Method, req.URL.RequestURI(), status, err, truncate(body))
	}
}

// contractError says how an answer departs from openapi.yaml: the route
// and method must be documented, the status documented for that
// operation, the documented headers well formed, the media type documented
// and a JSON body valid against its schema. A request to a route that
// payd does not serve either must get the generic not_found or
// method_not_allowed problem.
func contractError(req *http.Request, status int, header http.Header, body []byte) error {
	router, err := contractRouter()
	if err != nil {
		return fmt.Errorf("openapi.yaml: %w", err)
	}
	route, params, err := router.FindRoute(req)
	if err != nil {
		if (status == http.StatusNotFound || status == http.StatusMethodNotAllowed) && jsonBody(header.Get("Content-Type")) &&
			(bytes.Contains(body, []byte(`"code":"not_found"`)) || bytes.Contains(body, []byte(`"code":"method_not_allowed"`))) {
			return nil // payd does not serve it either
		}
		return fmt.Errorf("the route is not in openapi.yaml (%w)", err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(body)
	if ct := header.Get("Content-Type"); !jsonBody(ct) || req.Method == http.MethodHead { // a HEAD answer has no body to check
		in.Options.ExcludeResponseBody = true
		if resp := route.Operation.Responses.Status(status); resp != nil && resp.Value != nil && len(resp.Value.Content) > 0 && resp.Value.Content.Get(ct) == nil {
			return fmt.Errorf("Content-Type %q is not documented for that status", ct)
		}
	}
	return openapi3filter.ValidateResponse(context.Background(), in)
}

// TestContractCheckCatchesDrift shows the check every end-to-end call goes
// through can fail: a conforming answer passes, and an undocumented route,
// status, media type or body shape is reported.
func TestContractCheckCatchesDrift(t *testing.T) {
	get := func(path string) *http.Request {
		req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:1"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	js := http.Header{"Content-Type": {"application/json"}}
	problemJSON := http.Header{"Content-Type": {"application/problem+json"}}
	cases := []struct {
		name   string
		req    *http.Request
		status int
		header http.Header
		body   string
		ok     bool
	}{
		{"documented", get("/healthz"), 200, js, `{"status":"ok"}`, true},
		{"unserved route, generic 404", get("/nope"), 404, problemJSON, `{"type":"/problems/not_found","title":"Not found","status":404,"code":"not_found"}`, true},
		{"undocumented route answering", get("/v1/secret"), 200, js, `{}`, false},
		{"undocumented status", get("/healthz"), 418, js, `{"status":"ok"}`, false},
		{"undocumented media type", get("/healthz"), 200, http.Header{"Content-Type": {"text/plain"}}, `ok`, false},
		{"body off schema", get("/healthz"), 200, js, `{"status":"fine"}`, false},
		{"problem code off the enum", get("/readyz"), 503, problemJSON, `{"type":"/problems/x","title":"X","status":503,"code":"no_such_code"}`, false},
	}
	for _, c := range cases {
		err := contractError(c.req, c.status, c.header, []byte(c.body))
		if (err == nil) != c.ok {
			t.Errorf("%s: contractError = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

func truncate(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "..."
	}
	return string(b)
}
