package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
)

// endpointAnswer is the admin API's Endpoint, with the secret when answered.
type endpointAnswer struct {
	ID                  string   `json:"id"`
	URL                 string   `json:"url"`
	Events              []string `json:"events"`
	Status              string   `json:"status"`
	Secret              string   `json:"secret"`
	PreviousSecretUntil *string  `json:"previous_secret_until"`
}

// TestNotifyLoopbackRefusedInProduction: in production an endpoint at a
// loopback or private address is refused, through the admin API (422
// endpoint_url_refused, nothing stored) and from the environment (payd
// does not start); PAYD_NOTIFY_ALLOW_PRIVATE lets one through, and it is
// delivered to.
func TestNotifyLoopbackRefusedInProduction(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		const token = "adm_7f3a91c04e6b2d58a3f0c7e19b4d62a8"
		dir := t.TempDir()
		e := env{"PAYD_ENV": "production", "PAYD_ADDR": "127.0.0.1:0", "PAYD_DATABASE_URL": dbtest.NewURL(t, migrations.Dialect(dialect)),
			"PAYD_SANDBOX_DATABASE_URL": "sqlite://" + dir + "/sandbox.db", "PAYD_RATE_LIMIT": "0",
			"PAYD_ADMIN_TOKEN": token, "PAYD_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
			"PAYD_SECRET_KEY": "k-4f0c1a9e8b7d6c5e4f3a2b1c0d9e8f7a", "PAYD_MERCHANT_KEY": "sk_9d2f4a6c8e0b1d3f5a7c9e1b3d5f7a9c"}
		rcv := startReceiver(t, notifySecret, 0)
		withURL := env{"PAYD_NOTIFY_URL": rcv.url, "PAYD_NOTIFY_SECRET": notifySecret}
		for k, v := range e {
			withURL[k] = v
		}
		if err := refusedStart(t, withURL); !strings.Contains(err.Error(), "PAYD_NOTIFY_URL") {
			t.Errorf("production start with a loopback PAYD_NOTIFY_URL = %v, want a refusal naming it", err)
		}
		s := start(t, asConfigured(e))
		for _, u := range []string{rcv.url, "http://localhost:8080/hooks", "http://[::1]/hooks", "http://10.0.0.7/hooks", "http://169.254.169.254/latest/meta-data"} {
			r := s.do(request{method: "POST", path: "/v1/admin/endpoints", token: token, key: uuid.NewString(),
				body: map[string]any{"url": u, "events": []string{"order.paid"}}})
			if r.Status != http.StatusUnprocessableEntity || r.problemCode() != "endpoint_url_refused" {
				t.Errorf("create endpoint %s in production = %d %s, want 422 endpoint_url_refused", u, r.Status, r.Body)
			}
		}
		if r := s.do(request{method: "POST", path: "/v1/admin/endpoints", token: token, key: uuid.NewString(),
			body: map[string]any{"url": "ftp://shop.example/", "events": []string{"order.paid"}}}); r.Status != http.StatusBadRequest || r.problemCode() != "validation_failed" {
			t.Errorf("create endpoint ftp:// = %d %s, want 400 validation_failed", r.Status, r.Body)
		}
		for _, u := range []string{"HTTPS://shop.example/hooks", "https://shop.example/payd events", "https://bücher.example/hooks"} {
			r := s.do(request{method: "POST", path: "/v1/admin/endpoints", token: token, key: uuid.NewString(),
				body: map[string]any{"url": u, "events": []string{"order.paid"}}})
			if r.Status != http.StatusBadRequest || r.problemCode() != "validation_failed" || !strings.Contains(string(r.Body), "url") {
				t.Errorf("create endpoint %q (not as payd calls it) = %d %s, want 400 validation_failed on url", u, r.Status, r.Body)
			}
		}
		list := decode[struct{ Data []endpointAnswer }](t, s.do(request{method: "GET", path: "/v1/admin/endpoints", token: token}))
		if len(list.Data) != 0 {
			t.Errorf("endpoints after the refusals = %+v, want none stored", list.Data)
		}
		s.stop()

		withURL["PAYD_NOTIFY_ALLOW_PRIVATE"] = "127.0.0.1/32"
		s = start(t, asConfigured(withURL))
		s.merchantKey = e["PAYD_MERCHANT_KEY"]
		_, cust := s.register(newEmail())
		order := s.order(cust, "4.20")
		if r := s.pay(cust, order, uuid.NewString(), "pm_ok"); r.Status != http.StatusOK {
			t.Fatalf("pay = %d %s", r.Status, r.Body)
		}
		eventually(t, 30*time.Second, "the allowed loopback endpoint got nothing", func() bool {
			for _, ev := range rcv.events() {
				if ev.OrderID == order && ev.Type == "order.paid" {
					return true
				}
			}
			return false
		})
	})
}

