package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/nemesis"
	"github.com/payd/payd/notify"
)

// The nemesis's merchant: the shop payd tells of order events (ADR 0053),
// with its own link from each replica ("merchant-i"). payd's one endpoint
// comes from PAYD_NOTIFY_URL, a name that resolves nowhere; each replica
// connects, whatever the URL, to its own link (PAYD_TEST_NOTIFY_VIA, test
// builds only), which leads to a listener of its own here, so an arrival
// says which replica sent it. payd runs in development mode (PAYD_ENV
// unset), where loopback is not refused; PAYD_NOTIFY_ALLOW_PRIVATE is not
// needed.
//
// The receiver does what examples/receiver does with a request (verifies
// the Standard Webhooks signature with the endpoint's secret, answers 2xx
// once the event is recorded), in the test process so that it outlives
// every payd the schedule kills, and records every request it read in
// full: its webhook-id, the event its body names, a hash of the body,
// whether it verified, when, and through which replica's link. A request
// cut short (limit_data, reset_peer) is no arrival: the receiver never
// had the event, and payd, without its 2xx, sends it again.

// nemMerchantURL is the endpoint's URL: never dialled (see above).
const nemMerchantURL = "http://shop.nemesis.test/hooks"

// nemNotifyTimeout is payd's deadline for one delivery: short, so that a
// delivery held by a black-holed link, or leased by a killed replica
// (notify.LeaseFor: twice it and 5 s), is tried again soon.
const nemNotifyTimeout = 2 * time.Second

// nemMerchant is the shop's receiver.
type nemMerchant struct {
	hook *standardwebhooks.Webhook

	mu       sync.Mutex
	arrivals []nemesis.Arrival
}

// startNemMerchant starts one listener per replica name and returns the
// receiver and each listener's address, in the order of names.
func startNemMerchant(t *testing.T, names []string) (*nemMerchant, []string) {
	t.Helper()
	hook, err := standardwebhooks.NewWebhook(notifySecret)
	if err != nil {
		t.Fatal(err)
	}
	m := &nemMerchant{hook: hook}
	addrs := make([]string, len(names))
	for i, name := range names {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = ln.Addr().String()
		hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, name) }),
			ReadHeaderTimeout: 10 * time.Second}
		served := make(chan struct{})
		go func() { defer close(served); _ = hs.Serve(ln) }()
		t.Cleanup(func() { _ = hs.Close(); <-served })
	}
	return m, addrs
}

