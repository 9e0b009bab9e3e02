package e2e

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/uuid"

	"github.com/payd/payd/handler"
)

// probeOp is one documented operation, as far as the probe needs it.
type probeOp struct {
	method, path string
	security     []string // scheme names
	key          string   // "required", "optional" or ""
	okTypes      []string // media types of the 200 response
}

func documentedOps(t *testing.T) []probeOp {
	t.Helper()
	// kin-openapi reads the document, $refs resolved, as any other tool
	// would: a hand walk of the YAML once missed what YAML really parsed.
	doc, err := openapi3.NewLoader().LoadFromData(handler.OpenAPI)
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	var ops []probeOp
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			p := probeOp{method: method, path: path}
			if op.Security != nil {
				for _, s := range *op.Security {
					for name := range s {
						p.security = append(p.security, name)
					}
				}
			}
			for _, prm := range op.Parameters {
				if prm.Value.In == openapi3.ParameterInHeader && prm.Value.Name == "Idempotency-Key" {
					p.key = map[bool]string{true: "required", false: "optional"}[prm.Value.Required]
				}
			}
			if ok := op.Responses.Status(http.StatusOK); ok != nil {
				for ct := range ok.Value.Content {
					p.okTypes = append(p.okTypes, ct)
				}
			}
			ops = append(ops, p)
		}
	}
	return ops
}

// TestOpenAPIMatchesBehaviour asks the running payd what the document
// promises: operations documented as needing a token refuse a request
// without one (401), those needing an idempotency key refuse one without it
// (400 idempotency_key_missing), an optional key is optional, the webhook
// refuses an unsigned event, and the open GET routes answer 200 with a
// documented media type.
func TestOpenAPIMatchesBehaviour(t *testing.T) {
	s := start(t, on("sqlite"))
	_, token := s.register("probe-" + uuid.NewString() + "@example.com")
	param := regexp.MustCompile(`\{[^}]+\}`)
	ops := documentedOps(t)
	if len(ops) < 20 {
		t.Fatalf("openapi.yaml documents %d operations, want the whole API", len(ops))
	}
	for _, op := range ops {
		path := param.ReplaceAllStringFunc(op.path, func(p string) string {
			if p == "{scope}" {
				return "admin"
			}
			return uuid.NewString()
		})
		req := request{method: op.method, path: path}
		if op.method == http.MethodPost {
			req.body = "{}"
		}
		name := op.method + " " + op.path
		switch {
		case len(op.security) == 0 && op.method == http.MethodGet && !strings.Contains(op.path, "{"):
			r := s.do(req)
			ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
			if r.Status != http.StatusOK || !contains(op.okTypes, ct) {
				t.Errorf("%s = %d %q, want 200 with one of %v", name, r.Status, ct, op.okTypes)
			}
		case contains(op.security, "webhookSignature"):
			if r := s.do(req); r.Status != http.StatusUnauthorized || r.code(t) != "invalid_signature" {
				t.Errorf("%s unsigned = %d %s, want 401 invalid_signature", name, r.Status, r.Body)
			}
		}
		if contains(op.security, "customerToken") || contains(op.security, "adminToken") {
			if r := s.do(req); r.Status != http.StatusUnauthorized || r.code(t) != "unauthorized" {
				t.Errorf("%s without a token = %d %s, want 401 unauthorized", name, r.Status, r.Body)
			}
			req.token = token
			if contains(op.security, "adminToken") {
				req.token = testAdminToken
			}
		} else if strings.HasPrefix(op.path, "/v1/") && op.key != "" {
			if r := s.do(req); r.Status == http.StatusUnauthorized {
				t.Errorf("%s is documented without security but answers 401", name)
			}
		}
		switch op.key {
		case "required":
			if r := s.do(req); r.Status != http.StatusBadRequest || r.code(t) != "idempotency_key_missing" {
				t.Errorf("%s without Idempotency-Key = %d %s, want 400 idempotency_key_missing", name, r.Status, r.Body)
			}
		case "optional":
			if r := s.do(req); r.Status < 400 || r.code(t) == "idempotency_key_missing" {
				// An empty order is invalid, but not for want of a key.
				t.Errorf("%s without Idempotency-Key = %d %s, want a validation problem other than a missing key", name, r.Status, r.Body)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
