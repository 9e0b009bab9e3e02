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
	key          string   // "header or body", "optional" or ""
	signed       bool     // it takes a Standard Webhooks signature
	okTypes      []string // media types of the 200 response
}

// The two ways the document describes an Idempotency-Key header: optional
// because the body's request_id may stand in for it (one of the two is
// required), or optional outright (order creation, without dedupe).
const (
	keyHeaderOrBody = "#/components/parameters/IdempotencyKeyOrRequestID"
	keyOptional     = "#/components/parameters/IdempotencyKeyOptional"
)

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
				if prm.Value.In != openapi3.ParameterInHeader {
					continue
				}
				switch {
				case prm.Value.Name == "Idempotency-Key" && prm.Ref == keyHeaderOrBody:
					p.key = "header or body"
				case prm.Value.Name == "Idempotency-Key" && prm.Ref == keyOptional:
					p.key = "optional"
				case prm.Value.Name == "Idempotency-Key":
					t.Errorf("%s %s: Idempotency-Key is neither %s nor %s", method, path, keyHeaderOrBody, keyOptional)
				case prm.Value.Name == "webhook-signature" && prm.Value.Required:
					p.signed = true
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
// without one (401), those needing an idempotency key in the header or the
// body refuse one with neither (400 idempotency_key_missing), take the
// body's request_id alone, and refuse the two when they differ (400
// idempotency_key_invalid); an optional key is optional, the webhook
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
	kinds := map[string]int{}
	for _, op := range ops {
		kinds[op.key]++
		if op.signed {
			kinds["signed"]++
		}
	}
	if kinds["header or body"] < 5 || kinds["optional"] != 1 || kinds["signed"] != 1 {
		t.Fatalf("operations by key and signature = %v, want the keyed routes, order creation and the provider webhook", kinds)
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
		case op.signed:
			if r := s.do(req); r.Status != http.StatusUnauthorized || r.code(t) != "invalid_signature" {
				t.Errorf("%s unsigned = %d %s, want 401 invalid_signature", name, r.Status, r.Body)
			}
		}
		if contains(op.security, "customerToken") || contains(op.security, "adminToken") || contains(op.security, "merchantKey") {
			if r := s.do(req); r.Status != http.StatusUnauthorized || r.code(t) != "unauthorized" {
				t.Errorf("%s without a token = %d %s, want 401 unauthorized", name, r.Status, r.Body)
			}
			req.token = token
			if contains(op.security, "adminToken") {
				req.token = testAdminToken
			}
			if contains(op.security, "merchantKey") {
				req.token = testMerchantKey
			}
		} else if strings.HasPrefix(op.path, "/v1/") && op.key != "" {
			if r := s.do(req); r.Status == http.StatusUnauthorized {
				t.Errorf("%s is documented without security but answers 401", name)
			}
		}
		switch op.key {
		case "header or body":
			if r := s.do(req); r.Status != http.StatusBadRequest || r.code(t) != "idempotency_key_missing" {
				t.Errorf("%s without Idempotency-Key or request_id = %d %s, want 400 idempotency_key_missing", name, r.Status, r.Body)
			}
			inBody := req
			inBody.body = `{"request_id":"` + uuid.NewString() + `"}`
			if r := s.do(inBody); r.Status < 400 || r.code(t) == "idempotency_key_missing" || r.code(t) == "idempotency_key_invalid" {
				// Nothing to pay, refund or resolve: a problem, but not the key's.
				t.Errorf("%s with only the body's request_id = %d %s, want a problem other than the key's", name, r.Status, r.Body)
			}
			inBody.key = uuid.NewString()
			if r := s.do(inBody); r.Status != http.StatusBadRequest || r.code(t) != "idempotency_key_invalid" {
				t.Errorf("%s with Idempotency-Key and request_id differing = %d %s, want 400 idempotency_key_invalid", name, r.Status, r.Body)
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
