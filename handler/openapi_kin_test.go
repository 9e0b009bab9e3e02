package handler

import (
	"context"
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
