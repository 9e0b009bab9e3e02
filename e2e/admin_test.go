package e2e

import (
	"github.com/payd/payd/client"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
)

// TestAdminSearch: the operators' order search filters by status, customer
// and creation time, and its cursor walks every matching order exactly
// once, newest first, across customers.
func TestAdminSearch(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		ann, annTok := s.register("ann@example.com")
		ben, benTok := s.register("ben@example.com")

		// 13 orders, alternating customers: some paid, some cancelled.
		type made struct{ id, customer, status, created string }
		var all []made
		for i := range 13 {
			cust, tok := ann, annTok
			if i%2 == 1 {
				cust, tok = ben, benTok
			}
			id := s.order(tok, "1.00")
			status := "pending"
			switch i % 3 {
			case 1:
				if r := s.pay(tok, id, uuid.NewString(), "pm_ok"); r.Status != http.StatusOK {
					t.Fatalf("pay = %d %s", r.Status, r.Body)
				}
				status = "paid"
			case 2:
				if r := s.do(request{method: "POST", path: "/v1/orders/" + id + "/cancel", token: tok, key: uuid.NewString()}); r.Status != http.StatusOK {
					t.Fatalf("cancel = %d %s", r.Status, r.Body)
				}
				status = "cancelled"
			}
			got := decode[client.Order](t, s.do(request{method: "GET", path: "/v1/orders/" + id, token: tok}))
			all = append(all, made{id, cust, status, stamp(got.CreatedAt)})
		}
		want := func(keep func(made) bool) []string {
			var ids []string
			for _, m := range all {
				if keep(m) {
					ids = append(ids, m.id)
				}
			}
			sort.Sort(sort.Reverse(sort.StringSlice(ids))) // UUIDv7: newest first
			return ids
		}
		mid, late := all[4].created, all[9].created
		tests := []struct {
			name  string
			query url.Values
			want  []string
		}{
			{"everything", url.Values{}, want(func(made) bool { return true })},
			{"paid", url.Values{"status": {"paid"}}, want(func(m made) bool { return m.status == "paid" })},
			{"ann's", url.Values{"customer": {ann}}, want(func(m made) bool { return m.customer == ann })},
			{"ben's cancelled", url.Values{"customer": {ben}, "status": {"cancelled"}},
				want(func(m made) bool { return m.customer == ben && m.status == "cancelled" })},
			{"from", url.Values{"from": {mid}}, want(func(m made) bool { return m.created >= mid })},
			{"from to", url.Values{"from": {mid}, "to": {late}}, want(func(m made) bool { return m.created >= mid && m.created < late })},
			{"nobody's", url.Values{"customer": {uuid.NewString()}}, nil},
		}
		for _, tt := range tests {
			for _, limit := range []string{"2", "5", "100"} {
				tt.query.Set("limit", limit)
				got := s.walkAdminOrders(tt.query)
				if !slices.Equal(got, tt.want) {
					t.Errorf("%s (limit %s): search walked %d orders %v, want %d %v", tt.name, limit, len(got), got, len(tt.want), tt.want)
				}
			}
		}
		if n := s.count("orders"); n != 13 {
			t.Errorf("orders = %d, want 13", n)
		}

		for _, q := range []string{"status=lost", "from=yesterday", "to=2026-13-01T00:00:00Z", "limit=1000", "limit=-1",
			"from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z"} {
			r := s.admin("GET", "/v1/admin/orders?"+q, "", nil)
			if r.Status != http.StatusBadRequest || r.code(t) != "validation_failed" {
				t.Errorf("GET /v1/admin/orders?%s = %d %s, want 400 validation_failed", q, r.Status, r.Body)
			}
		}
	})
}

// walkAdminOrders follows next_cursor through the search and returns every
// ID it saw, failing on a repeat or a page over the limit.
func (s *stack) walkAdminOrders(q url.Values) []string {
	s.t.Helper()
	q = maps.Clone(q)
	var ids []string
	seen := map[string]bool{}
	for page := 0; ; page++ {
		if page > 50 {
			s.t.Fatalf("search %v: more than 50 pages", q)
		}
		r := s.admin("GET", "/v1/admin/orders?"+q.Encode(), "", nil)
		if r.Status != http.StatusOK {
			s.t.Fatalf("GET /v1/admin/orders?%s = %d %s, want 200", q.Encode(), r.Status, r.Body)
		}
		p := decode[client.OrderPage](s.t, r)
		for _, o := range p.Data {
			if seen[o.Id] {
				s.t.Fatalf("search %v: order %s shown twice", q, o.Id)
			}
			seen[o.Id] = true
			ids = append(ids, o.Id)
		}
		if p.NextCursor == nil {
			return ids
		}
		q.Set("cursor", *p.NextCursor)
	}
}

