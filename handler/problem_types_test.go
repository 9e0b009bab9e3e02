package handler

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/payd/payd/domain"
)

// usedProblems finds every problem("code", ...) call in the handler
// package's source and every row of errorTable: the codes payd can answer
// with.
func usedProblems(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if fn, isIdent := call.Fun.(*ast.Ident); !isIdent || fn.Name != "problem" || len(call.Args) != 2 {
				return true
			}
			if sel, isSel := call.Args[0].(*ast.SelectorExpr); isSel && sel.Sel.Name == "code" {
				return true // a row of errorTable: added below
			}
			code := stringLit(call.Args[0])
			if code == "" {
				t.Errorf("%s: problem(...) with a code that is not a literal: the catalogue cannot be checked", fset.Position(call.Pos()))
				return true
			}
			used[code] = true
			return true
		})
	}
	for _, row := range errorTable {
		used[row.code] = true
	}
	if len(used) < 30 {
		t.Fatalf("found %d problem codes in the source, want all of them (30 or more)", len(used))
	}
	return used
}

func stringLit(e ast.Expr) string {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return ""
	}
	s, _ := strconv.Unquote(lit.Value)
	return s
}

// TestOneTitlePerCode: every code payd answers with is in the catalogue
// (so its type URI resolves, and its one status and title come from
// there), every problem carries the catalogue's status and title, and the
// catalogue holds no code nothing raises.
func TestOneTitlePerCode(t *testing.T) {
	used := usedProblems(t)
	for code := range used {
		if _, ok := problemTypes[code]; !ok {
			t.Errorf("code %q is raised but has no problem type (no /problems/%s page)", code, code)
		}
	}
	for _, code := range problemCodes() {
		if !used[code] {
			t.Errorf("problem type %q is catalogued but never raised", code)
		}
	}
	var all []*Problem
	for _, row := range errorTable {
		if _, ok := problemTypes[row.code]; !ok {
			t.Errorf("errorTable row %s has no problem type", row.code)
			continue
		}
		all = append(all, problem(row.code, row.detail))
	}
	all = append(all, errMalformedJSON, errTooLarge, errContentType, errKeyConflict, errRouteNotFound,
		errMethodNotAllow, errTooManyStreams, errNotCompleted, errInvalidSignature, rateLimited(1))
	for _, p := range all {
		if pt := problemTypes[p.Code]; pt.Status != p.Status || pt.Title != p.Title || p.Type != "/problems/"+p.Code {
			t.Errorf("%s: %d %q %s, catalogue says %d %q", p.Code, p.Status, p.Title, p.Type, pt.Status, pt.Title)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("problem(uncatalogued code) did not panic")
		}
	}()
	problem("no_such_code", "")
}

// TestEveryCodeHasAPage: GET /problems/{code} answers 200 for every code,
// as HTML or as JSON on request, without a token; an unknown code is a 404
// problem.
func TestEveryCodeHasAPage(t *testing.T) {
	e := New(Deps{Log: slog.New(slog.DiscardHandler)})
	get := func(path, accept string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}
	for code := range usedProblems(t) {
		pt := problemTypes[code]
		rec := get("/problems/"+code, "")
		if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") ||
			!strings.Contains(rec.Body.String(), code) || !strings.Contains(rec.Body.String(), "<h1>") {
			t.Errorf("GET /problems/%s = %d %s %q, want an HTML page", code, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
			continue
		}
		rec = get("/problems/"+code, "application/json")
		var doc struct {
			Code, Title, Description string
			Status                   int
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || rec.Code != http.StatusOK || doc.Code != code ||
			doc.Title != pt.Title || doc.Status != pt.Status || len(doc.Description) < 20 {
			t.Errorf("GET /problems/%s (JSON) = %d %s, want its code, title, status and a description", code, rec.Code, rec.Body)
		}
	}
	rec := get("/problems/no_such_code", "")
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `"code":"not_found"`) {
		t.Errorf("GET /problems/no_such_code = %d %s, want 404 not_found", rec.Code, rec.Body)
	}
}

// TestProblemNamesItsOccurrence: instance is the request's path without
// its query, request_id the caller's X-Request-ID, and the shared problem
// values are not written to.
func TestProblemNamesItsOccurrence(t *testing.T) {
	e := New(Deps{Log: slog.New(slog.DiscardHandler)})
	for _, tt := range []struct{ path, traceID, code, instance string }{
		{"/v1/orders?status=paid", "trace-1", "unauthorized", "/v1/orders"},
		{"/v1/no/such/route?x=1", "trace-2", "not_found", "/v1/no/such/route"},
		{"/v1/no/such%20route", "trace-3", "not_found", "/v1/no/such%20route"},
	} {
		req := httptest.NewRequest(http.MethodGet, tt.path, nil)
		req.Header.Set("X-Request-ID", tt.traceID)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		var p Problem
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
			t.Fatalf("GET %s: %v", tt.path, err)
		}
		if p.Code != tt.code || p.Instance != tt.instance || p.RequestID != tt.traceID || p.Type != "/problems/"+tt.code {
			t.Errorf("GET %s = %s, want %s with instance %q and request_id %q", tt.path, rec.Body, tt.code, tt.instance, tt.traceID)
		}
	}
	if errRouteNotFound.Instance != "" || errRouteNotFound.RequestID != "" {
		t.Errorf("errRouteNotFound was written to: %+v", errRouteNotFound)
	}
}

