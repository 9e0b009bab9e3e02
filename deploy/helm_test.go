package deploy_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/payd/payd/app"
	"github.com/payd/payd/internal/testdeps"
	"github.com/payd/payd/telemetry"
)

// The chart in helm/payd is rendered with the pinned helm and every
// manifest decoded strictly into its Kubernetes type, so a misspelt field,
// a wrong nesting or a value of the wrong type fails here, without a
// cluster. CI sets PAYD_TEST_REQUIRE_HELM=1: there, a helm that cannot be
// built fails the test instead of skipping it.

const (
	chartDir = "helm/payd"
	helmPkg  = "helm.sh/helm/v3/cmd/helm@v3.22.0"
	// paydDrain is how long payd lets in-flight requests finish after its
	// shutdown delay (app.Serve).
	paydDrain = app.DrainTimeout
)

var (
	helmOnce sync.Once
	helmErr  error
)

// helm runs the pinned helm with args. The first call builds it (a minute
// or two; the Go build cache keeps it for the next runs), and each call
// links it anew (go run): without PAYD_TEST_FULL=1 it skips the test.
func helm(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	testdeps.RequireFull(t, "builds helm and renders the chart")
	helmOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "run", helmPkg, "version").CombinedOutput()
		if err != nil {
			helmErr = fmt.Errorf("go run %s version: %v\n%s", helmPkg, err, out)
		}
	})
	if helmErr != nil {
		if os.Getenv("PAYD_TEST_REQUIRE_HELM") == "1" {
			t.Fatalf("helm is required (PAYD_TEST_REQUIRE_HELM=1) but could not be built: %v", helmErr)
		}
		testdeps.Skip(t, testdeps.Helm, fmt.Sprintf("helm could not be built (set PAYD_TEST_REQUIRE_HELM=1 to fail instead): %v", helmErr))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"run", helmPkg}, args...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// render is `helm template` of the chart with the values files and --set
// arguments given.
func render(t *testing.T, extra ...string) (string, error) {
	t.Helper()
	out, errOut, err := helm(t, append([]string{"template", "rel", chartDir, "--namespace", "payments"}, extra...)...)
	if err != nil {
		return out, fmt.Errorf("%v: %s", err, errOut)
	}
	return out, nil
}

// manifest is one rendered document, decoded into its Kubernetes type.
type manifest struct {
	source     string // the template it came from
	apiVersion string
	kind       string
	obj        any
}

// newObject is the Go type of every kind the chart may render. A kind not
// here fails the test: add its type before the chart renders it.
func newObject(apiVersion, kind string) (any, bool) {
	switch apiVersion + "/" + kind {
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}, true
	case "v1/Secret":
		return &corev1.Secret{}, true
	case "v1/Service":
		return &corev1.Service{}, true
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}, true
	case "v1/PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}, true
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}, true
	case "batch/v1/Job":
		return &batchv1.Job{}, true
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, true
	case "autoscaling/v2/HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}, true
	case "monitoring.coreos.com/v1/ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}, true
	case "networking.k8s.io/v1/NetworkPolicy":
		return &networkingv1.NetworkPolicy{}, true
	case "networking.k8s.io/v1/Ingress":
		return &networkingv1.Ingress{}, true
	case "monitoring.coreos.com/v1/PrometheusRule":
		return &monitoringv1.PrometheusRule{}, true
	case "gateway.networking.k8s.io/v1/HTTPRoute":
		return &gatewayv1.HTTPRoute{}, true
	}
	return nil, false
}

var (
	docSep    = regexp.MustCompile(`(?m)^---[ \t]*$`)
	sourceRef = regexp.MustCompile(`(?m)^# Source: (\S+)`)
)

// decodeStrict decodes JSON into v refusing unknown fields, as the
// encoding/json decoder does, and also fields in the wrong case and
// duplicate fields, which it lets through and the API server does not.
func decodeStrict(js []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("data after the object")
	}
	strict, err := kjson.UnmarshalStrict(js, v)
	if err != nil {
		return err
	}
	if len(strict) > 0 {
		return fmt.Errorf("%v", strict)
	}
	return nil
}

// decode splits helm's output into documents and decodes each strictly.
func decode(t *testing.T, out string) []manifest {
	t.Helper()
	var ms []manifest
	for _, d := range docSep.Split(out, -1) {
		var probe struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		js, err := yaml.YAMLToJSONStrict([]byte(d))
		if err != nil {
			t.Fatalf("a rendered document is not YAML: %v\n%s", err, d)
		}
		if string(js) == "null" {
			continue // comments only, or empty
		}
		if err := json.Unmarshal(js, &probe); err != nil {
			t.Fatalf("a rendered document is not an object: %v\n%s", err, d)
		}
		src := ""
		if m := sourceRef.FindStringSubmatch(d); m != nil {
			src = m[1]
		}
		obj, ok := newObject(probe.APIVersion, probe.Kind)
		if !ok {
			t.Fatalf("%s renders %s %s, a kind this test does not know", src, probe.APIVersion, probe.Kind)
		}
		if err := decodeStrict(js, obj); err != nil {
			t.Fatalf("%s: %s %s does not decode strictly: %v\n%s", src, probe.APIVersion, probe.Kind, err, d)
		}
		ms = append(ms, manifest{source: src, apiVersion: probe.APIVersion, kind: probe.Kind, obj: obj})
	}
	if len(ms) == 0 {
		t.Fatalf("helm rendered nothing:\n%s", out)
	}
	return ms
}

// rendered is one value set's manifests by kind and name.
type rendered struct {
	out       string
	manifests []manifest
}

func (r rendered) all(kind string) []any {
	var objs []any
	for _, m := range r.manifests {
		if m.kind == kind {
			objs = append(objs, m.obj)
		}
	}
	return objs
}

func one[T any](t *testing.T, r rendered, kind string) T {
	t.Helper()
	objs := r.all(kind)
	if len(objs) != 1 {
		t.Fatalf("rendered %d %s, want 1", len(objs), kind)
	}
	return objs[0].(T)
}

func optional[T any](t *testing.T, r rendered, kind string) (T, bool) {
	t.Helper()
	var zero T
	objs := r.all(kind)
	switch len(objs) {
	case 0:
		return zero, false
	case 1:
		return objs[0].(T), true
	}
	t.Fatalf("rendered %d %s, want at most 1", len(objs), kind)
	return zero, false
}

