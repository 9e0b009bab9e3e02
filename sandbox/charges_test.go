package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/sandbox/sandboxtest"
)

// Fifty identical charge requests, racing through two sandbox processes on
// one database, must produce one charge and one webhook event.
func TestChargeIdempotentUnderConcurrency(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		a := sandboxtest.New(t, fastConfig(dbURL))
		b := sandboxtest.New(t, fastConfig(dbURL))
		ctx := context.Background()

		const n = 50
		ids := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			client := a.Client
			if i%2 == 1 {
				client = b.Client
			}
			wg.Go(func() {
				ch, err := client.Charge(ctx, chargeReq("same-key", "pm_ok"))
				ids[i], errs[i] = ch.ID, err
			})
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("Charge #%d = %v, want nil", i, errs[i])
			}
			if ids[i] != ids[0] {
				t.Fatalf("Charge #%d id = %q, want %q (the one charge)", i, ids[i], ids[0])
			}
		}
		charges, err := a.Charges(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(charges) != 1 {
			t.Fatalf("charges recorded = %d, want 1", len(charges))
		}
		ds, err := a.Deliveries(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 1 || ds[0].Type != "payment.succeeded" {
			t.Fatalf("outbox = %+v, want one payment.succeeded", ds)
		}
	})
}

func TestChargeReplayAndKeyReuse(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		sb := sandboxtest.New(t, fastConfig(dbURL))
		ctx := context.Background()
		first, err := sb.Client.Charge(ctx, chargeReq("k1", "pm_declined"))
		if err != nil {
			t.Fatal(err)
		}
		again, err := sb.Client.Charge(ctx, chargeReq("k1", "pm_declined"))
		if err != nil || again.ID != first.ID || again.Status != domain.ChargeFailed {
			t.Fatalf("replay = %+v, %v; want charge %s failed", again, err, first.ID)
		}

		for name, mutate := range map[string]func(*domain.ChargeRequest){
			"amount":   func(r *domain.ChargeRequest) { r.Amount = dec("99.00") },
			"order":    func(r *domain.ChargeRequest) { r.OrderID = "another-order" },
			"currency": func(r *domain.ChargeRequest) { r.Currency = "EUR" },
			"method":   func(r *domain.ChargeRequest) { r.PaymentMethod = "pm_ok" },
		} {
			req := chargeReq("k1", "pm_declined")
			mutate(&req)
			_, err := sb.Client.Charge(ctx, req)
			var re *domain.ProviderRequestError
			if !errors.As(err, &re) || re.StatusCode != http.StatusUnprocessableEntity || re.Code != "idempotency_key_reused" {
				t.Errorf("Charge(k1, other %s) = %v, want 422 idempotency_key_reused", name, err)
			}
		}
		if charges, _ := sb.Charges(ctx); len(charges) != 1 {
			t.Fatalf("charges recorded = %d, want 1", len(charges))
		}
	})
}

