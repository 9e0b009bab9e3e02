package stripeprovider_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/provider/stripeprovider"
)

// formRecorder is a Stripe stand-in that keeps each request's form and
// answers a succeeded PaymentIntent (or refund) echoing amount and currency.
type formRecorder struct {
	mu    sync.Mutex
	forms []map[string]string
	cur   string // the last PaymentIntent's, for a refund's answer
}

func (f *formRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	f.mu.Lock()
	m := map[string]string{"path": r.URL.Path}
	for k := range r.PostForm {
		m[k] = r.PostForm.Get(k)
	}
	f.forms = append(f.forms, m)
	if c := r.PostForm.Get("currency"); c != "" {
		f.cur = c
	}
	cur := f.cur
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	obj := "payment_intent"
	if strings.HasSuffix(r.URL.Path, "/refunds") {
		obj = "refund"
	}
	fmt.Fprintf(w, `{"id":"x_1","object":%q,"amount":%s,"currency":%q,"status":"succeeded","created":%d}`,
		obj, r.PostForm.Get("amount"), cur, time.Now().Unix())
}

func (f *formRecorder) sent() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.forms)
}

func (f *formRecorder) last() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.forms[len(f.forms)-1]
}

// TestStripeAmounts checks the integer amount Stripe is sent: Stripe
// writes ISK with two decimals (5 ISK = 500) although ISO 4217 gives it
// none, zero-decimal currencies as they are, and three-decimal currencies
// in thousandths ending in 0. Reading Stripe's answer gives back the same
// amount.
func TestStripeAmounts(t *testing.T) {
	rec := &formRecorder{}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	c, err := stripeprovider.New(stripeprovider.Config{SecretKey: "sk_test_x", APIBase: srv.URL, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ amount, cur, want string }{
		{"5", "ISK", "500"},
		{"1990", "ISK", "199000"},
		{"500", "JPY", "500"},
		{"12.34", "KWD", "12340"},
		{"12.3", "KWD", "12300"},
		{"19.90", "EUR", "1990"},
	} {
		t.Run(tt.cur+" "+tt.amount, func(t *testing.T) {
			amt := decimal.RequireFromString(tt.amount)
			ch, err := c.Charge(context.Background(), domain.ChargeRequest{IdempotencyKey: "att-" + tt.cur, OrderID: "ord",
				Amount: amt, Currency: tt.cur, PaymentMethod: "pm_card_visa"})
			if err != nil {
				t.Fatal(err)
			}
			if got := rec.last()["amount"]; got != tt.want {
				t.Errorf("charge sent amount=%s, want %s", got, tt.want)
			}
			if !ch.Amount.Equal(amt) {
				t.Errorf("charge read back as %s %s, want %s", ch.Amount, ch.Currency, amt)
			}
			r, err := c.Refund(context.Background(), domain.ProviderRefundRequest{IdempotencyKey: "ref-" + tt.cur,
				ChargeID: "pi_1", Amount: amt, Currency: tt.cur})
			if err != nil {
				t.Fatal(err)
			}
			if got := rec.last()["amount"]; got != tt.want {
				t.Errorf("refund sent amount=%s, want %s", got, tt.want)
			}
			if !r.Amount.Equal(amt) {
				t.Errorf("refund read back as %s, want %s", r.Amount, amt)
			}
		})
	}
	// Amounts Stripe cannot charge exactly are refused before anything is sent.
	for _, tt := range []struct{ amount, cur string }{{"5.5", "ISK"}, {"12.345", "KWD"}, {"0.001", "BHD"}, {"1.5", "JPY"}, {"0", "EUR"}} {
		n := rec.sent()
		_, err := c.Charge(context.Background(), domain.ChargeRequest{IdempotencyKey: "bad", OrderID: "ord",
			Amount: decimal.RequireFromString(tt.amount), Currency: tt.cur, PaymentMethod: "pm_card_visa"})
		var re *domain.ProviderRequestError
		if !errors.As(err, &re) || re.Code != "amount_not_chargeable" || errors.Is(err, domain.ErrProviderUnavailable) {
			t.Errorf("charge %s %s: err %v, want a refusal amount_not_chargeable", tt.amount, tt.cur, err)
		}
		var ve *domain.ValidationError
		_, err = c.Refund(context.Background(), domain.ProviderRefundRequest{IdempotencyKey: "bad", ChargeID: "pi_1",
			Amount: decimal.RequireFromString(tt.amount), Currency: tt.cur})
		if !errors.As(err, &ve) || ve.Field != "amount" {
			t.Errorf("refund %s %s: err %v, want a validation error on amount", tt.amount, tt.cur, err)
		}
		if rec.sent() != n {
			t.Errorf("%s %s: a request was sent to Stripe", tt.amount, tt.cur)
		}
	}
}

// An error that carries a PaymentIntent is read as that PaymentIntent's
// state: a 402 whose PaymentIntent is processing (or succeeded, or awaits
// 3-D Secure) is not a refusal that would release the order.
func TestErrorCarryingPaymentIntentIsItsState(t *testing.T) {
	for _, tt := range []struct {
		status string
		want   domain.ChargeStatus
	}{
		{"processing", domain.ChargePending},
		{"succeeded", domain.ChargeSucceeded},
		{"requires_action", domain.ChargePending},
		{"requires_payment_method", domain.ChargeFailed},
	} {
		t.Run(tt.status, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusPaymentRequired)
				fmt.Fprintf(w, `{"error":{"type":"card_error","code":"card_declined","message":"x","payment_intent":`+
					`{"id":"pi_402","object":"payment_intent","amount":1990,"currency":"eur","status":%q,"created":%d}}}`,
					tt.status, time.Now().Unix())
			}))
			t.Cleanup(srv.Close)
			c, err := stripeprovider.New(stripeprovider.Config{SecretKey: "sk_test_x", APIBase: srv.URL, Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ch, err := c.Charge(context.Background(), domain.ChargeRequest{IdempotencyKey: "att", OrderID: "ord",
				Amount: decimal.RequireFromString("19.90"), Currency: "EUR", PaymentMethod: "pm_card_visa"})
			if err != nil || ch.Status != tt.want || ch.ID != "pi_402" {
				t.Fatalf("Charge answered 402 with a %s PaymentIntent = %+v, %v; want %s pi_402", tt.status, ch, err, tt.want)
			}
		})
	}
}