// chartValues is the part of a values file the assertions read.
type chartValues struct {
	ReplicaCount *int         `json:"replicaCount"`
	Secrets      chartSecrets `json:"secrets"`
	Provider     struct {
		Name string `json:"name"`
	} `json:"provider"`
	Metrics *struct {
		Port int `json:"port"`
	} `json:"metrics"`
	ServiceMonitor struct {
		Enabled bool `json:"enabled"`
	} `json:"serviceMonitor"`
	Autoscaling struct {
		Enabled bool `json:"enabled"`
	} `json:"autoscaling"`
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints"`
	NetworkPolicy             struct {
		Enabled     bool                             `json:"enabled"`
		APIFrom     []networkingv1.NetworkPolicyPeer `json:"apiFrom"`
		MetricsFrom []networkingv1.NetworkPolicyPeer `json:"metricsFrom"`
	} `json:"networkPolicy"`
	Persistence struct {
		Enabled bool `json:"enabled"`
	} `json:"persistence"`
	Image struct {
		Repository string `json:"repository"`
		Tag        string `json:"tag"`
		Digest     string `json:"digest"`
	} `json:"image"`
	PrometheusRule struct {
		Enabled bool              `json:"enabled"`
		Labels  map[string]string `json:"labels"`
	} `json:"prometheusRule"`
	Ingress struct {
		Enabled bool `json:"enabled"`
		Hosts   []struct {
			Host  string `json:"host"`
			Paths []struct {
				Path string `json:"path"`
			} `json:"paths"`
		} `json:"hosts"`
	} `json:"ingress"`
	HTTPRoute struct {
		Enabled   bool     `json:"enabled"`
		Hostnames []string `json:"hostnames"`
	} `json:"httpRoute"`
	Service struct {
		Port int32 `json:"port"`
	} `json:"service"`
}

// chartSecrets is the values' secrets: section.
type chartSecrets struct {
	ExistingSecret string            `json:"existingSecret"`
	DatabaseURL    string            `json:"databaseURL"`
	RedisURL       string            `json:"redisURL"`
	Extra          map[string]string `json:"extra"`
	all            map[string]any
}

// values is every secret value the set gives, the extra ones included.
func (s chartSecrets) values() []string {
	var vs []string
	for k, v := range s.all {
		if str, ok := v.(string); ok && str != "" && k != "existingSecret" {
			vs = append(vs, str)
		}
	}
	for _, v := range s.Extra {
		vs = append(vs, v)
	}
	return vs
}

func readValues(t *testing.T, path string) chartValues {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v chartValues
	var raw struct {
		Secrets map[string]any `json:"secrets"`
	}
	if err := yaml.Unmarshal(b, &raw); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	v.Secrets.all = raw.Secrets
	return v
}

// settingNames is every environment variable payd reads, from its own
// flag set (each usage ends "(env NAME)"), and the OTEL_* variables of
// its tracing.
func settingNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	envRef := regexp.MustCompile(`\(env ([A-Z0-9_]+)\)$`)
	app.FlagSet("serve").VisitAll(func(f *flag.Flag) {
		if m := envRef.FindStringSubmatch(f.Usage); m != nil {
			names[m[1]] = true
		}
	})
	if len(names) < 20 {
		t.Fatalf("found only %d settings in payd's flags", len(names))
	}
	for _, name := range telemetry.TracingVariables { // OpenTelemetry's own, no flags (ADR 0035)
		names[name] = true
	}
	return names
}

// TestChartRendersStrictly renders every values file in helm/payd/ci (the
// files CI lints) and checks each manifest and what payd needs of them.
func TestChartRendersStrictly(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil || len(files) < 5 {
		t.Fatalf("want the five value sets in %s/ci, found %v (%v)", chartDir, files, err)
	}
	known := settingNames(t)
	secretNames := app.SecretSettings()
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), "-values.yaml"), func(t *testing.T) {
			t.Parallel()
			out, err := render(t, "-f", f)
			if err != nil {
				t.Fatalf("helm template -f %s: %v", f, err)
			}
			r := rendered{out: out, manifests: decode(t, out)}
			v := readValues(t, f)
			checkNames(t, r)
			checkSecrets(t, r, v, secretNames, known)
			checkDeployment(t, r, v)
			checkMigrations(t, r, v)
			checkServices(t, r, v)
			checkOptional(t, r, v)
		})
	}
}

// checkNames: every name and label is one the API server accepts.
func checkNames(t *testing.T, r rendered) {
	for _, m := range r.manifests {
		meta := metaOf(m.obj)
		if errs := validation.IsDNS1123Subdomain(meta.Name); len(errs) > 0 {
			t.Errorf("%s %s: name %q: %v", m.source, m.kind, meta.Name, errs)
		}
		if m.kind == "Service" { // a Service name is a DNS label
			if errs := validation.IsDNS1035Label(meta.Name); len(errs) > 0 {
				t.Errorf("%s %s: name %q: %v", m.source, m.kind, meta.Name, errs)
			}
		}
		for k, val := range meta.Labels {
			if errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(val)...); len(errs) > 0 {
				t.Errorf("%s %s: label %s=%s: %v", m.source, m.kind, k, val, errs)
			}
		}
	}
}

type objectMeta struct {
	Name        string
	Labels      map[string]string
	Annotations map[string]string
}

func metaOf(obj any) objectMeta {
	b, _ := json.Marshal(obj)
	var o struct {
		Metadata objectMeta `json:"metadata"`
	}
	_ = json.Unmarshal(b, &o)
	return o.Metadata
}

// podSpecs are the pod templates the chart renders: the Deployment's and
// the migrations Job's.
func podSpecs(r rendered) map[string]corev1.PodSpec {
	specs := map[string]corev1.PodSpec{}
	for _, o := range r.all("Deployment") {
		d := o.(*appsv1.Deployment)
		specs["Deployment "+d.Name] = d.Spec.Template.Spec
	}
	for _, o := range r.all("Job") {
		j := o.(*batchv1.Job)
		specs["Job "+j.Name] = j.Spec.Template.Spec
	}
	return specs
}

