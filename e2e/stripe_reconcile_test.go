package e2e

import (
	"context"
	"fmt"
	"github.com/payd/payd/client"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/stripefake"
	"github.com/payd/payd/provider/stripeprovider"
)

// TestStripeReconciliation: in Stripe mode a run compares payd's books
// with Stripe's PaymentIntents of the window (paginated), or with an
// uploaded balance-transactions export; both find the payment made on the
// account outside payd, and agree on the one payd made.
func TestStripeReconciliation(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), stripeMode()).stripe()
		st := &stack{inproc: s.inproc, db: s.db, dialect: s.dialect, dbURL: s.dbURL}
		from := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
		_, tok := s.register(newEmail())
		paid := s.order(tok, "19.90")
		if r := s.pay(tok, paid, uuid.NewString(), stripefake.PMVisa); r.Status != http.StatusOK {
			t.Fatalf("pay = %d %s", r.Status, r.Body)
		}
		// A payment on the same account under a key payd never made.
		direct, err := stripeprovider.New(stripeprovider.Config{SecretKey: "sk_test_x", APIBase: s.fake.URL()})
		if err != nil {
			t.Fatal(err)
		}
		stray, err := direct.Charge(context.Background(), domain.ChargeRequest{IdempotencyKey: "att-stray", OrderID: "ord-stray",
			Amount: decimal.RequireFromString("5.00"), Currency: "USD", PaymentMethod: stripefake.PMVisa})
		if err != nil {
			t.Fatal(err)
		}
		to := time.Now().UTC().Add(time.Minute).Truncate(time.Second)
		want := map[string]string{"missing_local_payment " + stray.ID: ""}

		r := s.admin("POST", "/v1/admin/reconciliations", uuid.NewString(), map[string]any{"from": from.Format(time.RFC3339), "to": to.Format(time.RFC3339)})
		run := decode[client.Run](t, r)
		if r.Status != http.StatusCreated || run.Source != "provider" || run.Matched != 1 || run.New != 1 {
			t.Fatalf("reconcile from Stripe = %d %s, want 201, 1 matched, 1 new", r.Status, r.Body)
		}
		st.checkFound(run.Discrepancies, want)

		csv := "balance_transaction_id,created_utc,currency,gross,fee,net,reporting_category,payment_intent_id,payment_metadata[payd_order],payment_metadata[payd_attempt]\n"
		for _, c := range []domain.Charge{{ID: s.fake.PaymentIntentOf(paid), OrderID: paid, IdempotencyKey: st.onlyAttempt(paid).ID, Amount: decimal.RequireFromString("19.90")}, stray} {
			csv += fmt.Sprintf("txn_%s,%s,usd,%s,0.30,0,charge,%s,%s,%s\n", c.ID, time.Now().UTC().Format("2006-01-02 15:04:05"),
				c.Amount.StringFixed(2), c.ID, c.OrderID, c.IdempotencyKey)
		}
		r = st.uploadSettlement(uuid.NewString(), from, to, false, csv)
		run = decode[client.Run](t, r)
		if r.Status != http.StatusCreated || run.Source != "csv" || run.Matched != 1 || run.Found != 1 || run.New != 0 {
			t.Fatalf("reconcile from a balance export = %d %s, want 201, 1 matched, 1 found again, 0 new", r.Status, r.Body)
		}
		st.checkFound(run.Discrepancies, want)
		bad := st.uploadSettlement(uuid.NewString(), from, to, false, "reporting_category,gross\ncharge,1.00\n")
		if bad.Status != http.StatusBadRequest {
			t.Fatalf("reconcile from a file without the needed columns = %d %s, want 400", bad.Status, bad.Body)
		}
	})
}
