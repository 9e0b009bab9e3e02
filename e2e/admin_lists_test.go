package e2e

import (
	"github.com/payd/payd/client"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// walkList follows next_cursor through an admin list and returns every ID
// it saw in order, failing on a repeat, a page over the limit or a non-200.
func (s *stack) walkList(path string, q url.Values, limit int) []string {
	s.t.Helper()
	q = cloneValues(q)
	q.Set("limit", strconv.Itoa(limit))
	var ids []string
	seen := map[string]bool{}
	for page := 0; page < 100; page++ {
		r := s.admin("GET", path+"?"+q.Encode(), "", nil)
		if r.Status != http.StatusOK {
			s.t.Fatalf("GET %s?%s = %d %s, want 200", path, q.Encode(), r.Status, r.Body)
		}
		p := decode[struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
			NextCursor *string `json:"next_cursor"`
		}](s.t, r)
		if len(p.Data) > limit {
			s.t.Fatalf("GET %s?%s: %d rows, over the limit", path, q.Encode(), len(p.Data))
		}
		for _, d := range p.Data {
			if seen[d.ID] {
				s.t.Fatalf("GET %s?%s: %s listed twice", path, q.Encode(), d.ID)
			}
			seen[d.ID] = true
			ids = append(ids, d.ID)
		}
		if p.NextCursor == nil {
			return ids
		}
		q.Set("cursor", *p.NextCursor)
	}
	s.t.Fatalf("GET %s: more than 100 pages", path)
	return nil
}

func cloneValues(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = slices.Clone(v)
	}
	return out
}

// newestFirst sorts UUIDv7 IDs as the lists do.
func newestFirst(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	slices.Reverse(out)
	return out
}

// wantInvalid checks that each query of path is refused with 400
// validation_failed naming field.
func (s *stack) wantInvalid(path string, queries map[string]string) {
	s.t.Helper()
	for q, field := range queries {
		r := s.admin("GET", path+"?"+q, "", nil)
		if r.Status != http.StatusBadRequest || r.code(s.t) != "validation_failed" || !strings.Contains(string(r.Body), field) {
			s.t.Errorf("GET %s?%s = %d %s, want 400 validation_failed about %s", path, q, r.Status, r.Body, field)
		}
	}
}