// checkSecrets: no secret value appears anywhere but in a Secret, no
// secret setting is a plain env value, and the ConfigMap holds only
// settings payd knows.
func checkSecrets(t *testing.T, r rendered, v chartValues, secretNames []string, known map[string]bool) {
	values := v.Secrets.values()
	if v.Secrets.ExistingSecret == "" && len(values) < 4 {
		t.Fatalf("the values set has %d secret values, want at least 4", len(values))
	}
	for _, m := range r.manifests {
		if m.kind == "Secret" {
			continue
		}
		b, _ := json.Marshal(m.obj)
		for _, s := range values {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s %s shows a secret value (%.12s…)", m.source, m.kind, s)
			}
		}
	}
	for _, s := range values {
		if strings.Contains(r.out, s) {
			t.Errorf("helm's output shows a secret value in clear (%.12s…); Secrets hold them base64-encoded", s)
		}
	}
	for name, spec := range podSpecs(r) {
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			for _, e := range c.Env {
				if slices.Contains(secretNames, e.Name) && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
					t.Errorf("%s container %s: %s is not taken from a Secret", name, c.Name, e.Name)
				}
			}
			for _, ef := range c.EnvFrom {
				if ef.ConfigMapRef != nil && ef.Prefix != "" || ef.SecretRef != nil && ef.Prefix != "" {
					t.Errorf("%s container %s: envFrom with prefix %q renames payd's settings", name, c.Name, ef.Prefix)
				}
			}
		}
	}
	cm := one[*corev1.ConfigMap](t, r, "ConfigMap")
	for k := range cm.Data {
		if slices.Contains(secretNames, k) {
			t.Errorf("ConfigMap holds the secret setting %s", k)
		}
		if !known[k] {
			t.Errorf("ConfigMap sets %s, which payd does not read", k)
		}
	}
	for k, want := range map[string]string{"PAYD_ENV": "production", "PAYD_ADDR": "0.0.0.0:8080"} {
		if cm.Data[k] != want {
			t.Errorf("ConfigMap %s = %q, want %q", k, cm.Data[k], want)
		}
	}
	if v.Secrets.ExistingSecret != "" {
		if n := len(r.all("Secret")); n != 0 {
			t.Errorf("with secrets.existingSecret the chart made %d Secrets, want none", n)
		}
		return
	}
	sec := secretNamed(t, r, "rel-payd")
	for _, k := range []string{"PAYD_DATABASE_URL", "PAYD_ADMIN_TOKEN", "PAYD_WEBHOOK_SECRET", "PAYD_SECRET_KEY"} {
		if len(sec.Data[k]) == 0 {
			t.Errorf("Secret has no %s", k)
		}
	}
	for k := range sec.Data {
		if _, extra := v.Secrets.Extra[k]; !slices.Contains(secretNames, k) && !extra {
			t.Errorf("Secret holds %s, which is neither one of payd's secret settings nor in secrets.extra", k)
		}
	}
	for k, want := range v.Secrets.Extra {
		if got := string(sec.Data[k]); got != want {
			t.Errorf("Secret %s = %q, want secrets.extra's %q", k, got, want)
		}
	}
	if got, want := string(sec.Data["PAYD_DATABASE_URL"]), v.Secrets.DatabaseURL; got != want {
		t.Errorf("Secret PAYD_DATABASE_URL = %q, want the value's %q", got, want)
	}
	if got, want := string(sec.Data["PAYD_REDIS_URL"]), v.Secrets.RedisURL; got != want {
		t.Errorf("Secret PAYD_REDIS_URL = %q, want the value's %q", got, want)
	}
}

func secretNamed(t *testing.T, r rendered, name string) *corev1.Secret {
	t.Helper()
	for _, o := range r.all("Secret") {
		if s := o.(*corev1.Secret); s.Name == name {
			return s
		}
	}
	t.Fatalf("no Secret %s rendered", name)
	return nil
}

// checkDeployment: probes, the shutdown sequence and the security context.
func checkDeployment(t *testing.T, r rendered, v chartValues) {
	d := one[*appsv1.Deployment](t, r, "Deployment")
	spec := d.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("Deployment has %d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	if !slices.Equal(c.Args, []string{"serve"}) {
		t.Errorf("payd's args = %v, want [serve]", c.Args)
	}
	// The image tag defaults to the chart's appVersion.
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml")); err != nil || yaml.Unmarshal(b, &chart) != nil || chart.AppVersion == "" {
		t.Fatalf("Chart.yaml has no appVersion (%v)", err)
	}
	repo, tag := cmp.Or(v.Image.Repository, "payd"), cmp.Or(v.Image.Tag, chart.AppVersion)
	want := repo + ":" + tag
	if v.Image.Digest != "" { // pinned by digest: the tag is only a label
		want = repo + "@" + v.Image.Digest
	}
	if c.Image != want {
		t.Errorf("payd's image = %s, want %s", c.Image, want)
	}
	port := map[string]int32{}
	for _, p := range c.Ports {
		port[p.Name] = p.ContainerPort
	}
	if port["http"] != 8080 {
		t.Errorf("container port http = %d, want 8080 (PAYD_ADDR)", port["http"])
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}, {"startup", c.StartupProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("no HTTP %s probe", p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe = %s on port %s, want %s on http", p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path)
		}
	}

	// The shutdown: preStop sleep, then SIGTERM, then /readyz 503 for
	// PAYD_SHUTDOWN_DELAY, then the drain. The grace period must cover all
	// of it, with room to spare, or the kubelet kills payd mid-request.
	var preStop time.Duration
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Exec != nil {
			t.Errorf("preStop = %+v, want the sleep action (the image has no shell)", c.Lifecycle.PreStop)
		} else {
			preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
		}
	}
	cm := one[*corev1.ConfigMap](t, r, "ConfigMap")
	delay, err := time.ParseDuration(cm.Data["PAYD_SHUTDOWN_DELAY"])
	if err != nil || delay < 0 {
		t.Errorf("ConfigMap PAYD_SHUTDOWN_DELAY = %q, want a duration, 0 or more", cm.Data["PAYD_SHUTDOWN_DELAY"])
	}
	if spec.TerminationGracePeriodSeconds == nil {
		t.Fatal("no terminationGracePeriodSeconds")
	}
	grace := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	if need := preStop + delay + paydDrain; grace <= need {
		t.Errorf("terminationGracePeriodSeconds = %v, want more than preStop %v + PAYD_SHUTDOWN_DELAY %v + drain %v = %v",
			grace, preStop, delay, paydDrain, need)
	}

	// Secrets come in through the Secret, whole.
	secretName := v.Secrets.ExistingSecret
	if secretName == "" {
		secretName = "rel-payd"
	}
	var fromSecret, fromConfig bool
	for _, ef := range c.EnvFrom {
		fromSecret = fromSecret || ef.SecretRef != nil && ef.SecretRef.Name == secretName
		fromConfig = fromConfig || ef.ConfigMapRef != nil && ef.ConfigMapRef.Name == cm.Name
	}
	if !fromSecret || !fromConfig {
		t.Errorf("envFrom = %+v, want Secret %s and ConfigMap %s", c.EnvFrom, secretName, cm.Name)
	}

	for name, ps := range podSpecs(r) {
		checkSecurity(t, name, ps)
	}

	sqlite := strings.HasPrefix(v.Secrets.DatabaseURL, "sqlite:")
	switch {
	case v.Autoscaling.Enabled:
		if d.Spec.Replicas != nil {
			t.Errorf("with the HPA on, the Deployment sets replicas=%d: each upgrade would reset the HPA's count", *d.Spec.Replicas)
		}
	case sqlite:
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
			t.Errorf("on SQLite replicas=%v strategy=%s, want 1 and Recreate (one process per file)", d.Spec.Replicas, d.Spec.Strategy.Type)
		}
	default:
		want := 2
		if v.ReplicaCount != nil {
			want = *v.ReplicaCount
		}
		if d.Spec.Replicas == nil || int(*d.Spec.Replicas) != want {
			t.Errorf("replicas = %v, want %d", d.Spec.Replicas, want)
		}
		ru := d.Spec.Strategy.RollingUpdate
		if ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
			t.Errorf("rolling update = %+v, want maxUnavailable 0", ru)
		}
	}
	if v.Persistence.Enabled {
		if one[*corev1.PersistentVolumeClaim](t, r, "PersistentVolumeClaim") == nil {
			t.Error("persistence on, no PVC")
		}
	}
}

