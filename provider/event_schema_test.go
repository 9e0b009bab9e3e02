package provider

import (
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestEventMatchesOpenAPI: the ProviderEvent schema payd publishes in
// handler/openapi.yaml has exactly the keys ParseEvent reads, with the JSON
// types it reads them as, and its data object exactly the keys of the
// event data.
func TestEventMatchesOpenAPI(t *testing.T) {
	raw, err := os.ReadFile("../handler/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Type       string         `yaml:"type"`
					Properties map[string]any `yaml:"properties"`
				} `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("yaml.Unmarshal(openapi.yaml) = %v, want a document", err)
	}
	schema, ok := doc.Components.Schemas["ProviderEvent"]
	if !ok {
		t.Fatal("schema ProviderEvent is missing from openapi.yaml")
	}
	fields := wireFields(reflect.TypeOf(eventDTO{}))
	props := map[string]string{}
	for k, p := range schema.Properties {
		props[k] = p.Type
	}
	if got, want := keys(props), keys(fields); got != want {
		t.Fatalf("schema ProviderEvent has properties %s, want %s (as eventDTO reads)", got, want)
	}
	for k, typ := range fields {
		if typ != "" && props[k] != typ {
			t.Errorf("ProviderEvent.%s: type %q, want %q", k, props[k], typ)
		}
	}
	data := map[string]string{}
	for k := range schema.Properties["data"].Properties {
		data[k] = ""
	}
	if got, want := keys(data), keys(wireFields(reflect.TypeOf(eventDataDTO{}))); got != want {
		t.Errorf("ProviderEvent.data has properties %s, want %s", got, want)
	}
}

// wireFields maps each JSON key of struct type t to its JSON type ("" for
// raw JSON).
func wireFields(t reflect.Type) map[string]string {
	out := map[string]string{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		typ := ""
		if f.Type.Kind() == reflect.String {
			typ = "string"
		}
		out[name] = typ
	}
	return out
}

func keys(m map[string]string) string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}
