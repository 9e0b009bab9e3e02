package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestBuyerCannotNameAPrice: the checkout page's mug costs what the
// catalogue says whatever the browser sends: a buyer's unit_price is 400
// naming the line's field and writes nothing; the same cart without it is
// priced at 12.00 and paid for 12.00.
func TestBuyerCannotNameAPrice(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		s.newProduct("mug", "12.00", 3)
		_, tok := s.register(newEmail())
		before := s.snapshot()
		r := s.do(request{method: "POST", path: "/v1/orders", token: tok, key: uuid.NewString(),
			body: `{"currency":"USD","items":[{"sku":"mug","name":"Stoneware mug","quantity":1,"unit_price":"0.01"}]}`})
		if r.Status != http.StatusBadRequest || r.problemCode() != "validation_failed" || !strings.Contains(string(r.Body), `"items[0].unit_price"`) {
			t.Fatalf("a buyer's price = %d %s, want 400 validation_failed naming items[0].unit_price", r.Status, r.Body)
		}
		for _, name := range []string{"amount", "price", "unit_amount", "Unit_Price"} {
			r := s.do(request{method: "POST", path: "/v1/orders", token: tok, key: uuid.NewString(),
				body: `{"items":[{"sku":"mug","quantity":1,"` + name + `":"0.01"}]}`})
			if f := problemFields(t, r); r.Status != http.StatusBadRequest || len(f) != 1 || f[0] != "items[0].unit_price" {
				t.Errorf("a buyer's %s on a line = %d %s, want 400 naming items[0].unit_price alone", name, r.Status, r.Body)
			}
		}
		if r := s.merchant(testMerchantKey, "POST", "/v1/orders", uuid.NewString(), `{"items":[{"sku":"mug","quantity":1,"price":"0.01"}]}`); r.Status != http.StatusBadRequest ||
			!strings.Contains(string(r.Body), `"items[0].price"`) {
			t.Errorf("the merchant's price under another name = %d %s, want 400 naming items[0].price (its price is unit_price)", r.Status, r.Body)
		}
		if after := s.snapshot(); after != before {
			t.Fatalf("a refused order wrote: %+v, then %+v", before, after)
		}
		r = s.do(request{method: "POST", path: "/v1/orders", token: tok, body: `{"items":[{"sku":"mug","quantity":1}]}`})
		if r.Status != http.StatusCreated {
			t.Fatalf("the order by SKU = %d %s, want 201", r.Status, r.Body)
		}
		o := r.json(t)
		if o["amount"] != "12.00" || o["currency"] != "USD" || !strings.HasPrefix(o["client_secret"].(string), o["id"].(string)+"_secret_") {
			t.Fatalf("the order by SKU = %s, want 12.00 USD with its client secret", r.Body)
		}
		if p := s.pay(tok, o["id"].(string), uuid.NewString(), "pm_ok"); p.Status != http.StatusOK || p.json(t)["amount"] != "12.00" {
			t.Fatalf("pay = %d %s, want 200 paid for 12.00", p.Status, p.Body)
		}
	})
}