// checkSecurity: non-root 65532, read-only root, no capabilities, the
// runtime's seccomp profile, no service account token.
func checkSecurity(t *testing.T, name string, spec corev1.PodSpec) {
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod securityContext = %+v, want non-root 65532 and seccomp RuntimeDefault", name, psc)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("%s: the service account token is mounted; payd never calls the Kubernetes API", name)
	}
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
			sc.RunAsUser == nil || *sc.RunAsUser != 65532 ||
			sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s container %s: securityContext = %+v, want read-only root, no privilege escalation, drop ALL, 65532, RuntimeDefault", name, c.Name, sc)
		}
		if c.Resources.Requests == nil {
			t.Errorf("%s container %s: no resource requests", name, c.Name)
		}
		if c.Image == "" || strings.HasSuffix(c.Image, ":") {
			t.Errorf("%s container %s: image %q has no tag", name, c.Name, c.Image)
		}
	}
}

// checkMigrations: `payd migrate up` as a pre-install/pre-upgrade hook,
// reading the database URL from a Secret that exists when it runs.
func checkMigrations(t *testing.T, r rendered, v chartValues) {
	job, ok := optional[*batchv1.Job](t, r, "Job")
	if strings.HasPrefix(v.Secrets.DatabaseURL, "sqlite:") {
		if ok {
			t.Error("on SQLite the chart renders a migrations Job; it cannot reach the pod's volume (payd serve migrates its file)")
		}
		return
	}
	if !ok {
		t.Fatal("no migrations Job")
	}
	if hooks := strings.Split(job.Annotations["helm.sh/hook"], ","); !slices.Contains(hooks, "pre-install") || !slices.Contains(hooks, "pre-upgrade") {
		t.Errorf("Job helm.sh/hook = %q, want pre-install,pre-upgrade", job.Annotations["helm.sh/hook"])
	}
	if !strings.Contains(job.Annotations["helm.sh/hook-delete-policy"], "before-hook-creation") {
		t.Errorf("Job hook-delete-policy = %q, want before-hook-creation (else the next upgrade finds the old Job)", job.Annotations["helm.sh/hook-delete-policy"])
	}
	if job.Annotations["helm.sh/hook-output-log-policy"] != "hook-failed" {
		t.Errorf("Job hook-output-log-policy = %q, want hook-failed (helm shows a failed migration's log)", job.Annotations["helm.sh/hook-output-log-policy"])
	}
	spec := job.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("Job has %d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	if !slices.Equal(c.Args, []string{"migrate", "up"}) || len(c.Command) != 0 {
		t.Errorf("Job runs command=%v args=%v, want the image's payd with args [migrate up]", c.Command, c.Args)
	}
	if spec.RestartPolicy != corev1.RestartPolicyNever && spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		t.Errorf("Job restartPolicy = %q", spec.RestartPolicy)
	}
	d := one[*appsv1.Deployment](t, r, "Deployment")
	if c.Image != d.Spec.Template.Spec.Containers[0].Image {
		t.Errorf("Job image %s, Deployment image %s: the migrations must be the release's", c.Image, d.Spec.Template.Spec.Containers[0].Image)
	}
	sel := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
	if sel.Matches(labels.Set(job.Spec.Template.Labels)) {
		t.Errorf("the Job's pod labels %v match the Deployment's selector: the Service would send it traffic", job.Spec.Template.Labels)
	}
	var ref *corev1.SecretKeySelector
	for _, e := range c.Env {
		if e.Name == "PAYD_DATABASE_URL" && e.ValueFrom != nil {
			ref = e.ValueFrom.SecretKeyRef
		}
	}
	if ref == nil || ref.Key != "PAYD_DATABASE_URL" {
		t.Fatalf("Job env = %+v, want PAYD_DATABASE_URL from a Secret", c.Env)
	}
	if name := v.Secrets.ExistingSecret; name != "" {
		if ref.Name != name {
			t.Errorf("Job reads Secret %s, want the existing %s", ref.Name, name)
		}
		return
	}
	// The release's own Secret does not exist yet when a pre-install hook
	// runs: the Job's must be a hook itself, made before the Job.
	s := secretNamed(t, r, ref.Name)
	if s.Annotations["helm.sh/hook"] != job.Annotations["helm.sh/hook"] {
		t.Errorf("Secret %s helm.sh/hook = %q, want the Job's %q", s.Name, s.Annotations["helm.sh/hook"], job.Annotations["helm.sh/hook"])
	}
	var sw, jw int
	if _, err := fmt.Sscan(s.Annotations["helm.sh/hook-weight"], &sw); err != nil {
		t.Errorf("Secret %s hook-weight %q: %v", s.Name, s.Annotations["helm.sh/hook-weight"], err)
	}
	if _, err := fmt.Sscan(job.Annotations["helm.sh/hook-weight"], &jw); err != nil {
		t.Errorf("Job hook-weight %q: %v", job.Annotations["helm.sh/hook-weight"], err)
	}
	if sw >= jw {
		t.Errorf("Secret hook-weight %d, Job %d: the Secret must be made first", sw, jw)
	}
	// It lives only while the hooks run: Helm deletes it after them, also
	// when the Job failed, and replaces a leftover before the next run.
	for _, p := range []string{"before-hook-creation", "hook-succeeded"} {
		if !slices.Contains(strings.Split(s.Annotations["helm.sh/hook-delete-policy"], ","), p) {
			t.Errorf("Secret %s hook-delete-policy = %q, want %s in it", s.Name, s.Annotations["helm.sh/hook-delete-policy"], p)
		}
	}
	if got := string(s.Data["PAYD_DATABASE_URL"]); got != v.Secrets.DatabaseURL {
		t.Errorf("Job's Secret PAYD_DATABASE_URL = %q, want %q", got, v.Secrets.DatabaseURL)
	}
	if len(s.Data) != 1 {
		t.Errorf("Job's Secret holds %d keys, want only PAYD_DATABASE_URL", len(s.Data))
	}
}