// ListCharges leaves out (and reports) a PaymentIntent in a currency payd
// does not take instead of failing the whole reconciliation run.
func TestListChargesSkipsUnreadableCurrency(t *testing.T) {
	now := time.Now().UTC()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","url":"/v1/payment_intents","has_more":false,"data":[`+
			`{"id":"pi_huf","object":"payment_intent","amount":100000,"currency":"huf","status":"succeeded","created":%[1]d},`+
			`{"id":"pi_eur","object":"payment_intent","amount":1990,"currency":"eur","status":"succeeded","created":%[1]d}]}`, now.Unix())
	}))
	t.Cleanup(srv.Close)
	var skipped []string
	c, err := stripeprovider.New(stripeprovider.Config{SecretKey: "sk_test_x", APIBase: srv.URL, Timeout: 2 * time.Second,
		Skipped: func(id, _ string) { skipped = append(skipped, id) }})
	if err != nil {
		t.Fatal(err)
	}
	got, err := provider.AllCharges(context.Background(), c, now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil || len(got) != 1 || got[0].ID != "pi_eur" {
		t.Fatalf("ListCharges = %+v, %v; want pi_eur only", got, err)
	}
	if len(skipped) != 1 || skipped[0] != "pi_huf" {
		t.Fatalf("skipped = %v, want [pi_huf]", skipped)
	}
}