func TestChargeValidation(t *testing.T) {
	sb := sandboxtest.New(t, fastConfig(sandboxtest.SQLiteURL(t)))
	const good = `{"order_id":"o1","amount":"12.30","currency":"USD","payment_method":"pm_ok"}`
	tests := []struct {
		name, key, ctype, body string
		wantStatus             int
		wantCode               string
	}{
		{"missing key", "", "application/json", good, 400, "idempotency_key_missing"},
		{"invalid key", "has space", "application/json", good, 400, "idempotency_key_invalid"},
		{"unknown field", "v1", "application/json", `{"order_id":"o1","amount":"1.00","currency":"USD","payment_method":"pm_ok","card":"4242"}`, 400, "invalid_json"},
		{"unknown method", "v2", "application/json", `{"order_id":"o1","amount":"1.00","currency":"USD","payment_method":"pm_4242424242424242"}`, 400, "unknown_payment_method"},
		{"too fine", "v3", "application/json", `{"order_id":"o1","amount":"1.005","currency":"USD","payment_method":"pm_ok"}`, 400, "validation_failed"},
		{"zero", "v4", "application/json", `{"order_id":"o1","amount":"0.00","currency":"USD","payment_method":"pm_ok"}`, 400, "validation_failed"},
		{"number amount", "v5", "application/json", `{"order_id":"o1","amount":12.3,"currency":"USD","payment_method":"pm_ok"}`, 400, "invalid_json"},
		{"currency", "v6", "application/json", `{"order_id":"o1","amount":"1.00","currency":"XXX","payment_method":"pm_ok"}`, 400, "validation_failed"},
		{"no order", "v7", "application/json", `{"amount":"1.00","currency":"USD","payment_method":"pm_ok"}`, 400, "validation_failed"},
		{"content type", "v8", "text/plain", good, 415, "unsupported_media_type"},
		{"too big", "v9", "application/json", `{"order_id":"` + strings.Repeat("x", 2<<20) + `"}`, 413, "payload_too_large"},
	}
	for _, tt := range tests {
		status, body := post(t, sb.URL+"/v1/charges", tt.key, tt.ctype, tt.body)
		if status != tt.wantStatus || !strings.Contains(body, `"code":"`+tt.wantCode+`"`) {
			t.Errorf("%s: POST /v1/charges = %d %s, want %d %s", tt.name, status, body, tt.wantStatus, tt.wantCode)
		}
		if strings.Contains(body, "4242") {
			t.Errorf("%s: reply echoes payment data: %s", tt.name, body)
		}
	}
	if charges, _ := sb.Charges(context.Background()); len(charges) != 0 {
		t.Fatalf("charges recorded = %d, want 0", len(charges))
	}
}

func TestListChargesWindow(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		sb, clk := clockedSandbox(t, dbURL)
		ctx := context.Background()
		t0 := time.Date(2024, 5, 1, 10, 0, 0, 123456000, time.UTC)
		for i := range 4 {
			clk.Set(t0.Add(time.Duration(i) * time.Second))
			if _, err := sb.Client.Charge(ctx, chargeReq(fmt.Sprintf("w%d", i), "pm_ok")); err != nil {
				t.Fatal(err)
			}
		}
		tests := []struct {
			from, to time.Time
			want     []string
		}{
			{t0, t0.Add(4 * time.Second), []string{"w0", "w1", "w2", "w3"}},
			{t0.Add(time.Second), t0.Add(3 * time.Second), []string{"w1", "w2"}}, // [from, to)
			{t0.Add(time.Microsecond), t0.Add(time.Second + time.Microsecond), []string{"w1"}},
			{t0.Add(-time.Hour), t0, nil},
		}
		for _, tt := range tests {
			got, err := provider.AllCharges(ctx, sb.Client, tt.from, tt.to)
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, c := range got {
				keys = append(keys, c.IdempotencyKey)
			}
			if fmt.Sprint(keys) != fmt.Sprint(tt.want) {
				t.Errorf("ListCharges(%v, %v) = %v, want %v", tt.from, tt.to, keys, tt.want)
			}
		}
		got, _ := provider.AllCharges(ctx, sb.Client, t0, t0.Add(time.Second))
		if len(got) != 1 || !got[0].CreatedAt.Equal(t0) {
			t.Errorf("CreatedAt = %v, want %v to the microsecond", got, t0)
		}
		if _, err := sb.Client.ListCharges(ctx, t0, t0, ""); !domain.IsProviderRequestError(err, "validation_failed") {
			t.Errorf("ListCharges(empty window) = %v, want validation_failed", err)
		}
	})
}