// checkServices: the Services and the ServiceMonitor reach payd's pods;
// /metrics (no auth) is on a ClusterIP Service of its own when it has its
// own port, never on the API Service.
func checkServices(t *testing.T, r rendered, v chartValues) {
	d := one[*appsv1.Deployment](t, r, "Deployment")
	podLabels := labels.Set(d.Spec.Template.Labels)
	if !labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(podLabels) {
		t.Errorf("the Deployment's selector %v does not match its pods %v", d.Spec.Selector.MatchLabels, podLabels)
	}
	containerPorts := map[string]bool{}
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		containerPorts[p.Name] = true
	}
	metricsPort := 9090
	if v.Metrics != nil {
		metricsPort = v.Metrics.Port
	}
	services := map[string]*corev1.Service{}
	for _, o := range r.all("Service") {
		svc := o.(*corev1.Service)
		services[svc.Name] = svc
		if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
			t.Errorf("Service %s's selector %v does not match payd's pods %v", svc.Name, svc.Spec.Selector, podLabels)
		}
		for _, p := range svc.Spec.Ports {
			if !containerPorts[p.TargetPort.String()] {
				t.Errorf("Service %s port %s targets %s, not a container port", svc.Name, p.Name, p.TargetPort.String())
			}
		}
	}
	api, ok := services["rel-payd"]
	if !ok || len(api.Spec.Ports) != 1 || api.Spec.Ports[0].TargetPort.String() != "http" {
		t.Fatalf("want Service rel-payd with the one port http, have %v", services)
	}
	metrics, hasMetrics := services["rel-payd-metrics"]
	wantServices := 1
	if metricsPort != 0 {
		wantServices = 2
	}
	if hasMetrics != (metricsPort != 0) || len(services) != wantServices {
		t.Errorf("Services %v for metrics.port %d, want rel-payd and, with a port, rel-payd-metrics", services, metricsPort)
	}
	if hasMetrics && (metrics.Spec.Type != corev1.ServiceTypeClusterIP || len(metrics.Spec.Ports) != 1 ||
		metrics.Spec.Ports[0].Name != "metrics" || int(metrics.Spec.Ports[0].Port) != metricsPort) {
		t.Errorf("the metrics Service = %+v, want ClusterIP with the one port metrics %d", metrics.Spec, metricsPort)
	}
	cm := one[*corev1.ConfigMap](t, r, "ConfigMap")
	if metricsPort == 0 && cm.Data["PAYD_METRICS_ADDR"] != "" || metricsPort != 0 && cm.Data["PAYD_METRICS_ADDR"] != fmt.Sprintf("0.0.0.0:%d", metricsPort) {
		t.Errorf("PAYD_METRICS_ADDR = %q for metrics.port %d", cm.Data["PAYD_METRICS_ADDR"], metricsPort)
	}

	sm, ok := optional[*monitoringv1.ServiceMonitor](t, r, "ServiceMonitor")
	if ok != v.ServiceMonitor.Enabled {
		t.Fatalf("ServiceMonitor rendered %v, serviceMonitor.enabled %v", ok, v.ServiceMonitor.Enabled)
	}
	if !ok {
		return
	}
	want := api
	wantPort := "http"
	if hasMetrics {
		want, wantPort = metrics, "metrics"
	}
	for name, svc := range services {
		if matches := labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(svc.Labels)); matches != (svc == want) {
			t.Errorf("the ServiceMonitor's selector %v matches Service %s: %v, want it to select %s alone", sm.Spec.Selector.MatchLabels, name, matches, want.Name)
		}
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor has %d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Port != wantPort || want.Spec.Ports[0].Name != wantPort || ep.Path != "/metrics" {
		t.Errorf("ServiceMonitor scrapes port %q path %q, want Service %s port %s path /metrics", ep.Port, ep.Path, want.Name, wantPort)
	}
}