// TestNotifyRotateSecret: through the admin API an endpoint is created
// (its secret answered once), pointed at a receiver, rotated; during the
// overlap every delivery carries both signatures, so a receiver holding
// only the old secret and one holding only the new both verify it. A
// redelivery sends the event again under the same webhook-id.
func TestNotifyRotateSecret(t *testing.T) {
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
		r := admin("POST", "/v1/admin/endpoints", map[string]any{"url": "https://shop.example/not-yet", "events": []string{"order.paid"}, "description": "e2e"})
		if r.Status != http.StatusCreated {
			t.Fatalf("create endpoint = %d %s", r.Status, r.Body)
		}
		ep := decode[endpointAnswer](t, r)
		if !strings.HasPrefix(ep.Secret, "whsec_") || ep.Status != "enabled" {
			t.Fatalf("created %+v, want enabled with a whsec_ secret", ep)
		}
		if list := admin("GET", "/v1/admin/endpoints", nil); strings.Contains(string(list.Body), ep.Secret) {
			t.Errorf("the list shows the secret: %s", list.Body)
		}
		oldRcv := startReceiver(t, ep.Secret, 0)
		if r := admin("PATCH", "/v1/admin/endpoints/"+ep.ID, map[string]any{"url": oldRcv.url}); r.Status != http.StatusOK {
			t.Fatalf("point the endpoint at the receiver = %d %s", r.Status, r.Body)
		}
		_, cust := s.register(newEmail())
		paidBefore := s.paidOrder(cust, "1.00")
		waitRecorded(t, s, oldRcv, paidBefore)

		r = admin("POST", "/v1/admin/endpoints/"+ep.ID+"/rotate-secret", map[string]any{})
		rotated := decode[endpointAnswer](t, r)
		if r.Status != http.StatusOK || rotated.Secret == ep.Secret || !strings.HasPrefix(rotated.Secret, "whsec_") || rotated.PreviousSecretUntil == nil {
			t.Fatalf("rotate = %d %s, want a new secret and the old one's end", r.Status, r.Body)
		}
		during := s.paidOrder(cust, "2.00")
		waitRecorded(t, s, oldRcv, during) // verified by the old secret alone
		var heads []string
		scanRows(t, s.db, &heads, `SELECT a.request_head FROM notify_attempts a JOIN notify_deliveries d ON d.id = a.delivery_id WHERE d.order_id = ?`, during)
		if len(heads) != 1 {
			t.Fatalf("the requests during the overlap = %q, want one", heads)
		}
		if len(strings.Fields(headerOf(heads[0], "Webhook-Signature"))) != 2 {
			t.Errorf("the request during the overlap = %q, want two signatures", heads[0])
		}
		newRcv := startReceiver(t, rotated.Secret, 0)
		if r := admin("PATCH", "/v1/admin/endpoints/"+ep.ID, map[string]any{"url": newRcv.url}); r.Status != http.StatusOK {
			t.Fatalf("point the endpoint at the new receiver = %d %s", r.Status, r.Body)
		}
		after := s.paidOrder(cust, "3.00")
		waitRecorded(t, s, newRcv, after) // verified by the new secret alone
		for _, rcv := range []*receiverProc{oldRcv, newRcv} {
			for _, a := range rcv.arrivals() {
				if !a.Verified {
					t.Errorf("arrival %+v not verified", a)
				}
			}
		}
		// Each secret alone verifies the stored request of the overlap.
		var body []byte
		var id string
		if err := s.db.Gorm().Raw(`SELECT e.id, e.body FROM notify_events e WHERE e.order_id = ?`, during).Row().Scan(&id, &body); err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", headerOf(heads[0], "Webhook-Timestamp"))
		h.Set("webhook-signature", headerOf(heads[0], "Webhook-Signature"))
		for name, secret := range map[string]string{"old": ep.Secret, "new": rotated.Secret} {
			wh, _ := standardwebhooks.NewWebhook(secret)
			if err := wh.VerifyIgnoringTimestamp(body, h); err != nil {
				t.Errorf("the %s secret does not verify the overlap's request: %v", name, err)
			}
		}

		// The delivery log, and a redelivery under the same webhook-id.
		logs := decode[struct {
			Data []struct {
				EventID string `json:"event_id"`
				Status  string `json:"status"`
				Log     []struct{ Status int }
			}
		}](t, admin("GET", "/v1/admin/endpoints/"+ep.ID+"/deliveries?status=delivered", nil))
		if len(logs.Data) != 3 || len(logs.Data[0].Log) != 1 || logs.Data[0].Log[0].Status != http.StatusNoContent {
			t.Fatalf("delivered log = %+v, want three deliveries answered 204", logs.Data)
		}
		var firstID string
		scanRows(t, s.db, &firstID, `SELECT id FROM notify_events WHERE order_id = ?`, paidBefore)
		if r := admin("POST", "/v1/admin/events/"+firstID+"/redeliver", map[string]any{}); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"deliveries":1`) {
			t.Fatalf("redeliver = %d %s, want one delivery pending again", r.Status, r.Body)
		}
		eventually(t, 30*time.Second, "the redelivered event did not reach the new receiver", func() bool {
			return newRcv.events()[firstID].OrderID == paidBefore
		})
		if r := admin("POST", "/v1/admin/events/"+uuid.NewString()+"/redeliver", map[string]any{}); r.Status != http.StatusNotFound || r.problemCode() != "event_not_found" {
			t.Errorf("redeliver an unknown event = %d %s, want 404 event_not_found", r.Status, r.Body)
		}
		if r := admin("PATCH", "/v1/admin/endpoints/"+ep.ID, map[string]any{"events": []string{"order.teleported"}}); r.Status != http.StatusBadRequest || r.problemCode() != "validation_failed" {
			t.Errorf("PATCH an unknown event type = %d %s, want 400 validation_failed", r.Status, r.Body)
		}
		if r := admin("DELETE", "/v1/admin/endpoints/"+ep.ID, nil); r.Status != http.StatusOK {
			t.Errorf("DELETE = %d %s", r.Status, r.Body)
		}
		if r := admin("GET", "/v1/admin/endpoints/"+ep.ID+"/deliveries", nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"attempts"`) {
			t.Errorf("deliveries of the deleted endpoint = %d %s, want its log kept", r.Status, r.Body)
		}
		if r := admin("GET", "/v1/admin/endpoints/"+uuid.NewString()+"/deliveries", nil); r.Status != http.StatusNotFound || r.problemCode() != "endpoint_not_found" {
			t.Errorf("deliveries of an unknown endpoint = %d %s, want 404 endpoint_not_found", r.Status, r.Body)
		}
		var audited int64
		scanRows(t, s.db, &audited, `SELECT COUNT(*) FROM audit_log WHERE action IN ('create_endpoint', 'update_endpoint', 'rotate_endpoint_secret', 'redeliver_event', 'delete_endpoint')`)
		if audited < 7 {
			t.Errorf("%d endpoint actions audited, want every write (7 or more)", audited)
		}
	})
}

