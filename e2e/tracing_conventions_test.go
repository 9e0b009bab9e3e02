package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/payd/payd/internal/otlptest"
	"github.com/payd/payd/internal/redistest"
	"github.com/payd/payd/internal/stripefake"
)

// TestTracingConventions: what payd exports over OTLP follows the current
// semantic conventions on every kind of span it makes — the HTTP server's,
// the provider's HTTP client's (the sandbox and Stripe), the database's
// and Redis's — with the conventions' version as every scope's schema URL,
// and none of the names the conventions retired.
func TestTracingConventions(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		t.Run("sandbox", func(t *testing.T) {
			rcv := otlptest.NewGRPC(t)
			otelEnv(t, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint})
			s := start(t, on(dialect), withEnv(env{"PAYD_REDIS_URL": redistest.Start(t).URL()}))
			tracedPay(t, s)
			s.stop()
			spans := rcv.Spans()
			checkConventions(t, spans, dialect)
			checkProviderSpan(t, spans, "POST /v1/charges", "/v1/charges")
			checkKinds(t, spans, "redis", dialect)
		})
		t.Run("stripe", func(t *testing.T) {
			rcv := otlptest.NewGRPC(t)
			otelEnv(t, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint})
			s := start(t, on(dialect), stripeMode()).stripe()
			_, tok := s.register(newEmail())
			if r := s.pay(tok, s.order(tok, "19.90"), uuid.NewString(), stripefake.PMVisa); r.Status != http.StatusOK {
				t.Fatalf("pay = %d %s, want 200", r.Status, r.Body)
			}
			s.stop()
			spans := rcv.Spans()
			checkConventions(t, spans, dialect)
			checkProviderSpan(t, spans, "POST /v1/payment_intents", "/v1/payment_intents")
			checkKinds(t, spans, "", dialect)
		})
	})
}

// checkKinds fails unless spans hold a server span, a provider client span,
// database spans of dialect and, unless redis is "", Redis spans.
func checkKinds(t *testing.T, spans []otlptest.Span, redis, dialect string) {
	t.Helper()
	seen := map[string]bool{}
	for _, sp := range spans {
		switch {
		case sp.Kind == tracepb.Span_SPAN_KIND_SERVER:
			seen["server"] = true
		case sp.Attrs["url.template"] != "":
			seen["provider"] = true
		case sp.Attrs["db.system.name"] == "redis":
			seen["redis"] = true
		case sp.Attrs["db.system.name"] != "":
			seen["database"] = true
		}
	}
	want := []string{"server", "provider", "database"}
	if redis != "" {
		want = append(want, "redis")
	}
	for _, k := range want {
		if !seen[k] {
			t.Errorf("no %s span among %v (%s)", k, spanNames(spans), dialect)
		}
	}
}

// checkConventions checks every span's attributes against the kind of span
// it is.
func checkConventions(t *testing.T, spans []otlptest.Span, dialect string) {
	t.Helper()
	// Retired names (semantic conventions 1.20 and before) that must not
	// come back with a library upgrade.
	retired := []string{"db.system", "db.statement", "db.connection_string", "db.name", "db.operation",
		"http.method", "http.status_code", "http.url", "http.target", "net.peer.name", "net.peer.port", "net.host.name"}
	for _, sp := range spans {
		if sp.Schema != semconv.SchemaURL {
			t.Errorf("span %q (scope %s) has schema URL %q, want %q", sp.Name, sp.Scope, sp.Schema, semconv.SchemaURL)
		}
		for _, old := range retired {
			if _, ok := sp.Attrs[old]; ok {
				t.Errorf("span %q carries the retired %s: %v", sp.Name, old, sp.Attrs)
			}
		}
		has := func(keys ...string) {
			t.Helper()
			for _, k := range keys {
				if sp.Attrs[k] == "" {
					t.Errorf("%v span %q has no %s: %v", sp.Kind, sp.Name, k, sp.Attrs)
				}
			}
		}
		system := sp.Attrs["db.system.name"]
		switch {
		case sp.Kind == tracepb.Span_SPAN_KIND_SERVER:
			has("http.request.method", "http.route", "url.path", "url.scheme", "http.response.status_code")
			if want := sp.Attrs["http.request.method"] + " " + sp.Attrs["http.route"]; sp.Name != want {
				t.Errorf("server span %q, want it named %q", sp.Name, want)
			}
		case system == "redis":
			has("server.address", "server.port", "db.operation.name")
		case system != "":
			has("db.namespace", "db.operation.name")
			if dialect == "sqlite" {
				if system != "sqlite" || sp.Attrs["server.address"] != "" {
					t.Errorf("sqlite span %q: %v; want db.system.name sqlite and no server", sp.Name, sp.Attrs)
				}
			} else {
				has("server.address", "server.port")
				if system != "mysql" && system != "mariadb" {
					t.Errorf("database span %q: db.system.name %q, want mysql or mariadb", sp.Name, system)
				}
			}
		case sp.Kind == tracepb.Span_SPAN_KIND_CLIENT:
			has("http.request.method", "url.full", "url.template", "server.address", "server.port", "http.response.status_code")
			if strings.HasPrefix(sp.Name, "provider ") {
				t.Errorf("client span %q is named outside the convention", sp.Name)
			}
		}
	}
}

// checkProviderSpan wants a client span named name, with url.template
// template, and no ID in any provider span's name.
func checkProviderSpan(t *testing.T, spans []otlptest.Span, name, template string) {
	t.Helper()
	found := false
	for _, sp := range spans {
		tpl := sp.Attrs["url.template"]
		if tpl == "" {
			continue
		}
		if want := sp.Attrs["http.request.method"] + " " + tpl; sp.Name != want {
			t.Errorf("provider span %q, want it named %q", sp.Name, want)
		}
		if strings.ContainsAny(strings.TrimPrefix(tpl, "/v1/"), "0123456789") {
			t.Errorf("provider span %q: url.template %q holds an ID", sp.Name, tpl)
		}
		found = found || (sp.Name == name && tpl == template)
	}
	if !found {
		t.Errorf("no provider span %q with url.template %q among %v", name, template, spanNames(spans))
	}
}
