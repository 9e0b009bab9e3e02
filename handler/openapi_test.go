package handler

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"go.yaml.in/yaml/v3"
)

// apiDoc is the parsed OpenAPI document, as generic YAML.
type apiDoc map[string]any

func loadAPIDoc(t *testing.T) apiDoc {
	t.Helper()
	var m map[string]any // not apiDoc: nested mappings would take its type
	if err := yaml.Unmarshal(OpenAPI, &m); err != nil {
		t.Fatalf("yaml.Unmarshal(openapi.yaml) = %v, want a document", err)
	}
	d := apiDoc(m)
	if v, _ := d["openapi"].(string); !strings.HasPrefix(v, "3.") {
		t.Fatalf("openapi = %q, want 3.x", v)
	}
	return d
}

// resolve follows a local $ref ("#/components/...") until it reaches a node.
func (d apiDoc) resolve(t *testing.T, node any) map[string]any {
	t.Helper()
	m, _ := node.(map[string]any)
	for i := 0; m != nil && i < 10; i++ {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		var cur any = map[string]any(d)
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			cm, _ := cur.(map[string]any)
			cur = cm[part]
		}
		if m, _ = cur.(map[string]any); m == nil {
			t.Fatalf("$ref %q resolves to nothing", ref)
		}
	}
	return m
}

var httpMethods = map[string]bool{"get": true, "put": true, "post": true, "delete": true, "patch": true, "head": true, "options": true}

// operations calls fn for every documented path and method.
func (d apiDoc) operations(fn func(path, method string, op map[string]any)) {
	paths, _ := d["paths"].(map[string]any)
	for path, item := range paths {
		im, _ := item.(map[string]any)
		for method, op := range im {
			if httpMethods[method] {
				om, _ := op.(map[string]any)
				fn(path, strings.ToUpper(method), om)
			}
		}
	}
}

var (
	echoParam = regexp.MustCompile(`:[A-Za-z_]+|\*`)
	docParam  = regexp.MustCompile(`\{[A-Za-z_]+\}`)
)

// TestOpenAPIDescribesEveryRoute holds the document and the router together:
// every route Echo serves is documented with its method, and every
// documented operation is served.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	d := loadAPIDoc(t)
	e := New(Deps{Log: slog.New(slog.DiscardHandler)})
	served := map[string]string{} // "METHOD shape" -> echo path
	for _, r := range e.Routes() {
		if r.Method == echo.RouteNotFound {
			continue // Echo's own 404 catch-alls of groups
		}
		served[r.Method+" "+echoParam.ReplaceAllString(r.Path, "{}")] = r.Path
	}
	documented := map[string]string{}
	d.operations(func(path, method string, _ map[string]any) {
		documented[method+" "+docParam.ReplaceAllString(path, "{}")] = path
	})
	if len(served) < 20 {
		t.Fatalf("New() serves %d routes, want the whole API (at least 20)", len(served))
	}
	for k, p := range served {
		doc, ok := documented[k]
		if !ok {
			t.Errorf("route %s (%s) is served but not in openapi.yaml", k, p)
			continue
		}
		// Named parameters must carry the same names (:id is {id}).
		want := regexp.MustCompile(`:([A-Za-z_]+)`).ReplaceAllString(p, "{$1}")
		if !strings.Contains(p, "*") && doc != want {
			t.Errorf("route %s is documented as %s, want %s", p, doc, want)
		}
	}
	for k := range documented {
		if _, ok := served[k]; !ok {
			t.Errorf("openapi.yaml documents %s, which no route serves", k)
		}
	}
}