// checkOptional: the PDB always, the NetworkPolicy and the HPA only when
// asked for.
func checkOptional(t *testing.T, r rendered, v chartValues) {
	d := one[*appsv1.Deployment](t, r, "Deployment")
	checkNetworkPolicy(t, r, v, d)
	checkSpread(t, v, d)
	checkPrometheusRule(t, r, v)
	checkRoutes(t, r, v)
	pdb := one[*policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget")
	if (pdb.Spec.MaxUnavailable == nil) == (pdb.Spec.MinAvailable == nil) {
		t.Errorf("PDB sets maxUnavailable %v and minAvailable %v: want exactly one", pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
	}
	if pdb.Spec.Selector == nil || !labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("the PDB's selector %v does not match payd's pods", pdb.Spec.Selector)
	}
	hpa, ok := optional[*autoscalingv2.HorizontalPodAutoscaler](t, r, "HorizontalPodAutoscaler")
	if ok != v.Autoscaling.Enabled {
		t.Fatalf("HPA rendered %v, autoscaling.enabled %v", ok, v.Autoscaling.Enabled)
	}
	if !ok {
		return
	}
	ref := hpa.Spec.ScaleTargetRef
	if ref.Kind != "Deployment" || ref.Name != d.Name || ref.APIVersion != "apps/v1" {
		t.Errorf("HPA scales %+v, want Deployment %s", ref, d.Name)
	}
	if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 2 || hpa.Spec.MaxReplicas < *hpa.Spec.MinReplicas || len(hpa.Spec.Metrics) == 0 {
		t.Errorf("HPA min %v max %d metrics %d", hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas, len(hpa.Spec.Metrics))
	}
}

// checkPrometheusRule: rendered only when enabled, with the labels asked
// for; its groups are deploy/prometheus/alerts.yml's, rule by rule, but for
// the scrape job of PaydDown and PaydInstanceDown, which becomes this
// release's.
func checkPrometheusRule(t *testing.T, r rendered, v chartValues) {
	pr, ok := optional[*monitoringv1.PrometheusRule](t, r, "PrometheusRule")
	if ok != v.PrometheusRule.Enabled {
		t.Fatalf("PrometheusRule rendered %v, prometheusRule.enabled %v", ok, v.PrometheusRule.Enabled)
	}
	if !ok {
		return
	}
	for k, val := range v.PrometheusRule.Labels {
		if pr.Labels[k] != val {
			t.Errorf("PrometheusRule label %s = %q, want %q", k, pr.Labels[k], val)
		}
	}
	raw, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var file monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(raw, &file); err != nil {
		t.Fatalf("alerts.yml as a PrometheusRule's spec: %v", err)
	}
	job := fmt.Sprintf(`job=~"%s(-metrics)?"`, regexp.QuoteMeta(pr.Name))
	want, _ := json.Marshal(file.Groups)
	want = bytes.ReplaceAll(want, []byte(`job=~\".*payd.*\"`), []byte(strings.ReplaceAll(job, `"`, `\"`)))
	got, _ := json.Marshal(pr.Spec.Groups)
	if !bytes.Equal(got, want) {
		t.Errorf("the PrometheusRule's groups are not alerts.yml's with the job %s:\n got %s\nwant %s", job, got, want)
	}
	n := 0
	for _, g := range pr.Spec.Groups {
		for _, rule := range g.Rules {
			n++
			if !strings.HasPrefix(rule.Annotations["runbook_url"], "https://") {
				t.Errorf("alert %s: runbook_url %q, want an absolute URL", rule.Alert, rule.Annotations["runbook_url"])
			}
			if strings.Contains(rule.Expr.String(), "up{") && !strings.Contains(rule.Expr.String(), job) {
				t.Errorf("alert %s selects up without the release's job %s: %s", rule.Alert, job, rule.Expr.String())
			}
		}
	}
	if n < 10 {
		t.Errorf("the PrometheusRule holds %d alerts, want alerts.yml's", n)
	}
}

// checkRoutes: the Ingress and the HTTPRoute, each rendered only when
// enabled, send their hosts' paths to payd's API Service, by the port it
// serves on.
func checkRoutes(t *testing.T, r rendered, v chartValues) {
	var api *corev1.Service
	for _, o := range r.all("Service") {
		if s := o.(*corev1.Service); s.Labels["app.kubernetes.io/component"] == "server" {
			api = s
		}
	}
	if api == nil {
		t.Fatal("no API Service")
	}
	ing, ok := optional[*networkingv1.Ingress](t, r, "Ingress")
	if ok != v.Ingress.Enabled {
		t.Fatalf("Ingress rendered %v, ingress.enabled %v", ok, v.Ingress.Enabled)
	}
	if ok {
		if len(ing.Spec.Rules) != len(v.Ingress.Hosts) {
			t.Errorf("Ingress has %d rules, want one per host (%d)", len(ing.Spec.Rules), len(v.Ingress.Hosts))
		}
		for i, rule := range ing.Spec.Rules {
			if i < len(v.Ingress.Hosts) && rule.Host != v.Ingress.Hosts[i].Host {
				t.Errorf("Ingress rule %d host %q, want %q", i, rule.Host, v.Ingress.Hosts[i].Host)
			}
			if rule.HTTP == nil || len(rule.HTTP.Paths) == 0 {
				t.Fatalf("Ingress rule %q has no paths", rule.Host)
			}
			for _, p := range rule.HTTP.Paths {
				b := p.Backend.Service
				if b == nil || b.Name != api.Name || b.Port.Name != api.Spec.Ports[0].Name || p.PathType == nil {
					t.Errorf("Ingress path %s of %s goes to %+v, want Service %s port %s", p.Path, rule.Host, b, api.Name, api.Spec.Ports[0].Name)
				}
			}
		}
	}
	route, ok := optional[*gatewayv1.HTTPRoute](t, r, "HTTPRoute")
	if ok != v.HTTPRoute.Enabled {
		t.Fatalf("HTTPRoute rendered %v, httpRoute.enabled %v", ok, v.HTTPRoute.Enabled)
	}
	if !ok {
		return
	}
	if len(route.Spec.ParentRefs) == 0 {
		t.Error("HTTPRoute attaches to no Gateway")
	}
	if got := fmt.Sprint(route.Spec.Hostnames); got != fmt.Sprint(v.HTTPRoute.Hostnames) {
		t.Errorf("HTTPRoute hostnames %s, want %v", got, v.HTTPRoute.Hostnames)
	}
	if len(route.Spec.Rules) != 1 || len(route.Spec.Rules[0].BackendRefs) != 1 {
		t.Fatalf("HTTPRoute rules %+v, want one with one backend", route.Spec.Rules)
	}
	b := route.Spec.Rules[0].BackendRefs[0]
	if string(b.Name) != api.Name || b.Port == nil || int32(*b.Port) != api.Spec.Ports[0].Port {
		t.Errorf("HTTPRoute backend %s:%v, want Service %s:%d", b.Name, b.Port, api.Name, api.Spec.Ports[0].Port)
	}
}

// checkSpread: payd's pods spread as topologySpreadConstraints says, or,
// unset, over nodes where they can, selecting payd's own pods.
func checkSpread(t *testing.T, v chartValues, d *appsv1.Deployment) {
	got := d.Spec.Template.Spec.TopologySpreadConstraints
	if len(v.TopologySpreadConstraints) > 0 {
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(v.TopologySpreadConstraints)
		if !bytes.Equal(gb, wb) {
			t.Errorf("topologySpreadConstraints = %s, want the values' %s", gb, wb)
		}
		return
	}
	if len(got) != 1 || got[0].TopologyKey != "kubernetes.io/hostname" || got[0].MaxSkew != 1 || got[0].WhenUnsatisfiable != corev1.ScheduleAnyway ||
		got[0].LabelSelector == nil || !labels.SelectorFromSet(got[0].LabelSelector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("default topologySpreadConstraints = %+v, want one soft spread over kubernetes.io/hostname selecting payd's pods", got)
	}
}

// checkNetworkPolicy: rendered only when enabled; it selects payd's
// serving pods (not the migrations Job's), lets apiFrom reach the API port
// and metricsFrom reach /metrics's own port, and only those.
func checkNetworkPolicy(t *testing.T, r rendered, v chartValues, d *appsv1.Deployment) {
	np, ok := optional[*networkingv1.NetworkPolicy](t, r, "NetworkPolicy")
	if ok != v.NetworkPolicy.Enabled {
		t.Fatalf("NetworkPolicy rendered %v, networkPolicy.enabled %v", ok, v.NetworkPolicy.Enabled)
	}
	if !ok {
		return
	}
	sel := labels.SelectorFromSet(np.Spec.PodSelector.MatchLabels)
	if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("the NetworkPolicy's selector %v does not match payd's pods", np.Spec.PodSelector.MatchLabels)
	}
	for _, o := range r.all("Job") {
		if j := o.(*batchv1.Job); sel.Matches(labels.Set(j.Spec.Template.Labels)) {
			t.Errorf("the NetworkPolicy selects the migrations Job's pod %s", j.Name)
		}
	}
	from := map[string][]networkingv1.NetworkPolicyPeer{}
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port == nil {
				t.Fatalf("an ingress rule opens every port: %+v", rule)
			}
			from[p.Port.String()] = rule.From
		}
	}
	want := map[string][]networkingv1.NetworkPolicyPeer{"http": v.NetworkPolicy.APIFrom}
	if v.Metrics == nil || v.Metrics.Port != 0 {
		want["metrics"] = v.NetworkPolicy.MetricsFrom
	}
	if len(from) != len(want) {
		t.Errorf("the NetworkPolicy opens ports %v, want %v", from, want)
	}
	for port, peers := range want {
		got, ok := from[port]
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(peers)
		if !ok || !bytes.Equal(gb, wb) {
			t.Errorf("port %s is open to %s, want %s", port, gb, wb)
		}
	}
	if slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) != (len(np.Spec.Egress) > 0) {
		t.Errorf("policy types %v with %d egress rules: egress must stay open unless rules are given", np.Spec.PolicyTypes, len(np.Spec.Egress))
	}
}