// TestClientSecrets: the merchant creates a guest order and hands its
// client secret on; the secret reads, streams and pays that order and
// looks up its own key, and nothing else: another order is 404, another
// route 403. The merchant reads every order with its secret; a customer's
// token still works on its own order the merchant created for it.
func TestClientSecrets(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		s.newProduct("mug", "12.00", nil)
		custID, tok := s.register(newEmail())
		create := func(body string) map[string]any {
			t.Helper()
			r := s.merchant(testMerchantKey, "POST", "/v1/orders", uuid.NewString(), body)
			if r.Status != http.StatusCreated {
				t.Fatalf("merchant's order %s = %d %s, want 201", body, r.Status, r.Body)
			}
			return r.json(t)
		}
		guest := create(`{"currency":"USD","items":[{"sku":"mug","quantity":1},{"name":"Gift wrap","quantity":1,"unit_price":"2.50"}]}`)
		if guest["amount"] != "14.50" || guest["customer_id"] != nil {
			t.Fatalf("guest order = %v, want 14.50 with no customer", guest)
		}
		theirs := create(`{"customer_id":"` + custID + `","items":[{"sku":"mug","quantity":2}]}`)
		secret, id := guest["client_secret"].(string), guest["id"].(string)
		other := theirs["id"].(string)

		if r := s.do(request{method: "GET", path: "/v1/orders/" + id, token: secret}); r.Status != http.StatusOK || r.json(t)["client_secret"] != nil {
			t.Errorf("GET own order with its secret = %d %s, want 200 without the secret", r.Status, r.Body)
		}
		if r := s.do(request{method: "GET", path: "/v1/orders/" + other, token: secret}); r.Status != http.StatusNotFound {
			t.Errorf("GET another order with a secret = %d, want 404", r.Status)
		}
		if r := s.pay(secret, other, uuid.NewString(), "pm_ok"); r.Status != http.StatusNotFound {
			t.Errorf("pay another order with a secret = %d, want 404", r.Status)
		}
		for _, rq := range []request{
			{method: "GET", path: "/v1/orders", token: secret},
			{method: "POST", path: "/v1/orders", token: secret, body: `{"items":[{"sku":"mug","quantity":1}]}`},
			{method: "POST", path: "/v1/products", token: secret, key: uuid.NewString(), body: `{"sku":"x","name":"x","unit_price":"1.00","currency":"USD"}`},
			{method: "GET", path: "/v1/admin/orders", token: secret},
		} {
			if r := s.do(rq); r.Status != http.StatusForbidden && r.Status != http.StatusUnauthorized {
				t.Errorf("%s %s with a client secret = %d, want 401 or 403", rq.method, rq.path, r.Status)
			}
		}
		if r := s.do(request{method: "GET", path: "/v1/orders/" + id, token: id + "_secret_" + strings.Repeat("A", 43)}); r.Status != http.StatusUnauthorized {
			t.Errorf("a forged secret = %d, want 401", r.Status)
		}

		key := uuid.NewString()
		if r := s.pay(secret, id, key, "pm_ok"); r.Status != http.StatusOK || r.json(t)["status"] != "paid" {
			t.Fatalf("pay with the secret = %d %s, want 200 paid", r.Status, r.Body)
		}
		if r := s.do(request{method: "GET", path: "/v1/requests/" + key, token: secret}); r.Status != http.StatusOK {
			t.Errorf("the secret's own key = %d %s, want 200", r.Status, r.Body)
		}
		if r := s.do(request{method: "GET", path: "/v1/requests/" + key, token: tok}); r.Status != http.StatusNotFound {
			t.Errorf("another caller's look-up of the secret's key = %d, want 404", r.Status)
		}

		if r := s.do(request{method: "GET", path: "/v1/orders/" + other, token: tok}); r.Status != http.StatusOK || r.json(t)["client_secret"] != nil {
			t.Errorf("the customer's own order the merchant made = %d %s, want 200 without the secret", r.Status, r.Body)
		}
		if r := s.do(request{method: "GET", path: "/v1/orders/" + id, token: testMerchantKey}); r.Status != http.StatusOK || r.json(t)["client_secret"] != secret {
			t.Errorf("the merchant's read = %d %s, want 200 with the same secret", r.Status, r.Body)
		}
		if r := s.pay(testMerchantKey, other, uuid.NewString(), "pm_ok"); r.Status != http.StatusForbidden {
			t.Errorf("the merchant paying = %d, want 403: paying is the buyer's", r.Status)
		}
		if strings.Contains(s.logs.String(), secret) {
			t.Errorf("a client secret reached the log")
		}

		// Every answer to the merchant carries the order's secret, its
		// cancel's too: stored for replays, each rests sealed.
		ckey := uuid.NewString()
		c := s.merchant(testMerchantKey, "POST", "/v1/orders/"+other+"/cancel", ckey, nil)
		otherSecret, _ := c.json(t)["client_secret"].(string)
		if c.Status != http.StatusOK || otherSecret == "" {
			t.Fatalf("the merchant's cancel = %d %s, want 200 with the order's secret", c.Status, c.Body)
		}
		if again := s.merchant(testMerchantKey, "POST", "/v1/orders/"+other+"/cancel", ckey, nil); !bytes.Equal(again.Body, c.Body) {
			t.Errorf("the cancel's replay = %d %s, want the first answer", again.Status, again.Body)
		}
		s.noStoredAnswerHolds(t, secret, otherSecret)
	})
}