// TestValidationProblemListsEveryField: every field of a ValidationErrors
// becomes an errors entry; detail stays a readable summary; a single
// ValidationError is a list of one.
func TestValidationProblemListsEveryField(t *testing.T) {
	err := domain.ValidationErrors{
		{Field: "currency", Reason: `"EURO" is not a supported ISO 4217 currency code`},
		{Field: "items[0].unit_price", Reason: `must be a decimal string such as "12.30"`},
		{Field: "items[1].name", Reason: "must be 1 to 200 characters"},
	}
	p, known := toProblem(err)
	want := []FieldError{{"currency", err[0].Reason}, {"items[0].unit_price", err[1].Reason}, {"items[1].name", err[2].Reason}}
	if !known || p.Code != "validation_failed" || p.Status != 400 || !reflect.DeepEqual(p.Errors, want) {
		t.Errorf("toProblem(%v) = %+v, want validation_failed listing %v", err, p, want)
	}
	if !strings.Contains(p.Detail, "currency: ") || !strings.Contains(p.Detail, "items[1].name: must be") {
		t.Errorf("detail = %q, want every field summarised", p.Detail)
	}
	p, _ = toProblem(&domain.ValidationError{Field: "limit", Reason: "must be a whole number from 1 to 100"})
	if len(p.Errors) != 1 || p.Errors[0].Param != "limit" || p.Detail != "limit: must be a whole number from 1 to 100" {
		t.Errorf("toProblem(one field) = %+v, want one errors entry and the same detail as before", p)
	}
}

// TestFieldProblems: the body walker names every unknown field and every
// wrong JSON type, with its path, and accepts what encoding/json accepts.
func TestFieldProblems(t *testing.T) {
	tests := []struct {
		body string
		want []string
	}{
		{`{"currency":"USD","items":[{"sku":"a","name":"A","quantity":1,"unit_price":"1.00"}]}`, nil},
		{`{"Currency":"USD","items":null,"request_id":"k"}`, nil}, // case-insensitive names, null, the embedded key field
		{`{"currency":1,"items":[{"sku":"a","name":"A","quantity":"1","unit_price":1.5},{"quantity":1.5,"colour":"red"}],"coupon":"x"}`,
			[]string{"coupon", "currency", "items[0].quantity", "items[0].unit_price", "items[1].colour", "items[1].quantity"}},
		{`{"items":{"sku":"a"}}`, []string{"items"}},
	}
	for _, tt := range tests {
		var got []string
		for _, e := range fieldProblems([]byte(tt.body), reflect.TypeFor[*createOrderRequest]()) {
			got = append(got, e.Field)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("fieldProblems(%s) = %v, want %v", tt.body, got, tt.want)
		}
	}
	if got := fieldProblems([]byte(`{"currency":`), reflect.TypeFor[*createOrderRequest]()); got != nil {
		t.Errorf("fieldProblems(malformed) = %v, want nil (a malformed-JSON problem)", got)
	}
}
