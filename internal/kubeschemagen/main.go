// Command kubeschemagen writes the JSON Schemas kubeconform checks payd's
// Helm chart against (deploy/kubeschemas, by `go generate ./deploy`): one
// standalone, strict schema per kind the chart renders, made offline from
// the sources the Go module proxy serves — Kubernetes' own OpenAPI
// document (k8s.io/kubernetes' api/openapi-spec/swagger.json, of the
// release payd's k8s.io/api is from), and the CRDs of the Prometheus
// operator and of the Gateway API.
//
// The schemas are what kubeconform's own openapi2jsonschema makes:
// references inlined, every object with properties closed
// (additionalProperties: false, as kubectl's validation), int-or-string
// and quantities that accept a number or a string, optional fields that
// accept null; plus apiVersion and kind pinned to the schema's own.
// Descriptions are left out.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// The sources, pinned: k8s.io/kubernetes at the release of go.mod's
// k8s.io/api, the Gateway API at go.mod's version, and the newest
// prometheus-operator module the proxy lists (its CRDs; the API types
// payd's tests decode are go.mod's pkg/apis/monitoring).
const (
	kubernetes = "k8s.io/kubernetes@v1.37.2"
	gatewayAPI = "sigs.k8s.io/gateway-api@v1.6.3"
	promOp     = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
)

// kind is one kind the chart may render.
type kind struct{ group, version, kind string }

// builtin are the chart's Kubernetes kinds.
var builtin = []kind{
	{"", "v1", "ConfigMap"}, {"", "v1", "Secret"}, {"", "v1", "Service"}, {"", "v1", "ServiceAccount"},
	{"", "v1", "PersistentVolumeClaim"}, {"apps", "v1", "Deployment"}, {"batch", "v1", "Job"},
	{"policy", "v1", "PodDisruptionBudget"}, {"autoscaling", "v2", "HorizontalPodAutoscaler"},
	{"networking.k8s.io", "v1", "NetworkPolicy"}, {"networking.k8s.io", "v1", "Ingress"},
}

// crds are the chart's custom kinds and the CRD files that define them.
var crds = []struct {
	k      kind
	module string
	file   string
}{
	{kind{"monitoring.coreos.com", "v1", "ServiceMonitor"}, promOp, "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"},
	{kind{"monitoring.coreos.com", "v1", "PrometheusRule"}, promOp, "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml"},
	{kind{"gateway.networking.k8s.io", "v1", "HTTPRoute"}, gatewayAPI, "config/crd/standard/gateway.networking.k8s.io_httproutes.yaml"},
}

func main() {
	out := flag.String("out", "kubeschemas", "the folder the schemas are written to")
	flag.Parse()
	if err := run(*out); err != nil {
		log.Fatal(err)
	}
}

func run(out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	dir, err := moduleDir(kubernetes)
	if err != nil {
		return err
	}
	var swagger struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := readJSON(filepath.Join(dir, "api/openapi-spec/swagger.json"), &swagger); err != nil {
		return err
	}
	for _, k := range builtin {
		name, def := find(swagger.Definitions, k)
		if def == nil {
			return fmt.Errorf("%s: no definition of %v", kubernetes, k)
		}
		s := inline(swagger.Definitions, def, []string{name}).(map[string]any)
		if err := write(out, k, s); err != nil {
			return err
		}
	}
	for _, c := range crds {
		dir, err := moduleDir(c.module)
		if err != nil {
			return err
		}
		s, err := crdSchema(filepath.Join(dir, c.file), c.k.version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", c.module, c.file, err)
		}
		if err := write(out, c.k, s); err != nil {
			return err
		}
	}
	return nil
}

// moduleDir downloads module@version into the module cache (offline when
// it is there already) and returns its folder.
func moduleDir(mod string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", mod)
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", mod, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(b, &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %v %s", mod, err, m.Error)
	}
	return m.Dir, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// find is the definition of k in Kubernetes' OpenAPI document.
func find(defs map[string]map[string]any, k kind) (string, map[string]any) {
	for name, def := range defs {
		gvks, _ := def["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			m, _ := g.(map[string]any)
			if m["group"] == k.group && m["version"] == k.version && m["kind"] == k.kind {
				return name, def
			}
		}
	}
	return "", nil
}

