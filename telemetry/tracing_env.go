package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/contrib/propagators/autoprop"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/payd/payd/internal/version"
)

// tracingEnv is what payd decides from the OTEL_* variables of the
// OpenTelemetry specification (docs/adr/0035-opentelemetry-by-the-specification.md):
//
//   - OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none: off.
//   - Otherwise on when OTEL_EXPORTER_OTLP_ENDPOINT or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, or when
//     OTEL_TRACES_EXPORTER=otlp asks for the exporter explicitly (then to
//     the specification's default endpoint on localhost). With none of them
//     tracing is off: unlike the specification's default exporter, payd
//     never sends to a collector nobody named.
//   - OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL:
//     grpc or http/protobuf (the default).
//   - OTEL_PROPAGATORS: the propagators, tracecontext,baggage by default.
//
// The exporter reads the endpoints (the traces one as it is, the generic
// one plus /v1/traces over HTTP), headers, timeout, compression and TLS
// itself; the SDK reads the sampler and the resource. payd checks those it
// does not read (checkTracingEnv) so that a wrong value stops it instead of
// being ignored.
type tracingEnv struct {
	on         bool
	protocol   string // grpc or http/protobuf
	endpoint   string // where spans go, as the exporter will call it, its password redacted
	propagator propagation.TextMapPropagator
}

// TracingVariables are the OTEL_* variables payd's tracing follows, read
// by payd itself or by the SDK and the exporter (docs and checks of
// deployment files).
var TracingVariables = []string{
	"OTEL_SDK_DISABLED", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_EXPORTER",
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
	"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
	"OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
	"OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_TRACES_INSECURE",
	"OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_CLIENT_KEY", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
	"OTEL_PROPAGATORS", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
	"OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_EXPORT_TIMEOUT", "OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
	"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT", "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT",
	"OTEL_SPAN_EVENT_COUNT_LIMIT", "OTEL_SPAN_LINK_COUNT_LIMIT",
	"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT", "OTEL_LINK_ATTRIBUTE_COUNT_LIMIT",
}

// The OTLP protocols payd exports with.
const (
	protoGRPC = "grpc"
	protoHTTP = "http/protobuf"
)

// CheckTracingEnv refuses OTEL_* variables payd cannot follow, naming the
// variable: an unknown protocol, propagator, sampler or exporter, an
// endpoint that is not an http(s) URL, a sampler argument out of range, a
// malformed OTEL_RESOURCE_ATTRIBUTES. getenv reads the variables.
func CheckTracingEnv(getenv func(string) string) error {
	_, err := readTracingEnv(getenv)
	return err
}

func readTracingEnv(getenv func(string) string) (tracingEnv, error) {
	var env tracingEnv
	names := []string{"tracecontext", "baggage"}
	if v := strings.TrimSpace(getenv("OTEL_PROPAGATORS")); v != "" {
		names = splitList(v)
	}
	prop, err := autoprop.TextMapPropagator(names...)
	if err != nil {
		return env, fmt.Errorf("OTEL_PROPAGATORS: %w (known: tracecontext, baggage, b3, b3multi, jaeger, xray, ottrace, none)", err)
	}
	env.propagator = prop

	disabled := false
	switch v := strings.ToLower(strings.TrimSpace(getenv("OTEL_SDK_DISABLED"))); v {
	case "true":
		disabled = true
	case "false", "":
	default:
		return env, fmt.Errorf("OTEL_SDK_DISABLED must be true or false, not %q", v)
	}
	exporter := ""
	if v := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); v != "" {
		list := splitList(v)
		if len(list) != 1 || (list[0] != "otlp" && list[0] != "none") {
			return env, fmt.Errorf("OTEL_TRACES_EXPORTER must be otlp or none (payd exports traces over OTLP only), not %q", v)
		}
		exporter = list[0]
	}

	endpoint := false
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			continue
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return env, fmt.Errorf("%s must be an http:// or https:// URL with a host, not %q", name, redact(v))
		}
		endpoint = true
	}

	env.protocol = protoHTTP
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			continue
		}
		if v != protoGRPC && v != protoHTTP {
			return env, fmt.Errorf("%s must be grpc or http/protobuf, not %q", name, v)
		}
		env.protocol = v
		break
	}

	env.endpoint = exportEndpoint(getenv, env.protocol)

	if err := checkSampler(getenv); err != nil {
		return env, err
	}
	if err := checkResourceAttributes(getenv("OTEL_RESOURCE_ATTRIBUTES")); err != nil {
		return env, err
	}
	env.on = !disabled && exporter != "none" && (endpoint || exporter == "otlp")
	return env, nil
}

