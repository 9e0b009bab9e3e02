package main

import (
	"bytes"
	"context"
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

// checkContract validates one answer payd gave against openapi.yaml: the
// route and method must be documented, the status documented for that
// operation, the documented headers well formed, the media type documented
// and a JSON body valid against its schema. A request to a route that
// payd does not serve either must get the generic not_found or
// method_not_allowed problem.
func checkContract(t *testing.T, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	router, err := contractRouter()
	if err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	name := req.Method + " " + req.URL.RequestURI()
	route, params, err := router.FindRoute(req)
	if err != nil {
		if (status == http.StatusNotFound || status == http.StatusMethodNotAllowed) && jsonBody(header.Get("Content-Type")) &&
			(bytes.Contains(body, []byte(`"code":"not_found"`)) || bytes.Contains(body, []byte(`"code":"method_not_allowed"`))) {
			return // payd does not serve it either
		}
		t.Errorf("contract: %s answered %d, but the route is not in openapi.yaml (%v)", name, status, err)
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(body)
	if ct := header.Get("Content-Type"); !jsonBody(ct) {
		in.Options.ExcludeResponseBody = true
		if resp := route.Operation.Responses.Status(status); resp != nil && resp.Value != nil && len(resp.Value.Content) > 0 && resp.Value.Content.Get(ct) == nil {
			t.Errorf("contract: %s answered %d with Content-Type %q, not documented for that status", name, status, ct)
		}
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("contract: %s answered %d, not as openapi.yaml says: %v\nbody: %s", name, status, err, truncate(body))
	}
}

func truncate(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "..."
	}
	return string(b)
}