// TestAdminDiscrepancyList: the discrepancy list shows what every source
// recorded — a pay reply with another amount (open, no run), a webhook
// success for a cancelled order (refunded automatically: resolved, no
// run), a reconciliation run (open, with its run) — and each filter
// selects exactly its own, across pages; a bad filter is a 400.
func TestAdminDiscrepancyList(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		h := s.hostile
		_, token := s.register("lists@example.com")
		from := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)

		// A pay reply reporting another amount: amount_mismatch, open.
		mismatch := s.order(token, "500.00")
		h.set(mismatch, hostileRule{Amount: "0.01"})
		if r := s.pay(token, mismatch, uuid.NewString(), "pm_ok"); r.Status != http.StatusBadGateway {
			t.Fatalf("pay with another amount = %d %s, want 502", r.Status, r.Body)
		}
		// A webhook success for a cancelled order: paid_after_close, resolved.
		closed, _, p := s.falseFailure(h, token, "42.00")
		h.clear(closed)
		if r := s.do(request{method: "POST", path: "/v1/orders/" + closed + "/cancel", token: token, key: uuid.NewString()}); r.Status != http.StatusOK {
			t.Fatalf("cancel = %d %s, want 200", r.Status, r.Body)
		}
		s.deliverThrice("payment.succeeded", p)
		// A charge made behind payd's back, found by a run: missing_local_payment, open.
		stranger := s.order(token, "5.00")
		s.chargeDirectly(uuid.NewString(), stranger, "5.00")
		to := time.Now().UTC().Add(time.Minute).Truncate(time.Second)
		r := s.admin("POST", "/v1/admin/reconciliations", uuid.NewString(), map[string]any{"from": from.Format(time.RFC3339), "to": to.Format(time.RFC3339)})
		if r.Status != http.StatusCreated {
			t.Fatalf("reconcile = %d %s, want 201", r.Status, r.Body)
		}
		run := decode[client.Run](t, r)

		byOrder := map[string]client.Discrepancy{}
		all := s.walkList("/v1/admin/discrepancies", nil, 100)
		page := decode[struct {
			Data []client.Discrepancy `json:"data"`
		}](t, s.admin("GET", "/v1/admin/discrepancies?limit=100", "", nil))
		for _, d := range page.Data {
			if d.OrderId != nil {
				byOrder[*d.OrderId] = d
			}
		}
		want := map[string]struct {
			typ, status string
			fromRun     bool
		}{
			mismatch: {"amount_mismatch", "open", false},
			closed:   {"paid_after_close", "resolved", false},
			stranger: {"missing_local_payment", "open", true},
		}
		for order, w := range want {
			d, ok := byOrder[order]
			if !ok {
				t.Errorf("no discrepancy listed about order %s (want %s)", order, w.typ)
				continue
			}
			if string(d.Type) != w.typ || string(d.Status) != w.status || (d.RunId != nil) != w.fromRun || (w.fromRun && *d.RunId != run.Id) {
				t.Errorf("discrepancy about %s = %s %s run %v, want %s %s from a run: %v", order, d.Type, d.Status, d.RunId, w.typ, w.status, w.fromRun)
			}
		}
		if len(all) != len(page.Data) || len(all) < 3 {
			t.Errorf("walked %d discrepancies, one page has %d, want the same (at least 3)", len(all), len(page.Data))
		}
		if got := s.walkList("/v1/admin/discrepancies", nil, 1); !slices.Equal(got, all) || !slices.Equal(all, newestFirst(all)) {
			t.Errorf("walked by ones %v, want %v newest first", got, all)
		}
		ids := func(keep func(d client.Discrepancy) bool) []string {
			var out []string
			for _, d := range page.Data {
				if keep(d) {
					out = append(out, d.Id)
				}
			}
			return out
		}
		for q, want := range map[string][]string{
			"status=open":                            ids(func(d client.Discrepancy) bool { return d.Status == "open" }),
			"status=resolved":                        ids(func(d client.Discrepancy) bool { return d.Status == "resolved" }),
			"status=resolving":                       nil,
			"type=amount_mismatch":                   ids(func(d client.Discrepancy) bool { return d.Type == "amount_mismatch" }),
			"order=" + closed:                        ids(func(d client.Discrepancy) bool { return d.OrderId != nil && *d.OrderId == closed }),
			"order=" + stranger + "&status=resolved": nil,
			"order=" + uuid.NewString():              nil,
			// The books' types filter like any other (none here).
			"type=disputed":                   nil,
			"type=refund_missing_locally":     nil,
			"type=refund_missing_at_provider": nil,
			"type=refund_amount_mismatch":     nil,
			"type=unconfirmed_payment":        nil,
		} {
			v, _ := url.ParseQuery(q)
			if got := s.walkList("/v1/admin/discrepancies", v, 1); !slices.Equal(got, want) {
				t.Errorf("GET /v1/admin/discrepancies?%s walked %v, want %v", q, got, want)
			}
		}
		s.wantInvalid("/v1/admin/discrepancies", map[string]string{
			"status=lost": "status", "status=OPEN": "status", "type=nope": "type", "order=ord_1": "order",
			"limit=0": "limit", "limit=101": "limit", "cursor=abc": "cursor",
		})
	})
}

// TestAdminRunList: every recorded run is listed newest first with its
// counts, manual JSON and CSV runs alike (a dry run records none), and the
// cursor walks them once whatever the page size.
func TestAdminRunList(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		if got := s.walkList("/v1/admin/reconciliations", nil, 5); len(got) != 0 {
			t.Errorf("runs before any = %v, want none", got)
		}
		from, to := time.Now().UTC().Add(-time.Hour), time.Now().UTC().Add(time.Hour)
		body := map[string]any{"from": from.Format(time.RFC3339), "to": to.Format(time.RFC3339)}
		var made []string
		for i := range 4 {
			var r reply
			if i < 3 {
				r = s.admin("POST", "/v1/admin/reconciliations", uuid.NewString(), body)
			} else {
				r = s.uploadSettlement(uuid.NewString(), from, to, false, "charge_id,idempotency_key,order_id,type,status,amount,currency,created_at\n")
			}
			if r.Status != http.StatusCreated {
				t.Fatalf("reconcile = %d %s, want 201", r.Status, r.Body)
			}
			made = append(made, decode[client.Run](t, r).Id)
		}
		dry := map[string]any{"from": body["from"], "to": body["to"], "dry_run": true}
		if r := s.admin("POST", "/v1/admin/reconciliations", uuid.NewString(), dry); r.Status != http.StatusOK {
			t.Fatalf("dry run = %d %s, want 200", r.Status, r.Body)
		}
		for _, limit := range []int{1, 3, 100} {
			if got := s.walkList("/v1/admin/reconciliations", nil, limit); !slices.Equal(got, newestFirst(made)) {
				t.Errorf("limit %d: walked %v, want %v", limit, got, newestFirst(made))
			}
		}
		first := decode[struct {
			Data []map[string]any `json:"data"`
		}](t, s.admin("GET", "/v1/admin/reconciliations?limit=1", "", nil)).Data[0]
		if first["id"] != made[3] || first["source"] != "csv" || first["finished_at"] == nil {
			t.Errorf("newest run = %v, want %s from csv, finished", first, made[3])
		}
		if _, ok := first["discrepancies"]; ok {
			t.Errorf("a listed run carries its discrepancies: %v", first)
		}
		s.wantInvalid("/v1/admin/reconciliations", map[string]string{"limit=0": "limit", "limit=x": "limit", "cursor=" + strings.Repeat("z", 300): "cursor"})
	})
}

