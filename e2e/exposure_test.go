package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// logged returns attribute attr of the first log line with message msg.
func (s *stack) logged(msg, attr string) string {
	for line := range strings.SplitSeq(s.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			v, _ := m[attr].(string)
			return v
		}
	}
	return ""
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMetricsListener: by default /metrics is served on the main
// listener; with PAYD_METRICS_ADDR it is served there only, and the main
// listener answers 404 for it.
func TestMetricsListener(t *testing.T) {
	s := start(t, on("sqlite"))
	if status, body := get(t, s.base+"/metrics"); status != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("GET /metrics on the main listener (no PAYD_METRICS_ADDR) = %d, want 200 with payd's series", status)
	}

	s = start(t, on("sqlite"), withEnv(env{"PAYD_METRICS_ADDR": "127.0.0.1:0"}))
	_, tok := s.register("metrics@example.com")
	s.paidOrder(tok, "1.00")
	if status, body := get(t, s.base+"/metrics"); status != http.StatusNotFound || strings.Contains(body, "payd_payments_total") {
		t.Errorf("GET /metrics on the main listener with PAYD_METRICS_ADDR = %d %.80s, want 404", status, body)
	}
	addr := s.logged("metrics listening", "addr")
	if addr == "" {
		t.Fatalf("no \"metrics listening\" log line with the address; logs:\n%s", s.logs.String())
	}
	status, body := get(t, "http://"+addr+"/metrics")
	if status != http.StatusOK || !strings.Contains(body, `payd_payments_total{result="paid"} 1`) {
		t.Errorf("GET /metrics on %s = %d, want 200 counting the payment", addr, status)
	}
	if status, _ := get(t, "http://"+addr+"/v1/orders"); status != http.StatusNotFound {
		t.Errorf("GET /v1/orders on the metrics listener = %d, want 404: it serves /metrics only", status)
	}
}

// TestPprofListener: the profiler is off by default, never on the main
// listener, and with PAYD_PPROF_ADDR served on a listener of its own.
func TestPprofListener(t *testing.T) {
	s := start(t, on("sqlite"))
	if status, _ := get(t, s.base+"/debug/pprof/"); status != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/ on the main listener by default = %d, want 404", status)
	}
	s = start(t, on("sqlite"), withEnv(env{"PAYD_PPROF_ADDR": "127.0.0.1:0"}))
	if status, _ := get(t, s.base+"/debug/pprof/"); status != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/ on the main listener with PAYD_PPROF_ADDR = %d, want 404", status)
	}
	addr := s.logged("pprof listening", "addr")
	if addr == "" {
		t.Fatalf("no \"pprof listening\" log line with the address; logs:\n%s", s.logs.String())
	}
	if status, body := get(t, "http://"+addr+"/debug/pprof/goroutine?debug=1"); status != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Errorf("GET /debug/pprof/goroutine on %s = %d, want 200 with a goroutine profile", addr, status)
	}
	if status, _ := get(t, "http://"+addr+"/v1/orders"); status != http.StatusNotFound {
		t.Errorf("GET /v1/orders on the pprof listener = %d, want 404", status)
	}
}

// openStream opens an order's event stream and returns the response.
func (s *stack) openStream(tok, orderID string) *http.Response {
	s.t.Helper()
	req, _ := http.NewRequest("GET", s.base+"/v1/orders/"+orderID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK {
		// Wait for the first event: the stream is then counted.
		if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
			s.t.Fatalf("stream: %v", err)
		}
	}
	return resp
}

// TestEventStreamCap: one customer may hold PAYD_MAX_STREAMS_PER_CUSTOMER
// event streams; one more is 429 too_many_streams with Retry-After; another
// customer is not affected; a closed stream frees its slot.
func TestEventStreamCap(t *testing.T) {
	s := start(t, on("sqlite"), withEnv(env{"PAYD_MAX_STREAMS_PER_CUSTOMER": "2"}))
	_, tok := s.register("streams@example.com")
	_, other := s.register("other-streams@example.com")
	a, b := s.order(tok, "1.00"), s.order(tok, "2.00")
	first := s.openStream(tok, a)
	defer first.Body.Close()
	second := s.openStream(tok, b)
	defer second.Body.Close()
	if first.StatusCode != http.StatusOK || second.StatusCode != http.StatusOK {
		t.Fatalf("two streams = %d, %d, want 200, 200", first.StatusCode, second.StatusCode)
	}
	third := s.openStream(tok, a)
	var body []byte
	if third.StatusCode != http.StatusOK { // an open stream would never end
		body, _ = io.ReadAll(third.Body)
	}
	third.Body.Close()
	if third.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), `"code":"too_many_streams"`) || third.Header.Get("Retry-After") == "" {
		t.Errorf("third stream = %d %s (Retry-After %q), want 429 too_many_streams with Retry-After", third.StatusCode, body, third.Header.Get("Retry-After"))
	}
	theirs := s.openStream(other, s.order(other, "3.00"))
	theirs.Body.Close()
	if theirs.StatusCode != http.StatusOK {
		t.Errorf("another customer's stream = %d, want 200", theirs.StatusCode)
	}
	first.Body.Close()
	ok := within(5*time.Second, func() bool {
		r := s.openStream(tok, a)
		defer r.Body.Close()
		return r.StatusCode == http.StatusOK
	})
	if !ok {
		t.Error("a closed stream did not free its slot within 5s")
	}
}