// TestChartRefuses renders value sets payd cannot run with: helm must fail,
// naming the problem.
func TestChartRefuses(t *testing.T) {
	mariadb := filepath.Join(chartDir, "ci", "mariadb-values.yaml")
	sqlite := filepath.Join(chartDir, "ci", "sqlite-values.yaml")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"sqlite with replicas", []string{"-f", sqlite, "--set", "replicaCount=2"}, "sqlite"},
		{"sqlite with the HPA", []string{"-f", sqlite, "--set", "autoscaling.enabled=true"}, "sqlite"},
		{"no database", []string{"-f", mariadb, "--set", "secrets.databaseURL="}, "/secrets/databaseURL"},
		{"no admin token", []string{"-f", mariadb, "--set", "secrets.adminToken="}, "/secrets/adminToken"},
		{"stripe without its keys", []string{"-f", mariadb, "--set", "provider.name=stripe"}, "/secrets/stripeSecretKey"},
		{"unknown provider", []string{"-f", mariadb, "--set", "provider.name=paypal"}, "provider.name must be"},
		{"extra secret with a bad name", []string{"-f", mariadb, "--set", "secrets.extra.bad-name=x"}, "secrets.extra.bad-name"},
		{"secret as a plain extra env", []string{"-f", mariadb, "--set", "extraEnv[0].name=PAYD_SECRET_KEY", "--set", "extraEnv[0].value=x"}, "extraEnv PAYD_SECRET_KEY is a secret"},
		// values.schema.json: a value of the wrong type, a misspelt key.
		{"a count that is not a number", []string{"-f", mariadb, "--set", "replicaCount=two"}, "replicaCount"},
		{"a misspelt key", []string{"-f", mariadb, "--set", "podDisruptionBudget.maxUnavaliable=1"}, "maxUnavaliable"},
		{"an unknown top-level key", []string{"-f", mariadb, "--set", "replicas=3"}, "replicas"},
		{"a service type Kubernetes has not", []string{"-f", mariadb, "--set", "service.type=Internal"}, "/service/type"},
		{"a digest that is not one", []string{"-f", mariadb, "--set", "image.digest=latest"}, "/image/digest"},
		{"a PDB with no bound", []string{"-f", mariadb, "--set", "podDisruptionBudget.enabled=true", "--set", "podDisruptionBudget.maxUnavailable=", "--set", "podDisruptionBudget.minAvailable="}, "podDisruptionBudget: set maxUnavailable or minAvailable"},
		{"an HTTPRoute attached to nothing", []string{"-f", mariadb, "--set", "httpRoute.enabled=true"}, "/httpRoute/parentRefs"},
		{"an Ingress with no host", []string{"-f", mariadb, "--set", "ingress.enabled=true"}, "/ingress/hosts"},
		{"an Ingress host without a name", []string{"-f", mariadb, "--set", "ingress.enabled=true", "--set", "ingress.hosts[0].paths[0].path=/"}, "host"},
		{"an Ingress path that is not one", []string{"-f", mariadb, "--set", "ingress.enabled=true", "--set", "ingress.hosts[0].host=a.example", "--set", "ingress.hosts[0].paths[0].path=v1"}, "/ingress/hosts/0/paths/0/path"},
	}
	// Every secret setting payd has, put under env:, is refused, and the
	// OTLP exporter's headers (a collector's token).
	for _, name := range append(app.SecretSettings(), "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS") {
		cases = append(cases, struct {
			name string
			args []string
			want string
		}{"secret in env " + name, []string{"-f", mariadb, "--set", "env." + name + "=leaked"}, "env." + name + " is a secret"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out, err := render(t, c.args...)
			if err == nil {
				t.Fatalf("helm template %v succeeded, want an error naming %q:\n%.2000s", c.args, c.want, out)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("helm template %v: %v\nwant it to say %q", c.args, err, c.want)
			}
		})
	}
}