// TestAdminCustomers: customers are listed newest first and found by email
// as registration stores it; the order search takes an email for
// customer= (an unregistered one finds nothing, something that is neither
// an ID nor an email is a 400, never a silent empty page).
func TestAdminCustomers(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		var ids []string
		toks := map[string]string{}
		for _, email := range []string{"ann@example.com", "Ben@Example.com", "cy@example.com"} {
			id, tok := s.register(email)
			ids = append(ids, id)
			toks[id] = tok
		}
		for _, limit := range []int{1, 2, 100} {
			if got := s.walkList("/v1/admin/customers", nil, limit); !slices.Equal(got, newestFirst(ids)) {
				t.Errorf("limit %d: walked %v, want %v", limit, got, newestFirst(ids))
			}
		}
		for q, want := range map[string][]string{
			"email=ben@example.com":                         {ids[1]},
			"email=" + url.QueryEscape(" BEN@example.COM "): {ids[1]},
			"email=nobody@example.com":                      nil,
		} {
			v, _ := url.ParseQuery(q)
			if got := s.walkList("/v1/admin/customers", v, 10); !slices.Equal(got, want) {
				t.Errorf("GET /v1/admin/customers?%s = %v, want %v", q, got, want)
			}
		}
		r := s.admin("GET", "/v1/admin/customers?email=ann@example.com", "", nil)
		if c := decode[struct {
			Data []map[string]any `json:"data"`
		}](t, r).Data; len(c) != 1 || c[0]["email"] != "ann@example.com" || c[0]["name"] != "Test Customer" || c[0]["token_hash"] != nil {
			t.Errorf("customer = %s, want ann's id, email, name and created_at only", r.Body)
		}
		s.wantInvalid("/v1/admin/customers", map[string]string{"email=ann": "email", "email=a%20b@example.com": "email", "limit=1000": "limit", "cursor=x": "cursor"})

		// customer= on the order search: an ID or an email.
		benOrder := s.order(toks[ids[1]], "3.00")
		s.order(toks[ids[0]], "4.00")
		for q, want := range map[string][]string{
			"customer=" + ids[1]:                             {benOrder},
			"customer=ben@example.com":                       {benOrder},
			"customer=" + url.QueryEscape("Ben@Example.com"): {benOrder},
			"customer=nobody@example.com":                    nil,
		} {
			v, _ := url.ParseQuery(q)
			if got := s.walkAdminOrders(v); !slices.Equal(got, want) {
				t.Errorf("GET /v1/admin/orders?%s = %v, want %v", q, got, want)
			}
		}
		s.wantInvalid("/v1/admin/orders", map[string]string{"customer=ben": "customer", "customer=ben@": "customer"})

		for _, path := range []string{"/v1/admin/customers", "/v1/admin/discrepancies", "/v1/admin/reconciliations"} {
			if r := s.do(request{method: "GET", path: path}); r.Status != http.StatusUnauthorized {
				t.Errorf("GET %s without a token = %d, want 401", path, r.Status)
			}
			if r := s.do(request{method: "GET", path: path, token: toks[ids[0]]}); r.Status != http.StatusForbidden {
				t.Errorf("GET %s with a customer token = %d, want 403", path, r.Status)
			}
		}
	})
}

// TestAdminDiscrepancyListRecoverer: a discrepancy the recoverer found (the
// lost reply's charge described with another amount when it asked) is on
// the operators' list too, open and found by no run.
func TestAdminDiscrepancyListRecoverer(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_LEASE": "3s", "PAYD_PROVIDER_TIMEOUT": "1s"}), tuned(silentSandbox))
		h := s.hostile
		_, token := s.register(newEmail())
		id, key := s.order(token, "500.00"), uuid.NewString()
		h.set(id, hostileRule{Drop: true, Amount: "0.01"})
		if r := s.pay(token, id, key, "pm_ok"); r.Status != http.StatusAccepted {
			t.Fatalf("pay with the reply dropped = %d %s, want 202", r.Status, r.Body)
		}
		var listed []client.Discrepancy
		eventually(t, 20*time.Second, "the recoverer's discrepancy never showed on the list", func() bool {
			r := s.admin("GET", "/v1/admin/discrepancies?status=open&type=amount_mismatch&order="+id, "", nil)
			listed = decode[struct {
				Data []client.Discrepancy `json:"data"`
			}](t, r).Data
			return len(listed) > 0
		})
		if len(listed) != 1 || listed[0].RunId != nil || listed[0].OrderId == nil || *listed[0].OrderId != id {
			t.Errorf("listed = %+v, want one open amount_mismatch about %s found by no run", listed, id)
		}
	})
}