// TestOutOfStockOverHTTP: the last units go to one buyer; the next is 409
// out_of_stock naming the SKU, and a cancel gives the units back.
func TestOutOfStockOverHTTP(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		s.newProduct("mug", "12.00", 2)
		_, tok := s.register(newEmail())
		first := s.do(request{method: "POST", path: "/v1/orders", token: tok, body: `{"items":[{"sku":"mug","quantity":2}]}`})
		if first.Status != http.StatusCreated {
			t.Fatalf("first order = %d %s", first.Status, first.Body)
		}
		r := s.do(request{method: "POST", path: "/v1/orders", token: tok, body: `{"items":[{"sku":"mug","quantity":1}]}`})
		if r.Status != http.StatusConflict || r.problemCode() != "out_of_stock" || r.json(t)["sku"] != "mug" {
			t.Fatalf("order past the stock = %d %s, want 409 out_of_stock naming mug", r.Status, r.Body)
		}
		id := first.json(t)["id"].(string)
		if c := s.do(request{method: "POST", path: "/v1/orders/" + id + "/cancel", token: tok, key: uuid.NewString()}); c.Status != http.StatusOK {
			t.Fatalf("cancel = %d %s", c.Status, c.Body)
		}
		if p := s.do(request{method: "GET", path: "/v1/products/mug"}); p.json(t)["stock"] != float64(2) {
			t.Fatalf("stock after the cancel = %s, want 2", p.Body)
		}
		if r := s.merchant(testMerchantKey, "POST", "/v1/orders", uuid.NewString(), `{"items":[{"sku":"mug","quantity":1}]}`); r.Status != http.StatusCreated {
			t.Fatalf("the merchant's order = %d %s, want 201", r.Status, r.Body)
		}
		text := string(s.do(request{method: "GET", path: "/metrics"}).Body)
		for series, want := range map[string]float64{
			`payd_orders_created_total{creator="customer"}`: 1,
			`payd_orders_created_total{creator="merchant"}`: 1,
			`payd_out_of_stock_total`:                       1,
		} {
			if got := metricValue(t, text, series); got != want {
				t.Errorf("%s = %v, want %v", series, got, want)
			}
		}
	})
}

