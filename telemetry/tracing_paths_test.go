package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestServerSpanPaths: a server span's url.path never carries an
// idempotency key (GET /v1/requests/{key} would put a customer's key in
// every trace backend), while an order's id, which is no secret, stays.
func TestServerSpanPaths(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	otelEnv(t, nil)
	tr, err := StartTracing(context.Background(), TracingConfig{Provider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	ok := func(c echo.Context) error { return c.NoContent(http.StatusOK) }
	e.GET("/v1/requests/:key", ok)
	e.GET("/v1/admin/idempotency/:scope/:key", ok)
	e.GET("/v1/orders/:id", ok)
	e.GET("/v1/orders", ok)
	h := tr.Server(e)

	const key = "k3y-of-a-customer.7f2c"
	tests := []struct{ path, want string }{
		{"/v1/requests/" + key, "/v1/requests/{key}"},
		{"/v1/admin/idempotency/customer:42/" + key, "/v1/admin/idempotency/customer:42/{key}"},
		{"/v1/orders/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "/v1/orders/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"},
		{"/v1/orders", "/v1/orders"},
	}
	for _, tt := range tests {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, tt.path, nil))
	}
	spans := rec.Ended()
	if len(spans) != len(tests) {
		t.Fatalf("%d spans, want %d", len(spans), len(tests))
	}
	for i, s := range spans {
		var got string
		for _, a := range s.Attributes() {
			if strings.Contains(a.Value.String(), key) {
				t.Errorf("span %q: attribute %s = %q carries the key", s.Name(), a.Key, a.Value.String())
			}
			if a.Key == "url.path" {
				got = a.Value.AsString()
			}
		}
		if got != tests[i].want {
			t.Errorf("GET %s: url.path = %q, want %q", tests[i].path, got, tests[i].want)
		}
	}
}

// TestURLTemplate: a provider span's url.template, and so its name, keeps
// the resource and the words of a path and replaces every ID or key.
func TestURLTemplate(t *testing.T) {
	for path, want := range map[string]string{
		"/v1/charges":                          "/v1/charges",
		"/v1/charges/3f0c2b1e-ae21-4c1b-9f1e":  "/v1/charges/{id}",
		"/v1/charges/by-id/ch_123":             "/v1/charges/by-id/{id}",
		"/v1/payment_intents":                  "/v1/payment_intents",
		"/v1/payment_intents/search":           "/v1/payment_intents/search",
		"/v1/payment_intents/pi_3Nx9/confirm":  "/v1/payment_intents/{id}/confirm",
		"/v1/refunds/re_1":                     "/v1/refunds/{id}",
		"/v1/disputes/dp_9":                    "/v1/disputes/{id}",
		"/v1/payment_intents/pi_3Nx9/capture/": "/v1/payment_intents/{id}/capture/",
	} {
		if got := urlTemplate(path); got != want {
			t.Errorf("urlTemplate(%q) = %q, want %q", path, got, want)
		}
	}
}