// TestChartLintRefusesTypos: `helm lint --strict` fails on a misspelt
// value and on one of the wrong type (values.schema.json), instead of
// rendering the chart without it.
func TestChartLintRefusesTypos(t *testing.T) {
	mariadb := filepath.Join(chartDir, "ci", "mariadb-values.yaml")
	for _, set := range []string{"podDisruptionBudget.maxUnavaliable=1", "replicaCount=two"} {
		out, errOut, err := helm(t, "lint", "--strict", chartDir, "-f", mariadb, "--set", set)
		if err == nil {
			t.Errorf("helm lint --strict --set %s passed, want it refused:\n%s%s", set, out, errOut)
		}
	}
}

// TestChartLintRefusesMissingSecrets: helm lint --strict of the chart as it
// ships, without the secrets payd needs, fails and names them. (helm lint
// reports a template's required or fail as [INFO] and passes: the values
// schema requires them.)
func TestChartLintRefusesMissingSecrets(t *testing.T) {
	out, errOut, err := helm(t, "lint", "--strict", chartDir)
	if err == nil {
		t.Fatalf("helm lint --strict with the default values passed:\n%s%s", out, errOut)
	}
	if text := out + errOut; !strings.Contains(text, "/secrets/databaseURL") {
		t.Errorf("helm lint --strict with the default values does not name the missing secret:\n%s", text)
	}
}

// TestChartLints runs `helm lint --strict` with every values file CI uses.
func TestChartLints(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if len(files) == 0 {
		t.Fatal("no values files in helm/payd/ci")
	}
	args := []string{"lint", "--strict", chartDir}
	for _, f := range files {
		out, errOut, err := helm(t, append(args, "-f", f)...)
		if err != nil {
			t.Errorf("helm lint --strict -f %s: %v\n%s%s", f, err, out, errOut)
		}
	}
}

// TestChartValuesDocumented holds the chart README's table of values to
// values.yaml: every value is documented (itself or a map holding it),
// every documented value exists, and a scalar's documented default is the
// one values.yaml has.
func TestChartValuesDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	paths := map[string]any{}   // every dotted path → its value, maps included
	leaves := map[string]bool{} // the paths that hold no further values
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			path := prefix + k
			paths[path] = v
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(path+".", sub)
			} else {
				leaves[path] = true
			}
		}
	}
	walk("", values)

	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([A-Za-z0-9.]+)` \\| ([^|]*) \\|")
	documented := map[string]string{} // path → default cell
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
		documented[m[1]] = strings.TrimSpace(m[2])
	}
	if len(documented) < 40 {
		t.Fatalf("found %d rows in the README's table of values, want them all", len(documented))
	}
	for path := range leaves {
		covered := false
		for p := path; p != ""; {
			if _, ok := documented[p]; ok {
				covered = true
				break
			}
			i := strings.LastIndex(p, ".")
			if i < 0 {
				break
			}
			p = p[:i]
		}
		if !covered {
			t.Errorf("value %s is not in the README's table", path)
		}
	}
	for path, def := range documented {
		v, ok := paths[path]
		if !ok {
			t.Errorf("the README documents %s, which values.yaml does not have", path)
			continue
		}
		var want string
		switch v := v.(type) {
		case string:
			want = v
			if v == "" {
				want = `""`
			}
		case float64, bool:
			want = fmt.Sprint(v)
		case map[string]any:
			if len(v) > 0 {
				continue // described in words
			}
			want = "{}"
		case []any:
			if len(v) > 0 {
				continue
			}
			want = "[]"
		default:
			continue
		}
		if !strings.Contains(def, "`"+want+"`") {
			t.Errorf("the README gives %s the default %s, values.yaml has `%s`", path, def, want)
		}
	}
}

// TestKubeSchemasCurrent: the schemas in kubeschemas, which .ci/run checks
// the chart's manifests against with kubeconform, are what `go generate
// ./deploy` makes from its pinned sources: nobody edited them by hand, and
// a kind added to the generator was generated.
func TestKubeSchemasCurrent(t *testing.T) {
	testdeps.RequireFull(t, "downloads k8s.io/kubernetes and the CRDs' modules to make the schemas")
	dir := t.TempDir()
	cmd := exec.Command("go", "run", "../internal/kubeschemagen", "-out", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubeschemagen: %v\n%s", err, out)
	}
	want, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	have, _ := filepath.Glob(filepath.Join("kubeschemas", "*.json"))
	if len(want) == 0 || len(have) != len(want) {
		t.Fatalf("kubeschemas holds %d schemas, the generator makes %d: run go generate ./deploy", len(have), len(want))
	}
	for _, w := range want {
		gen, _ := os.ReadFile(w)
		got, err := os.ReadFile(filepath.Join("kubeschemas", filepath.Base(w)))
		if err != nil || !bytes.Equal(got, gen) {
			t.Errorf("kubeschemas/%s differs from what the generator makes (%v): run go generate ./deploy", filepath.Base(w), err)
		}
	}
}