const refPrefix = "#/definitions/"

// inline is v with every $ref replaced by its definition, recursively.
// IntOrString and Quantity become a choice of string or number. A
// reference back into its own chain (none among the kinds above) becomes
// an open schema.
func inline(defs map[string]map[string]any, v any, chain []string) any {
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := x["$ref"].(string); ok {
			name := strings.TrimPrefix(ref, refPrefix)
			switch name {
			case "io.k8s.apimachinery.pkg.util.intstr.IntOrString":
				return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
			case "io.k8s.apimachinery.pkg.api.resource.Quantity":
				return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
			}
			if slices.Contains(chain, name) || defs[name] == nil {
				return map[string]any{}
			}
			return inline(defs, defs[name], append(chain, name))
		}
		out := map[string]any{}
		for k, e := range x {
			if k == "description" || strings.HasPrefix(k, "x-kubernetes-") {
				continue
			}
			out[k] = inline(defs, e, chain)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = inline(defs, e, chain)
		}
		return out
	}
	return v
}

// crdSchema is the openAPIV3Schema of version in the CRD file at path.
func crdSchema(path, version string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		return nil, err
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == version && v.Schema.OpenAPIV3Schema != nil {
			return crdClean(v.Schema.OpenAPIV3Schema).(map[string]any), nil
		}
	}
	return nil, fmt.Errorf("no schema of version %s", version)
}

// crdClean drops descriptions and turns the CRD's extensions into JSON
// Schema: x-kubernetes-int-or-string into a choice of string or integer;
// x-kubernetes-preserve-unknown-fields keeps its object open (marked for
// closeObjects).
func crdClean(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if x["x-kubernetes-int-or-string"] == true {
			return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
		}
		out := map[string]any{}
		for k, e := range x {
			switch {
			case k == "x-kubernetes-preserve-unknown-fields" && e == true:
				out[keepOpen] = true
			case k == "description" || strings.HasPrefix(k, "x-kubernetes-"):
			default:
				out[k] = crdClean(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = crdClean(e)
		}
		return out
	}
	return v
}

// keepOpen marks an object whose unknown fields are kept: closeObjects
// leaves it open, then drops the mark.
const keepOpen = "\x00open"

// closeObjects closes every object schema with properties (no other
// field than those), and lets every optional property be null.
func closeObjects(v any) {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["properties"]; ok {
			if _, set := x["additionalProperties"]; !set && x[keepOpen] != true {
				x["additionalProperties"] = false
			}
			props, _ := x["properties"].(map[string]any)
			required, _ := x["required"].([]any)
			for name, p := range props {
				if pm, ok := p.(map[string]any); ok && !slices.Contains(required, any(name)) {
					if t, ok := pm["type"].(string); ok {
						pm["type"] = []any{t, "null"}
					}
				}
			}
		}
		delete(x, keepOpen)
		for _, e := range x {
			closeObjects(e)
		}
	case []any:
		for _, e := range x {
			closeObjects(e)
		}
	}
}

// write closes s, pins its apiVersion and kind, and writes it where
// kubeconform's -schema-location '{{ .ResourceKind }}{{ .KindSuffix }}.json'
// looks for it: deployment-apps-v1.json, service-v1.json.
func write(out string, k kind, s map[string]any) error {
	closeObjects(s)
	apiVersion := k.version
	suffix := "-" + k.version
	if k.group != "" {
		apiVersion = k.group + "/" + k.version
		suffix = "-" + strings.Split(k.group, ".")[0] + "-" + k.version
	}
	props, _ := s["properties"].(map[string]any)
	if props == nil {
		return fmt.Errorf("%v: the schema has no properties", k)
	}
	props["apiVersion"] = map[string]any{"type": "string", "enum": []any{apiVersion}}
	props["kind"] = map[string]any{"type": "string", "enum": []any{k.kind}}
	required, _ := s["required"].([]any) // a CRD's own (spec), kept
	for _, f := range []any{"apiVersion", "kind"} {
		if !slices.Contains(required, f) {
			required = append(required, f)
		}
	}
	s["required"] = required
	s["$schema"] = "http://json-schema.org/draft-07/schema#"
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", " ")
	if err := enc.Encode(s); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, strings.ToLower(k.kind)+suffix+".json"), buf.Bytes(), 0o644)
}