// TestListChargesPages: the list comes in pages of limit, oldest first,
// each after the charge starting_after names, with has_more on all but the
// last; charges created in one microsecond keep their place by ID; a
// cursor that names no charge and a limit out of bounds are refused (an
// empty page there would end a walk early). The client walks pages of 500, so a busy day is never one
// reply (the client reads at most 4 MiB of one).
func TestListChargesPages(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		sb, clk := clockedSandbox(t, dbURL)
		ctx := context.Background()
		t0 := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
		var want []string
		for i := range 7 {
			clk.Set(t0.Add(time.Duration(i/3) * time.Second)) // three to a second
			ch, err := sb.Client.Charge(ctx, chargeReq(fmt.Sprintf("p%d", i), "pm_ok"))
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, ch.ID)
		}
		slices.SortStableFunc(want[0:3], strings.Compare) // one microsecond: by ID
		slices.SortStableFunc(want[3:6], strings.Compare)
		q := "from=" + t0.Format(time.RFC3339) + "&to=" + t0.Add(time.Hour).Format(time.RFC3339)
		type page struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
			HasMore bool `json:"has_more"`
		}
		get := func(query string) (int, page) {
			t.Helper()
			var out page
			resp, err := http.Get(sb.URL + "/v1/charges?" + query)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
					t.Fatal(err)
				}
			}
			return resp.StatusCode, out
		}
		var got []string
		pages, after := 0, ""
		for {
			code, page := get(q + "&limit=2&starting_after=" + after)
			if code != http.StatusOK {
				t.Fatalf("page %d = %d", pages, code)
			}
			pages++
			for _, c := range page.Data {
				got = append(got, c.ID)
			}
			if !page.HasMore {
				break
			}
			after = page.Data[len(page.Data)-1].ID
		}
		if pages != 4 || !slices.Equal(got, want) {
			t.Errorf("pages of 2 = %d pages of %v, want 4 pages of %v", pages, got, want)
		}
		if code, page := get(q + "&starting_after=ch_nobody"); code != http.StatusBadRequest {
			t.Errorf("after an unknown charge = %d %+v, want 400", code, page)
		}
		for _, bad := range []string{"0", "1001", "x"} {
			if code, _ := get(q + "&limit=" + bad); code != http.StatusBadRequest {
				t.Errorf("limit=%s = %d, want 400", bad, code)
			}
		}
		all, err := provider.AllCharges(ctx, sb.Client, t0, t0.Add(time.Hour))
		if err != nil || len(all) != 7 {
			t.Errorf("AllCharges = %d, %v, want 7", len(all), err)
		}
	})
}

func TestGetChargeNotFound(t *testing.T) {
	sb := sandboxtest.New(t, fastConfig(sandboxtest.SQLiteURL(t)))
	if _, err := sb.Client.GetCharge(context.Background(), domain.Attempt{ID: "never-used"}); !errors.Is(err, domain.ErrChargeNotFound) {
		t.Fatalf("GetCharge(never-used) = %v, want ErrChargeNotFound", err)
	}
}

// GET /v1/charges/by-id/{id} answers what GET /v1/charges/{key} does, by
// the sandbox's own charge id.
func TestGetChargeByID(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		sb := sandboxtest.New(t, fastConfig(dbURL))
		ch, err := sb.Client.Charge(context.Background(), chargeReq("k1", "pm_ok"))
		if err != nil {
			t.Fatal(err)
		}
		byKeyStatus, byKeyBody := get(t, sb.URL+"/v1/charges/k1")
		status, body := get(t, sb.URL+"/v1/charges/by-id/"+ch.ID)
		if status != http.StatusOK || body != byKeyBody || byKeyStatus != http.StatusOK {
			t.Errorf("GET by-id = %d %s, want %d %s", status, body, byKeyStatus, byKeyBody)
		}
		if !strings.Contains(body, `"disputed_amount":"0.00"`) {
			t.Errorf("charge JSON %s lacks disputed_amount 0.00", body)
		}
		status, body = get(t, sb.URL+"/v1/charges/by-id/ch_nope")
		if status != http.StatusNotFound || !strings.Contains(body, `{"error":{"code":"charge_not_found"`) {
			t.Errorf("GET by-id unknown = %d %s, want 404 charge_not_found", status, body)
		}
		// The key is not an id.
		if status, _ := get(t, sb.URL+"/v1/charges/by-id/k1"); status != http.StatusNotFound {
			t.Errorf("GET by-id/<key> = %d, want 404", status)
		}
	})
}
