package stripefake_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/payd/payd/internal/stripefake"
)

// TestTwinThenList lists PaymentIntents after Twin: the twin's created
// time must stay an integer (a list that panics on it holds the fake's
// lock for good), and a second list must still answer.
func TestTwinThenList(t *testing.T) {
	f := stripefake.New(t.Cleanup)
	pi := pay(t, f, "att-twin")
	twin, _ := f.Twin(pi.ID)
	for i := range 2 {
		var list stripe.PaymentIntentList
		if st := get(t, f, "/v1/payment_intents?limit=10", &list); st != 200 {
			t.Fatalf("list #%d after Twin = %d, want 200", i+1, st)
		}
		ids := map[string]bool{}
		for _, p := range list.Data {
			ids[p.ID] = true
			if p.Created == 0 {
				t.Errorf("list #%d: %s created = 0, want the fake's clock", i+1, p.ID)
			}
		}
		if !ids[pi.ID] || !ids[twin] {
			t.Fatalf("list #%d = %v, want %s and its twin %s", i+1, ids, pi.ID, twin)
		}
	}
	var got stripe.PaymentIntent
	if st := get(t, f, "/v1/payment_intents/"+twin, &got); st != 200 || got.Amount != pi.Amount {
		t.Fatalf("retrieve twin = %d amount %d, want 200 amount %d", st, got.Amount, pi.Amount)
	}
}

// get is a GET with a client that gives up, so a fake stuck on its lock
// fails the test rather than hanging it.
func get(t *testing.T, f *stripefake.Fake, path string, out any) int {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(f.URL() + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	return resp.StatusCode
}
