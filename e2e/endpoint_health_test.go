package e2e

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// endpointHealthAnswer is an endpoint of GET /v1/admin/endpoints, with
// its health.
type endpointHealthAnswer struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Health struct {
		State           string  `json:"state"`
		Pending         int64   `json:"pending"`
		OldestPendingAt *string `json:"oldest_pending_at"`
		Failed          int64   `json:"failed"`
		LastAttemptAt   *string `json:"last_attempt_at"`
		LastStatus      int     `json:"last_status"`
		LastError       string  `json:"last_error"`
	} `json:"health"`
}

// TestEndpointHealthListed: the operators' list of endpoints tells a
// failing endpoint from a healthy one without opening its log: an endpoint
// nothing listens at is failing, with what waits for it, since when, and
// its last answer in words; one that answers 2xx is healthy; one never
// tried is idle; one an operator paused is disabled, and gets nothing.
// `payd admin endpoints list` shows the same.
func TestEndpointHealthListed(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		admin := func(method, path string, body any) reply {
			t.Helper()
			var key string
			if method != "GET" {
				key = uuid.NewString()
			}
			return s.do(request{method: method, path: path, token: testAdminToken, key: key, body: body})
		}
		create := func(url string, events ...string) string {
			t.Helper()
			r := admin("POST", "/v1/admin/endpoints", map[string]any{"url": url, "events": events})
			if r.Status != http.StatusCreated {
				t.Fatalf("create endpoint %s = %d %s", url, r.Status, r.Body)
			}
			return decode[endpointAnswer](t, r).ID
		}
		closed, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		nowhere := closed.Addr().String()
		closed.Close()
		ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
		defer ok.Close()

		down := create("http://"+nowhere+"/hooks", "order.paid")
		up := create(ok.URL+"/hooks", "order.paid")
		idle := create("https://shop.example/refunds-only", "order.refunded")
		paused := create("https://shop.example/paused", "order.paid")
		if r := admin("PATCH", "/v1/admin/endpoints/"+paused, map[string]any{"enabled": false}); r.Status != http.StatusOK {
			t.Fatalf("pause = %d %s", r.Status, r.Body)
		}
		_, cust := s.register(newEmail())
		s.paidOrder(cust, "3.00")

		var byID map[string]endpointHealthAnswer
		eventually(t, 30*time.Second, "the list never showed the failing endpoint's attempt and the healthy one's", func() bool {
			r := admin("GET", "/v1/admin/endpoints", nil)
			if r.Status != http.StatusOK {
				t.Fatalf("list = %d %s", r.Status, r.Body)
			}
			byID = map[string]endpointHealthAnswer{}
			for _, e := range decode[struct{ Data []endpointHealthAnswer }](t, r).Data {
				byID[e.ID] = e
			}
			return byID[down].Health.LastAttemptAt != nil && byID[up].Health.LastAttemptAt != nil
		})
		d := byID[down].Health
		if d.State != "failing" || d.Pending != 1 || d.OldestPendingAt == nil || d.LastStatus != 0 ||
			d.LastError != "connection refused: nothing listens there ("+nowhere+")" {
			t.Errorf("the endpoint nothing listens at: %+v; want failing, 1 pending since its event, refused in words", d)
		}
		if u := byID[up].Health; u.State != "healthy" || u.Pending != 0 || u.OldestPendingAt != nil || u.LastStatus != 204 || u.LastError != "" {
			t.Errorf("the endpoint that answers 204: %+v; want healthy, nothing pending", u)
		}
		if i := byID[idle].Health; i.State != "idle" || i.Pending != 0 || i.LastAttemptAt != nil {
			t.Errorf("the endpoint never tried: %+v; want idle", i)
		}
		if p := byID[paused]; p.Status != "disabled" || p.Health.State != "disabled" || p.Health.Pending != 0 || p.Health.LastAttemptAt != nil {
			t.Errorf("the paused endpoint: %+v; want disabled, nothing sent to it", p)
		}
		out := s.mustCLI("endpoints", "list")
		for _, line := range strings.Split(out, "\n") {
			switch {
			case strings.HasPrefix(line, down):
				if !strings.Contains(line, "failing") || !strings.Contains(line, "connection refused: nothing listens there") {
					t.Errorf("endpoints list shows the failing endpoint as %q", line)
				}
			case strings.HasPrefix(line, up):
				if !strings.Contains(line, "healthy") || !strings.Contains(line, "answered 204") {
					t.Errorf("endpoints list shows the healthy endpoint as %q", line)
				}
			}
		}
	})
}