func (m *nemMerchant) serve(w http.ResponseWriter, r *http.Request, via string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil || r.Method != http.MethodPost {
		w.WriteHeader(http.StatusBadRequest) // cut short: no event arrived
		return
	}
	var ev struct {
		ID    string `json:"id"`
		Order struct {
			ID string `json:"id"`
		} `json:"order"`
	}
	_ = json.Unmarshal(body, &ev)
	sum := sha256.Sum256(body)
	a := nemesis.Arrival{WebhookID: r.Header.Get("webhook-id"), EventID: ev.ID, OrderID: ev.Order.ID,
		BodyHash: hex.EncodeToString(sum[:]), Verified: m.hook.Verify(body, r.Header) == nil, At: time.Now(), Via: via,
		Amounts: toldAmounts(body)}
	m.mu.Lock()
	m.arrivals = append(m.arrivals, a)
	m.mu.Unlock()
	if !a.Verified {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// toldAmounts is the money an event's body tells (its order's
// refunded_amount and money), nil when the body holds no amounts that read
// as decimals.
func toldAmounts(body []byte) *nemesis.Amounts {
	var ev struct {
		Order struct {
			RefundedAmount *decimal.Decimal `json:"refunded_amount"`
			Money          struct {
				Charged  *decimal.Decimal `json:"charged"`
				Refunded *decimal.Decimal `json:"refunded"`
			} `json:"money"`
		} `json:"order"`
	}
	if json.Unmarshal(body, &ev) != nil {
		return nil
	}
	o := ev.Order
	if o.RefundedAmount == nil || o.Money.Charged == nil || o.Money.Refunded == nil {
		return nil
	}
	return &nemesis.Amounts{Refunded: *o.RefundedAmount, Books: nemesis.Money{Charged: *o.Money.Charged, Refunded: *o.Money.Refunded}}
}

// heard is every arrival so far, in arrival order.
func (m *nemMerchant) heard() []nemesis.Arrival {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.arrivals)
}

// nemNotifyEnv is a replica's settings for telling the merchant through
// the link at via.
func nemNotifyEnv(via string) env {
	return env{"PAYD_NOTIFY_URL": nemMerchantURL, "PAYD_NOTIFY_SECRET": notifySecret,
		"PAYD_NOTIFY_TIMEOUT": nemNotifyTimeout.String(), "PAYD_TEST_NOTIFY_VIA": via}
}

// merchant is what the checker is given of the shop: every arrival, and
// the deliveries payd's admin list shows pending or failed (read before
// the arrivals, so that an event delivered meanwhile is among them).
func (w *nemWorkload) merchant() *nemesis.Merchant {
	m := &nemesis.Merchant{Subscribed: domain.NotifyTypes, Shown: map[string]domain.DeliveryStatus{}}
	for _, st := range []domain.DeliveryStatus{domain.DeliveryPending, domain.DeliveryFailed} {
		path := fmt.Sprintf("/v1/admin/endpoints/%s/deliveries?status=%s&limit=%d", notify.EnvEndpointID, st, domain.MaxPageSize)
		rep, err := w.roundTrip(w.s.reps[0].base, http.MethodGet, path, testAdminToken, "", nil)
		if err != nil || rep.Status != http.StatusOK {
			w.t.Fatalf("GET %s: %v %d %s", path, err, rep.Status, truncate(rep.Body))
		}
		var list struct {
			Data []struct {
				EventID string                `json:"event_id"`
				Status  domain.DeliveryStatus `json:"status"`
			} `json:"data"`
		}
		if err := json.Unmarshal(rep.Body, &list); err != nil {
			w.t.Fatalf("GET %s: %v", path, err)
		}
		if len(list.Data) == domain.MaxPageSize {
			w.t.Logf("payd lists %d %s deliveries, a full page: more are not visible", len(list.Data), st)
		}
		for _, d := range list.Data {
			m.Shown[d.EventID] = d.Status
		}
	}
	m.Arrivals = w.s.merchant.heard()
	return m
}

// TestNemMerchantReadsToldAmounts: the receiver reads the money of a body
// as payd renders it, and reads none from a body without it.
func TestNemMerchantReadsToldAmounts(t *testing.T) {
	d := decimal.RequireFromString
	body, err := notify.Render(domain.NotifyEvent{ID: "e1", OrderID: "o1", Seq: 5, Type: domain.NotifyOrderRefunded,
		Order: domain.Order{ID: "o1", Currency: "USD", Amount: d("12.30"), RefundedAmount: d("5.00"), RefundPending: d("4.00")},
		Money: domain.Books{Charged: d("12.30"), Refunded: d("5.00"), Net: d("7.30")}})
	if err != nil {
		t.Fatal(err)
	}
	a := toldAmounts(body)
	if a == nil || !a.Refunded.Equal(d("5")) || !a.Books.Charged.Equal(d("12.3")) || !a.Books.Refunded.Equal(d("5")) {
		t.Fatalf("toldAmounts(%s) = %+v, want refunded 5.00, charged 12.30, ledger refunded 5.00", body, a)
	}
	for _, bad := range []string{`{"id":"e1","order":{"id":"o1"}}`, `{"order":{"refunded_amount":"x","money":{"charged":"1","refunded":"0"}}}`, `cut`} {
		if a := toldAmounts([]byte(bad)); a != nil {
			t.Errorf("toldAmounts(%s) = %+v, want nil", bad, a)
		}
	}
}
