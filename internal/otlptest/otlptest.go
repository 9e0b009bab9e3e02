// Package otlptest is an in-process OTLP trace receiver for tests: a gRPC
// server implementing the collector's TraceService and an HTTP handler for
// POST /v1/traces (protobuf, gzip or not), both keeping every span they
// are sent with its resource, for the tests to look through.
package otlptest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // OTEL_EXPORTER_OTLP_COMPRESSION=gzip
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened: its resource's and its own
// attributes as text.
type Span struct {
	Resource map[string]string
	Scope    string
	Schema   string // the scope's schema URL: the conventions' version its spans follow
	Name     string
	Kind     tracepb.Span_SpanKind
	TraceID  string
	SpanID   string
	ParentID string // empty: a root span
	Attrs    map[string]string
}

// Receiver keeps what an exporter sent it.
type Receiver struct {
	// Endpoint is the receiver's base URL (http://127.0.0.1:PORT), for
	// OTEL_EXPORTER_OTLP_ENDPOINT; an HTTP receiver takes spans at its
	// /v1/traces.
	Endpoint string

	mu      sync.Mutex
	spans   []Span
	exports int
	paths   []string
	headers []map[string]string // of each export: HTTP headers, or gRPC metadata (lower-case keys)
	added   chan struct{}       // closed and replaced on every export
}

func newReceiver() *Receiver { return &Receiver{added: make(chan struct{})} }

// NewGRPC starts a gRPC OTLP receiver on loopback, stopped when the test
// ends.
func NewGRPC(t testing.TB) *Receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := newReceiver()
	r.Endpoint = "http://" + ln.Addr().String()
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, traceService{r: r})
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return r
}

// NewHTTP starts an OTLP/HTTP receiver on loopback, stopped when the test
// ends.
func NewHTTP(t testing.TB) *Receiver {
	t.Helper()
	r := newReceiver()
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	r.Endpoint = srv.URL
	return r
}

type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	r *Receiver
}

func (s traceService) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	h := map[string]string{}
	for k, v := range md {
		h[k] = strings.Join(v, ",")
	}
	s.r.add(req, h)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// ServeHTTP takes POST /v1/traces with a protobuf body, as OTLP/HTTP sends
// it; it notes the path of every request, so a test can see where an
// exporter sent.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.paths = append(r.paths, req.URL.Path)
	r.mu.Unlock()
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	var msg coltracepb.ExportTraceServiceRequest
	if err != nil || req.Method != http.MethodPost || req.URL.Path != "/v1/traces" ||
		req.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(raw, &msg) != nil {
		http.Error(w, "not an OTLP/HTTP protobuf trace export", http.StatusBadRequest)
		return
	}
	h := map[string]string{}
	for k, v := range req.Header {
		h[strings.ToLower(k)] = strings.Join(v, ",")
	}
	r.add(&msg, h)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *Receiver) add(req *coltracepb.ExportTraceServiceRequest, headers map[string]string) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{Resource: res, Scope: ss.GetScope().GetName(), Schema: ss.GetSchemaUrl(), Name: s.GetName(), Kind: s.GetKind(),
					TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					Attrs: attrs(s.GetAttributes())}
				if p := s.GetParentSpanId(); len(p) > 0 {
					sp.ParentID = hex.EncodeToString(p)
				}
				for _, ev := range s.GetEvents() { // exception events, if any, are attributes too
					for k, v := range attrs(ev.GetAttributes()) {
						sp.Attrs["event."+ev.GetName()+"."+k] = v
					}
				}
				if st := s.GetStatus(); st.GetMessage() != "" {
					sp.Attrs["status.message"] = st.GetMessage()
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, got...)
	r.exports++
	r.headers = append(r.headers, headers)
	close(r.added)
	r.added = make(chan struct{})
}

// attrs renders OTLP attributes as text.
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = text(kv.GetValue())
	}
	return m
}

func text(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_BytesValue:
		return hex.EncodeToString(x.BytesValue)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.GetValues() {
			parts = append(parts, text(e))
		}
		return "[" + strings.Join(parts, ",") + "]"
	case *commonpb.AnyValue_KvlistValue:
		var parts []string
		for _, kv := range x.KvlistValue.GetValues() {
			parts = append(parts, kv.GetKey()+"="+text(kv.GetValue()))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	return ""
}

// Spans is every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Exports counts the export requests received.
func (r *Receiver) Exports() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exports
}

// Headers is the headers (HTTP) or metadata (gRPC) of every export
// received, keys in lower case.
func (r *Receiver) Headers() []map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.headers)
}

// Paths is the path of every HTTP request received (HTTP receivers).
func (r *Receiver) Paths() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.paths)
}

// WaitFor waits up to d for a span that ok accepts and returns it; false if
// none came.
func (r *Receiver) WaitFor(d time.Duration, ok func(Span) bool) (Span, bool) {
	deadline := time.After(d)
	for {
		r.mu.Lock()
		for _, s := range r.spans {
			if ok(s) {
				r.mu.Unlock()
				return s, true
			}
		}
		added := r.added
		r.mu.Unlock()
		select {
		case <-added:
		case <-deadline:
			return Span{}, false
		}
	}
}

// Ancestor reports whether the span with ID ancestor is s's parent, or its
// parent's, and so on, among spans.
func Ancestor(spans []Span, s Span, ancestor string) bool {
	byID := make(map[string]Span, len(spans))
	for _, sp := range spans {
		byID[sp.SpanID] = sp
	}
	for range len(spans) {
		if s.ParentID == "" {
			return false
		}
		if s.ParentID == ancestor {
			return true
		}
		p, ok := byID[s.ParentID]
		if !ok {
			return false
		}
		s = p
	}
	return false
}