// TestClientSecretStreamsAndCancels: an order's client secret streams the
// order's events and cancels it (stock back); another order's stream and
// cancel are 404. The merchant's creation and cancel are on the audit
// trail as merchant:default, naming the order, a buyer's creation is not,
// and the shop is told the merchant cancelled (cause merchant, its key).
func TestClientSecretStreamsAndCancels(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		s.newProduct("mug", "12.00", 2)
		_, tok := s.register(newEmail())
		mine := s.do(request{method: "POST", path: "/v1/orders", token: tok, body: `{"items":[{"sku":"mug","quantity":1}]}`})
		if mine.Status != http.StatusCreated {
			t.Fatalf("the buyer's order = %d %s, want 201", mine.Status, mine.Body)
		}
		other := mine.json(t)["id"].(string)
		r := s.merchant(testMerchantKey, "POST", "/v1/orders", uuid.NewString(), `{"items":[{"sku":"mug","quantity":1}]}`)
		if r.Status != http.StatusCreated {
			t.Fatalf("the merchant's order = %d %s, want 201", r.Status, r.Body)
		}
		o := r.json(t)
		id, secret := o["id"].(string), o["client_secret"].(string)

		st := s.stream(secret, id)
		if ev := st.next(); ev.Status != "pending" {
			t.Fatalf("the secret's stream opens on %q, want pending", ev.Status)
		}
		if r := s.do(request{method: "GET", path: "/v1/orders/" + other + "/events", token: secret}); r.Status != http.StatusNotFound {
			t.Errorf("another order's stream with the secret = %d, want 404", r.Status)
		}
		if r := s.do(request{method: "POST", path: "/v1/orders/" + other + "/cancel", token: secret, key: uuid.NewString()}); r.Status != http.StatusNotFound {
			t.Errorf("another order's cancel with the secret = %d %s, want 404", r.Status, r.Body)
		}
		cancelKey := uuid.NewString()
		if c := s.do(request{method: "POST", path: "/v1/orders/" + id + "/cancel", token: secret, key: cancelKey}); c.Status != http.StatusOK || c.json(t)["status"] != "cancelled" {
			t.Fatalf("cancel with the secret = %d %s, want 200 cancelled", c.Status, c.Body)
		}
		// A buyer's cancel answers no secret: its key's look-up shows the
		// answer itself, not a sealed one.
		look := s.do(request{method: "GET", path: "/v1/requests/" + cancelKey, token: secret})
		if resp, _ := look.json(t)["response"].(map[string]any); look.Status != http.StatusOK || resp["sealed"] == true || !strings.Contains(string(look.Body), `"cancelled"`) {
			t.Errorf("the look-up of the secret's cancel = %d %s, want 200 with the cancelled order", look.Status, look.Body)
		}
		st.until("cancelled", orderEvent{})
		if got := decode[product](t, s.do(request{method: "GET", path: "/v1/products/mug"})).Stock; got == nil || *got != 1 {
			t.Errorf("stock after the secret's cancel = %v, want 1 (the buyer's order holds the other)", got)
		}

		// The merchant cancels the buyer's order with its key.
		ckey := uuid.NewString()
		if c := s.merchant(testMerchantKey, "POST", "/v1/orders/"+other+"/cancel", ckey, nil); c.Status != http.StatusOK {
			t.Fatalf("the merchant's cancel = %d %s, want 200", c.Status, c.Body)
		}
		var causes []struct{ Cause, CauseRef string }
		scanRows(t, s.db, &causes, "SELECT cause, cause_ref FROM notify_events WHERE order_id = ? AND type = 'order.cancelled'", other)
		if len(causes) != 1 || causes[0].Cause != "merchant" || causes[0].CauseRef != ckey {
			t.Errorf("the merchant's cancel is told as %+v, want cause merchant with its key", causes)
		}
		var trail []struct {
			Actor, Action, OrderID string
			Result                 int
		}
		scanRows(t, s.db, &trail, "SELECT actor, action, COALESCE(order_id, '') AS order_id, result FROM audit_log WHERE action IN ('create_order', 'cancel_order') ORDER BY created_at, id")
		want := []string{"merchant:default create_order " + id + " 201", "merchant:default cancel_order " + other + " 200"}
		var got []string
		for _, e := range trail {
			got = append(got, fmt.Sprintf("%s %s %s %d", e.Actor, e.Action, e.OrderID, e.Result))
		}
		if !slices.Equal(got, want) {
			t.Errorf("audit trail = %q, want %q (the buyer's creation and the secret's cancel are not the merchant's)", got, want)
		}
	})
}

// noStoredAnswerHolds fails the test if a stored answer (idempotency
// records, read back as bytes: a LIKE does not see into SQLite's BLOBs)
// holds any of secrets in plain text.
func (s *stack) noStoredAnswerHolds(t *testing.T, secrets ...string) {
	t.Helper()
	var bodies [][]byte
	if err := s.db.Gorm().Raw("SELECT response_body FROM idempotency_records WHERE response_body IS NOT NULL").Scan(&bodies).Error; err != nil || len(bodies) == 0 {
		t.Fatalf("stored answers = %d, %v, want some", len(bodies), err)
	}
	for _, b := range bodies {
		for _, sec := range secrets {
			if bytes.Contains(b, []byte(sec)) {
				t.Errorf("a secret rests in a stored answer: %.80s…", b)
			}
		}
	}
}