// TestAdminTimeline: GET /v1/admin/orders/{id} tells an order's whole story
// — attempts with their provider charge, webhook events, refunds and the
// operators' audit trail — each list and the merged timeline in time order.
func TestAdminTimeline(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, tok := s.register("tia@example.com")
		id := s.order(tok, "20.00")
		declineKey, payKey, refundKey := uuid.NewString(), uuid.NewString(), uuid.NewString()
		if r := s.pay(tok, id, declineKey, "pm_declined"); r.Status != http.StatusPaymentRequired {
			t.Fatalf("pay declined = %d %s, want 402", r.Status, r.Body)
		}
		if r := s.pay(tok, id, payKey, "pm_ok"); r.Status != http.StatusOK {
			t.Fatalf("pay = %d %s, want 200", r.Status, r.Body)
		}
		if r := s.refund(id, refundKey, "5.00"); r.Status != http.StatusOK {
			t.Fatalf("refund = %d %s, want 200", r.Status, r.Body)
		}

		// The sandbox delivers payment.failed, payment.succeeded and
		// refund.succeeded; wait until payd has applied all three.
		var tl client.Timeline
		applied := func() bool {
			tl = s.timeline(id)
			return len(tl.WebhookEvents) == 3 && !slices.ContainsFunc(tl.WebhookEvents, func(e client.WebhookEvent) bool { return e.Outcome == nil })
		}
		if !within(20*time.Second, applied) {
			t.Fatalf("webhook events on the timeline = %+v, want 3 applied", tl.WebhookEvents)
		}
		if tl.Order.Id != id || tl.Order.Status != "paid" || tl.Order.RefundedAmount != "5.00" {
			t.Errorf("timeline order = %+v, want %s paid with 5.00 refunded", tl.Order, id)
		}
		charge := s.sandboxCharge(id, "succeeded")
		if len(tl.Attempts) != 2 {
			t.Fatalf("attempts = %+v, want 2", tl.Attempts)
		}
		if a := tl.Attempts[0]; a.RequestId != declineKey || a.Status != "failed" || a.Amount != "20.00" {
			t.Errorf("first attempt = %+v, want failed under %s for 20.00", a, declineKey)
		}
		if a := tl.Attempts[1]; a.RequestId != payKey || a.Status != "succeeded" || a.ProviderChargeId == nil || *a.ProviderChargeId != charge {
			t.Errorf("second attempt = %+v, want succeeded under %s with charge %s", a, payKey, charge)
		}
		types := []string{}
		for _, e := range tl.WebhookEvents {
			types = append(types, e.Type)
		}
		slices.Sort(types)
		if !slices.Equal(types, []string{"payment.failed", "payment.succeeded", "refund.succeeded"}) {
			t.Errorf("event types = %v, want payment.failed, payment.succeeded, refund.succeeded", types)
		}
		if len(tl.Refunds) != 1 || tl.Refunds[0].Amount != "5.00" || tl.Refunds[0].Status != "succeeded" || tl.Refunds[0].ProviderChargeId != charge {
			t.Errorf("refunds = %+v, want one succeeded 5.00 of %s", tl.Refunds, charge)
		}
		if len(tl.Audit) != 1 {
			t.Fatalf("audit = %+v, want the refund", tl.Audit)
		}
		if a := tl.Audit[0]; a.Actor != "admin" || a.Action != "refund" || a.RequestId == nil || *a.RequestId != refundKey ||
			a.Result != 200 || a.OrderId == nil || *a.OrderId != id || a.Target == nil || *a.Target != tl.Refunds[0].Id {
			t.Errorf("audit entry = %+v, want admin refund %s of %s → 200, target the refund", a, refundKey, id)
		}
		if d := tl.Audit[0].Detail; d == nil || (*d)["amount"] != "5.00" || (*d)["reason"] != "customer asked" || (*d)["replayed"] != false {
			t.Errorf("audit detail = %v, want the amount, the reason and replayed false", d)
		}
		if at := tl.Audit[0].CreatedAt; time.Since(at) > time.Minute || time.Since(at) < 0 {
			t.Errorf("audit entry created_at = %v, want the time of the refund", at)
		}
		if len(tl.Discrepancies) != 0 {
			t.Errorf("discrepancies = %+v, want none", tl.Discrepancies)
		}

		inOrder := func(what string, stamps []string) {
			if !sort.StringsAreSorted(stamps) {
				t.Errorf("%s not in time order: %v", what, stamps)
			}
		}
		var at []string
		for _, a := range tl.Attempts {
			at = append(at, stamp(a.CreatedAt))
		}
		inOrder("attempts", at)
		at = nil
		for _, e := range tl.WebhookEvents {
			at = append(at, stamp(e.ReceivedAt))
		}
		inOrder("webhook events", at)
		at = nil
		kinds := map[string]int{}
		for _, e := range tl.Timeline {
			at = append(at, stamp(e.At))
			kinds[string(e.Kind)]++
		}
		inOrder("timeline", at)
		if kinds["order"] != 1 || kinds["attempt"] != 2 || kinds["webhook"] != 3 || kinds["refund"] != 1 || kinds["audit"] != 1 {
			t.Errorf("timeline kinds = %v, want 1 order, 2 attempts, 3 webhooks, 1 refund, 1 audit", kinds)
		}

		// A fresh order's lists are empty lists, not null.
		bare := s.admin("GET", "/v1/admin/orders/"+s.order(tok, "1.00"), "", nil).json(t)
		for _, k := range []string{"attempts", "webhook_events", "refunds", "discrepancies", "audit"} {
			if l, ok := bare[k].([]any); !ok || len(l) != 0 {
				t.Errorf("fresh order %s = %v, want []", k, bare[k])
			}
		}
		if r := s.admin("GET", "/v1/admin/orders/"+uuid.NewString(), "", nil); r.Status != http.StatusNotFound || r.code(t) != "order_not_found" {
			t.Errorf("timeline of an unknown order = %d %s, want 404 order_not_found", r.Status, r.Body)
		}
	})
}

// sandboxCharge returns the ID of the one charge of orderID in status at
// the sandbox, failing unless there is exactly one.
func (s *stack) sandboxCharge(orderID, status string) string {
	s.t.Helper()
	var ids []string
	for _, c := range s.sandboxCharges(orderID, domain.ChargeStatus(status)) {
		ids = append(ids, c.ID)
	}
	if len(ids) != 1 {
		s.t.Fatalf("sandbox charges of %s in %s = %v, want one", orderID, status, ids)
	}
	return ids[0]
}