// waitRecorded waits until rcv recorded an event of order, then until
// payd recorded its attempt: the receiver has the request before payd
// has the answer, and payd writes the attempt after it.
func waitRecorded(t *testing.T, s *stack, rcv *receiverProc, order string) {
	t.Helper()
	eventually(t, 30*time.Second, "order "+order+"'s event did not reach the receiver", func() bool {
		for _, ev := range rcv.events() {
			if ev.OrderID == order {
				return true
			}
		}
		return false
	})
	eventually(t, 30*time.Second, "payd recorded no attempt of order "+order+"'s delivery", func() bool {
		return s.count(`notify_attempts a JOIN notify_deliveries d ON d.id = a.delivery_id WHERE d.order_id = ?`, order) > 0
	})
}

// headerOf is header name's value in a request head as the delivery log
// keeps it.
func headerOf(head, name string) string {
	for line := range strings.SplitSeq(head, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+": "); ok {
			return v
		}
	}
	return ""
}

// TestNotifyAdminCLI: `payd admin endpoints` creates an endpoint (its
// secret printed once), lists it, rotates it, shows its deliveries, and
// `payd admin events redeliver` sends an event again.
func TestNotifyAdminCLI(t *testing.T) {
	s := start(t)
	out := s.mustCLI("endpoints", "create", "https://shop.example/hooks", "-events", "order.paid,order.refunded", "-description", "cli")
	wantLines(t, "endpoints create", out, "secret whsec_", "shown this once")
	id := strings.Fields(out)[1]
	wantLines(t, "endpoints list", s.mustCLI("endpoints", "list"), id, "idle", "order.paid,order.refunded")
	wantLines(t, "endpoints rotate", s.mustCLI("endpoints", "rotate", id), "new secret whsec_", "keeps signing beside it until")
	_, cust := s.register(newEmail())
	order := s.paidOrder(cust, "1.00")
	var ev string
	eventually(t, 30*time.Second, "no delivery of order.paid to the endpoint", func() bool {
		scanRows(t, s.db, &ev, `SELECT event_id FROM notify_deliveries WHERE order_id = ? AND attempts > 0`, order)
		return ev != ""
	})
	wantLines(t, "endpoints deliveries", s.mustCLI("endpoints", "deliveries", id, "-status", "pending"), ev, "order.paid", order)
	if out, err := s.adminCLI(testAdminToken, "events", "redeliver", ev); err != nil || !strings.Contains(out, "0 deliveries pending again") {
		t.Errorf("events redeliver of a pending event = %q, %v; want 0 put back (it is pending still)", out, err)
	}
}

