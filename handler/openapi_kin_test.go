package handler

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestOpenAPIValidatesWithKin loads the served document with a real OpenAPI
// implementation and validates it, examples included: walking the YAML by
// hand missed a flow mapping that YAML read differently than it looked.
func TestOpenAPIValidatesWithKin(t *testing.T) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(OpenAPI)
	if err != nil {
		t.Fatalf("kin-openapi cannot load openapi.yaml: %v", err)
	}
	if err := doc.Validate(context.Background(), openapi3.EnableExamplesValidation()); err != nil {
		t.Fatalf("openapi.yaml is not a valid OpenAPI document: %v", err)
	}
}

// loadKin is the document as kin-openapi reads it.
func loadKin(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI)
	if err != nil {
		t.Fatalf("kin-openapi cannot load openapi.yaml: %v", err)
	}
	return doc
}

// raisedCodes is every problem code payd can answer: the error table's and
// those the handlers raise themselves (found in the source, so a new one
// cannot be forgotten).
func raisedCodes(t *testing.T) map[string]bool {
	t.Helper()
	codes := map[string]bool{}
	for _, row := range errorTable {
		codes[row.code] = true
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	raised := regexp.MustCompile(`problem\(\s*"([a-z_]+)"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range raised.FindAllSubmatch(src, -1) {
			codes[string(m[1])] = true
		}
	}
	return codes
}

// TestOpenAPIEnumeratesProblemCodes holds the Problem schema's code enum to
// the codes payd really answers, both ways.
func TestOpenAPIEnumeratesProblemCodes(t *testing.T) {
	doc := loadKin(t)
	p := doc.Components.Schemas["Problem"]
	if p == nil || p.Value == nil || p.Value.Properties["code"] == nil {
		t.Fatal("openapi.yaml has no Problem schema with a code")
	}
	documented := map[string]bool{}
	for _, v := range p.Value.Properties["code"].Value.Enum {
		s, _ := v.(string)
		documented[s] = true
	}
	raised := raisedCodes(t)
	for _, want := range []string{"validation_failed", "service_unavailable", "invalid_signature", "not_ready", "card_declined"} {
		if !raised[want] {
			t.Fatalf("raisedCodes misses %q: the source scan is broken", want)
		}
	}
	for c := range raised {
		if !documented[c] {
			t.Errorf("problem code %q is answered by payd but missing from the Problem code enum", c)
		}
	}
	for c := range documented {
		if !raised[c] {
			t.Errorf("problem code %q is in the enum but payd never answers it", c)
		}
	}
}

// TestOpenAPIDescribesUnavailable: every /v1 operation reads or writes the
// database, so each can answer 503 service_unavailable with Retry-After
// while it is unreachable; the document must say so, through the shared
// component.
func TestOpenAPIDescribesUnavailable(t *testing.T) {
	doc := loadKin(t)
	su := doc.Components.Responses["ServiceUnavailable"]
	if su == nil || su.Value == nil || su.Value.Headers["Retry-After"] == nil {
		t.Fatal("components/responses/ServiceUnavailable with a Retry-After header is missing")
	}
	for path, item := range doc.Paths.Map() {
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		for method, op := range item.Operations() {
			r := op.Responses.Status(503)
			if r == nil || r.Ref != "#/components/responses/ServiceUnavailable" {
				t.Errorf("%s %s: no 503 response referring to components/responses/ServiceUnavailable", method, path)
			}
		}
	}
}

// TestOpenAPIHasExamples: every request body and every response with a
// body shows an example, so a reader (and the generated client's users)
// see real payloads; kin-openapi checks each against its schema.
func TestOpenAPIHasExamples(t *testing.T) {
	doc := loadKin(t)
	hasExample := func(mt *openapi3.MediaType) bool {
		return mt.Example != nil || len(mt.Examples) > 0 || (mt.Schema != nil && mt.Schema.Value != nil && mt.Schema.Value.Example != nil)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			name := method + " " + path
			if op.RequestBody != nil {
				for ct, mt := range op.RequestBody.Value.Content {
					if !hasExample(mt) {
						t.Errorf("%s: request body %s has no example", name, ct)
					}
				}
			}
			for status, r := range op.Responses.Map() {
				for ct, mt := range r.Value.Content {
					if !hasExample(mt) {
						t.Errorf("%s: response %s %s has no example", name, status, ct)
					}
				}
			}
		}
	}
}

// TestOpenAPIDescribesRateLimited: every operation but the probes and
// /metrics can answer 429 rate_limited with Retry-After, RateLimit-Policy
// and RateLimit, through the shared component (or, where the route has a
// 429 of its own, a response that names rate_limited and carries the same
// headers).
func TestOpenAPIDescribesRateLimited(t *testing.T) {
	doc := loadKin(t)
	rl := doc.Components.Responses["RateLimited"]
	if rl == nil || rl.Value == nil {
		t.Fatal("components/responses/RateLimited is missing")
	}
	headers := []string{"Retry-After", "RateLimit-Policy", "RateLimit"}
	for _, h := range headers {
		if rl.Value.Headers[h] == nil {
			t.Errorf("components/responses/RateLimited has no %s header", h)
		}
	}
	never := map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			r := op.Responses.Status(429)
			if never[path] {
				if r != nil {
					t.Errorf("%s %s is never rate limited but documents a 429", method, path)
				}
				continue
			}
			if r == nil || r.Value == nil {
				t.Errorf("%s %s: no 429 response", method, path)
				continue
			}
			if r.Ref == "#/components/responses/RateLimited" {
				continue
			}
			for _, h := range headers {
				if r.Value.Headers[h] == nil {
					t.Errorf("%s %s: its 429 has no %s header", method, path, h)
				}
			}
			mt := r.Value.Content["application/problem+json"]
			if mt == nil || mt.Examples["rate_limited"] == nil {
				t.Errorf("%s %s: its 429 does not name rate_limited", method, path)
			}
		}
	}
}

// TestOpenAPIDeclaresSecurity: every operation says how it is
// authenticated, a bearer scheme or `security: []` for a public one (the
// document has no default), so a gateway never has to guess; the webhooks
// are public and name their signature header instead.
func TestOpenAPIDeclaresSecurity(t *testing.T) {
	doc := loadKin(t)
	if len(doc.Security) != 0 {
		t.Errorf("openapi.yaml has a default security %v; each operation declares its own", doc.Security)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Security == nil {
				t.Errorf("%s %s declares no security (a scheme, or [] when public)", method, path)
				continue
			}
			if !strings.HasPrefix(path, "/v1/webhooks/") {
				continue
			}
			if len(*op.Security) != 0 {
				t.Errorf("%s %s: security %v, want [] (a webhook is authenticated by its signature)", method, path, *op.Security)
			}
			signed := false
			for _, p := range op.Parameters {
				name := strings.ToLower(p.Value.Name)
				signed = signed || p.Value.In == "header" && p.Value.Required && (name == "webhook-signature" || name == "stripe-signature")
			}
			if !signed {
				t.Errorf("%s %s: no required signature header", method, path)
			}
		}
	}
}