// TestOpenAPIIsWellFormed checks what a client generator relies on: every
// $ref resolves, path parameters are declared exactly, error responses are
// problem documents, and the operations that need an idempotency key, a
// token or a body say how they fail without one.
func TestOpenAPIIsWellFormed(t *testing.T) {
	d := loadAPIDoc(t)
	checkRefs(t, d, map[string]any(d))
	ids := map[string]string{}
	d.operations(func(path, method string, op map[string]any) {
		name := method + " " + path
		if id, _ := op["operationId"].(string); id == "" || ids[id] != "" {
			t.Errorf("%s: operationId %q is empty or used twice", name, id)
		} else {
			ids[id] = name
		}
		params := map[string]map[string]any{}
		for _, p := range list(op["parameters"]) {
			pm := d.resolve(t, p)
			in, _ := pm["in"].(string)
			n, _ := pm["name"].(string)
			params[in+":"+n] = pm
		}
		var inPath, inTemplate []string
		for k := range params {
			if n, ok := strings.CutPrefix(k, "path:"); ok {
				inPath = append(inPath, n)
			}
		}
		for _, m := range docParam.FindAllString(path, -1) {
			inTemplate = append(inTemplate, strings.Trim(m, "{}"))
		}
		sort.Strings(inPath)
		sort.Strings(inTemplate)
		if strings.Join(inPath, ",") != strings.Join(inTemplate, ",") {
			t.Errorf("%s: path parameters %v, want %v", name, inPath, inTemplate)
		}
		responses, _ := op["responses"].(map[string]any)
		if len(responses) == 0 {
			t.Errorf("%s: no responses", name)
		}
		for code, r := range responses {
			checkResponse(t, d, name, path, code, d.resolve(t, r))
		}
		mustHave := func(code, why string) {
			if _, ok := responses[code]; !ok {
				t.Errorf("%s: %s, but no %s response is documented", name, why, code)
			}
		}
		if key, ok := params["header:Idempotency-Key"]; ok {
			mustHave("409", "it takes an Idempotency-Key (in use)")
			mustHave("422", "it takes an Idempotency-Key (reused)")
			if key["required"] == true {
				mustHave("400", "it requires an Idempotency-Key")
			}
		}
		for _, s := range list(op["security"]) {
			sm, _ := s.(map[string]any)
			if _, bearer := sm["customerToken"]; bearer {
				mustHave("401", "it needs a customer token")
			}
			if _, bearer := sm["adminToken"]; bearer {
				mustHave("401", "it needs the admin token")
			}
		}
		if _, ok := op["requestBody"]; ok {
			mustHave("413", "it takes a body")
			mustHave("415", "it takes a body")
		}
	})
}

func checkResponse(t *testing.T, d apiDoc, name, path, code string, r map[string]any) {
	t.Helper()
	status, err := strconv.Atoi(code)
	if err != nil {
		t.Errorf("%s: response %q is not a status code", name, code)
		return
	}
	content, _ := r["content"].(map[string]any)
	if status >= 400 && (strings.HasPrefix(path, "/v1/") || path == "/readyz") {
		pj, _ := content["application/problem+json"].(map[string]any)
		schema, _ := pj["schema"].(map[string]any)
		if len(content) != 1 || schema["$ref"] != "#/components/schemas/Problem" {
			t.Errorf("%s %d: content = %v, want only application/problem+json with the Problem schema", name, status, content)
		}
	}
	if status < 400 && len(content) == 0 {
		t.Errorf("%s %d: no content described", name, status)
	}
}

// checkRefs walks the whole document and resolves every $ref in it.
func checkRefs(t *testing.T, d apiDoc, node any) {
	t.Helper()
	switch n := node.(type) {
	case map[string]any:
		if ref, ok := n["$ref"].(string); ok {
			if !strings.HasPrefix(ref, "#/components/") {
				t.Errorf("$ref %q is not local to components", ref)
			}
			d.resolve(t, n)
		}
		for _, v := range n {
			checkRefs(t, d, v)
		}
	case []any:
		for _, v := range n {
			checkRefs(t, d, v)
		}
	}
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// TestServeOpenAPI: the document is served as is, as YAML.
func TestServeOpenAPI(t *testing.T) {
	e := New(Deps{Log: slog.New(slog.DiscardHandler)})
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.yaml", nil))
	if rec.Code != http.StatusOK || !bytes.Equal(rec.Body.Bytes(), OpenAPI) {
		t.Fatalf("GET /openapi.yaml = %d (%d bytes), want 200 with the embedded document (%d bytes)", rec.Code, rec.Body.Len(), len(OpenAPI))
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/yaml" {
		t.Errorf("GET /openapi.yaml Content-Type = %q, want application/yaml", ct)
	}
}