// TestNotifyAdminCLIUpdateDelete: `payd admin endpoints update` changes an
// endpoint's URL, event types and description, disables and enables it;
// `payd admin endpoints delete` removes it; what neither can take is a
// usage error before anything is sent.
func TestNotifyAdminCLIUpdateDelete(t *testing.T) {
	s := start(t)
	out := s.mustCLI("endpoints", "create", "https://shop.example/hooks", "-events", "order.paid", "-description", "cli")
	id := strings.Fields(out)[1]
	wantLines(t, "endpoints update", s.mustCLI("endpoints", "update", id, "-endpoint-url", "https://shop.example/v2", "-events", "order.paid,order.refunded",
		"-description", "second"), id, "https://shop.example/v2", "enabled", "order.paid,order.refunded")
	wantLines(t, "endpoints update -disable", s.mustCLI("endpoints", "update", id, "-disable"), id, "disabled")
	wantLines(t, "endpoints list", s.mustCLI("endpoints", "list"), id, "disabled", "https://shop.example/v2", "order.paid,order.refunded")
	wantLines(t, "endpoints update -enable", s.mustCLI("endpoints", "update", id, "-enable"), id, "enabled")
	var desc string
	scanRows(t, s.db, &desc, `SELECT description FROM notify_endpoints WHERE id = ?`, id)
	if desc != "second" {
		t.Errorf("description = %q, want second", desc)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"endpoints", "update", id}, "nothing to change"},
		{[]string{"endpoints", "update", id, "-enable", "-disable"}, "-enable and -disable"},
		{[]string{"endpoints", "update", id, "-events", "order.teleported"}, `-events "order.teleported": want order.paid,`},
		{[]string{"endpoints", "update", "nope", "-enable"}, `ENDPOINT_ID "nope" is not an ID`},
		{[]string{"endpoints", "update"}, "usage: payd admin endpoints update ENDPOINT_ID"},
		{[]string{"endpoints", "delete"}, "usage: payd admin endpoints delete ENDPOINT_ID"},
		{[]string{"endpoints", "delete", "nope"}, `ENDPOINT_ID "nope" is not an ID`},
	} {
		if out, err := s.adminCLI(testAdminToken, tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("payd admin %s = %v (printed %q), want an error saying %q", strings.Join(tt.args, " "), err, out, tt.want)
		}
	}
	wantLines(t, "endpoints delete", s.mustCLI("endpoints", "delete", id), id, "deleted")
	if out := s.mustCLI("endpoints", "list"); strings.Contains(out, id) {
		t.Errorf("endpoints list after delete = %q, want it gone", out)
	}
	if out, err := s.adminCLI(testAdminToken, "endpoints", "delete", id); err == nil || !strings.Contains(err.Error(), "endpoint_not_found") {
		t.Errorf("endpoints delete of a deleted endpoint = %v (printed %q), want payd's 404 endpoint_not_found", err, out)
	}
}

// TestEndpointURLWrittenOnlyWhenNew: an endpoint whose stored URL payd
// would no longer take as written (stored before the rule) is still
// changed with its own URL sent back as it is; a new URL not written as
// payd calls it is refused, and the stored one stays.
func TestEndpointURLWrittenOnlyWhenNew(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		admin := func(method, path string, body any) reply {
			t.Helper()
			return s.do(request{method: method, path: path, token: testAdminToken, key: uuid.NewString(), body: body})
		}
		r := admin("POST", "/v1/admin/endpoints", map[string]any{"url": "https://shop.example/hooks", "events": []string{"order.paid"}})
		if r.Status != http.StatusCreated {
			t.Fatalf("create endpoint = %d %s", r.Status, r.Body)
		}
		ep := decode[endpointAnswer](t, r)
		const old = "HTTPS://shop.example/hooks" // as an earlier payd stored it
		s.exec("UPDATE notify_endpoints SET url = ? WHERE id = ?", old, ep.ID)
		if r := admin("PATCH", "/v1/admin/endpoints/"+ep.ID, map[string]any{"url": old, "description": "kept"}); r.Status != http.StatusOK {
			t.Errorf("PATCH with the endpoint's own stored URL = %d %s, want 200", r.Status, r.Body)
		}
		if r := admin("PATCH", "/v1/admin/endpoints/"+ep.ID, map[string]any{"url": "HTTPS://shop.example/v2"}); r.Status != http.StatusBadRequest || r.problemCode() != "validation_failed" {
			t.Errorf("PATCH to a new URL not written as payd calls it = %d %s, want 400 validation_failed", r.Status, r.Body)
		}
		if n := s.count("notify_endpoints WHERE id = ? AND url = ? AND description = 'kept'", ep.ID, old); n != 1 {
			t.Errorf("the endpoint's stored URL and description changed: %d rows as expected, want 1", n)
		}
	})
}
