package e2e

import (
	"io"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/handler"
	"github.com/payd/payd/provider"
)

// TestSettlementFormatDocumented: the settlement CSV shown in the README
// and in openapi.yaml (the upload's example and the header its description
// names) is a file payd accepts, so the documents cannot drift from the
// parser.
func TestSettlementFormatDocumented(t *testing.T) {
	raw, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "```\ncharge_id,idempotency_key,")
	if !ok {
		t.Fatal("the README shows no settlement CSV")
	}
	readme, _, _ := strings.Cut("charge_id,idempotency_key,"+rest, "```")
	if charges, err := settlementCharges(readme); err != nil || len(charges) != 1 || charges[0].RefundedAmount.String() != "5" {
		t.Errorf("the README's settlement CSV parses to %+v, %v; want one charge with 5.00 refunded", charges, err)
	}

	var doc map[string]any
	if err := yaml.Unmarshal(handler.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	at := func(path ...string) any {
		var cur any = doc
		for _, k := range path {
			m, _ := cur.(map[string]any)
			cur = m[k]
		}
		return cur
	}
	example, _ := at("paths", "/v1/admin/reconciliations", "post", "requestBody", "content", "multipart/form-data", "example", "file").(string)
	if charges, err := settlementCharges(example); err != nil || len(charges) != 1 {
		t.Errorf("openapi.yaml's upload example parses to %+v, %v; want one charge", charges, err)
	}
	desc, _ := at("components", "schemas", "ReconcileUpload", "properties", "file", "description").(string)
	header := strings.SplitN(example, "\n", 2)[0]
	if !strings.Contains(desc, "\n    "+header+"\n") {
		t.Errorf("the upload's description does not show the header %q:\n%s", header, desc)
	}
}

// settlementCharges checks a settlement file and returns every charge its
// pages hand out.
func settlementCharges(file string) ([]domain.Charge, error) {
	s, err := provider.ParseSettlement(func() (io.Reader, error) { return strings.NewReader(file), nil })
	if err != nil || s.Charges == nil {
		return nil, err
	}
	var all []domain.Charge
	err = s.Charges(func(page []domain.Charge) error {
		all = append(all, page...)
		return nil
	})
	return all, err
}