// splitList is a comma-separated OTEL_* list, trimmed, empty items dropped.
func splitList(v string) []string {
	var out []string
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.ToLower(strings.TrimSpace(item)); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// exportEndpoint is where the OTLP exporter of protocol sends spans, as
// it reads the variables: the traces endpoint as it is, else the generic
// one (plus /v1/traces over HTTP), else the specification's default on
// localhost. It is for the log, so it is the scheme, host and path alone:
// a user, password, query or fragment may hold a token.
func exportEndpoint(getenv func(string) string, protocol string) string {
	raw, suffix := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")), ""
	if raw == "" {
		raw = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
		if protocol == protoHTTP {
			suffix = "v1/traces"
		}
	}
	if raw == "" {
		if protocol == protoGRPC {
			return "http://localhost:4317"
		}
		return "http://localhost:4318/v1/traces"
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable)"
	}
	if suffix != "" {
		u = u.JoinPath(suffix)
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// redact keeps an endpoint's password, if it has one, out of an error.
func redact(v string) string {
	if u, err := url.Parse(v); err == nil {
		return u.Redacted()
	}
	return "(unparseable)"
}

// checkSampler accepts the samplers the Go SDK knows, with a ratio in
// [0, 1] for the ratio samplers. The SDK itself would log a wrong value and
// trace every request.
func checkSampler(getenv func(string) string) error {
	sampler := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER"))
	switch sampler {
	case "", "always_on", "always_off", "parentbased_always_on", "parentbased_always_off":
		return nil
	case "traceidratio", "parentbased_traceidratio":
	default:
		return fmt.Errorf("OTEL_TRACES_SAMPLER must be always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio, not %q", sampler)
	}
	arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
	if arg == "" {
		return nil // the SDK's default ratio, 1
	}
	if r, err := strconv.ParseFloat(arg, 64); err != nil || r < 0 || r > 1 {
		return fmt.Errorf("OTEL_TRACES_SAMPLER_ARG must be a ratio between 0 and 1 for %s, not %q", sampler, arg)
	}
	return nil
}

// checkResourceAttributes accepts what the SDK's resource detector reads
// without error: key=value pairs, comma-separated, values percent-encoded.
func checkResourceAttributes(v string) error {
	for pair := range strings.SplitSeq(strings.TrimSpace(v), ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, val, ok := strings.Cut(pair, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES must be key=value pairs separated by commas, not %q", v)
		}
		if _, err := url.PathUnescape(strings.TrimSpace(val)); err != nil {
			return fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: the value of %s is not percent-encoded: %v", strings.TrimSpace(k), err)
		}
	}
	return nil
}

// newExporter is the OTLP span exporter for protocol; it reads the
// OTEL_EXPORTER_OTLP_* variables itself. Neither connects here: the first
// export does.
func newExporter(ctx context.Context, protocol string) (sdktrace.SpanExporter, error) {
	var exp sdktrace.SpanExporter
	var err error
	if protocol == protoGRPC {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter (%s): %w", protocol, err)
	}
	return exp, nil
}

// tracingResource is the resource of payd's spans: payd's own attributes
// (service.name "payd", service.version, payd.env and
// deployment.environment.name), then the SDK's, then OTEL_RESOURCE_ATTRIBUTES
// and OTEL_SERVICE_NAME, each later one winning.
func tracingResource(ctx context.Context, env, version string) (*resource.Resource, error) {
	own := []attribute.KeyValue{
		attribute.String("service.name", "payd"),
		attribute.String("payd.env", env),
		attribute.String("deployment.environment.name", env),
	}
	if version != "" {
		own = append(own, attribute.String("service.version", version))
	}
	res, err := resource.New(ctx, resource.WithAttributes(own...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing resource: %w", err)
	}
	return res, nil
}

// BuildVersion is the version and VCS revision of this binary: stamped
// with -ldflags, else as Go recorded them (internal/version); "(devel)"
// and "unknown" when neither says.
func BuildVersion() (string, string) {
	bi := version.Read()
	revision := bi.Revision
	if revision == "" {
		revision = "unknown"
	}
	return bi.Version, revision
}
