package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/client"
	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/internal/nemesis"
)

// The final reads the checker judges: the provider's books, payd's view
// of every order, and the merchant's (nemesis_merchant_test.go).

// world is what the checker is given: the history, the provider's books
// (the sandbox's charges and their refunds) and payd's final view of each
// order with its money (GET /v1/admin/orders/{id}).
func (w *nemWorkload) world(setup string, seed int64) nemesis.World {
	t := w.t
	wd := nemesis.World{Setup: setup, Seed: seed, Ops: w.hist.Ops(), Orders: map[string]nemesis.OrderState{}}
	if setup == "mysql" {
		wd.MySQLDSN = os.Getenv(dbtest.EnvMySQL) // the replay command names it
	}
	if w.s.stripe != nil {
		wd.Charges = w.s.stripe.books(t)
	} else {
		charges, err := w.s.prov.sb.Charges(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range charges {
			wd.Charges = append(wd.Charges, nemesis.Charge{ID: c.ID, OrderID: c.OrderID, Key: c.IdempotencyKey, Amount: c.Amount,
				Succeeded: c.Status == domain.ChargeSucceeded, Refunded: c.RefundedAmount, Created: c.CreatedAt})
		}
	}
	for _, ch := range wd.Charges {
		if ch.Succeeded {
			wd.Provider.Charged = wd.Provider.Charged.Add(ch.Amount)
			wd.Provider.Refunded = wd.Provider.Refunded.Add(ch.Refunded)
		}
	}
	ids := w.orderIDs()
	tls, readAt := make([]client.Timeline, len(ids)), make([]time.Time, len(ids))
	forEach(nemClients, len(ids), func(i int) {
		readAt[i] = time.Now() // payd goes on working meanwhile: what reached the shop after this may be newer than the read
		tls[i] = w.s.reps[i%len(w.s.reps)].current().timeline(ids[i])
	})
	for i, id := range ids {
		tl := tls[i]
		st := nemesis.OrderState{ID: id, Status: domain.OrderStatus(tl.Order.Status), ReadAt: readAt[i],
			Amount: nemDecimal(t, string(tl.Order.Amount)), Refunded: nemDecimal(t, string(tl.Order.RefundedAmount))}
		if tl.Order.PayRequestId != nil {
			for _, a := range tl.Attempts {
				if a.RequestId == *tl.Order.PayRequestId && a.Status == "succeeded" && a.ProviderChargeId != nil {
					st.ChargeID = *a.ProviderChargeId
				}
			}
		}
		// The order's outbox events, and what they must tell
		// (nemesis.InvOneEvent), the merchant must have heard
		// (nemesis.InvDelivered) and the provider must have confirmed
		// (nemesis.InvConfirmedMoney).
		for _, e := range tl.Events {
			st.Told = append(st.Told, nemesis.Told{ID: e.Id, Type: domain.NotifyType(e.Type), Seq: e.Seq, Status: domain.OrderStatus(e.OrderStatus),
				Amounts: nemesis.Amounts{Refunded: nemDecimal(t, e.RefundedAmount),
					Books: nemesis.Money{Charged: nemDecimal(t, e.Money.Charged), Refunded: nemDecimal(t, e.Money.Refunded)}}})
		}
		for _, e := range tl.Ledger {
			if e.Kind == client.LedgerEntryKindRefund || e.Kind == client.LedgerEntryKindOutsideRefund {
				st.RefundsBooked++
			}
		}
		st.Attempts = len(tl.Attempts)
		wd.Orders[id] = st
		wd.Payd.Charged = wd.Payd.Charged.Add(nemDecimal(t, tl.Order.Money.Charged))
		wd.Payd.Refunded = wd.Payd.Refunded.Add(nemDecimal(t, tl.Order.Money.Refunded))
	}
	wd.Merchant = w.merchant() // after the timelines: every event it heard of is one they hold
	return wd
}

func nemDecimal(t *testing.T, s string) decimal.Decimal {
	t.Helper()
	d, err := decimal.NewFromString(s)
	if err != nil {
		t.Fatalf("%q is not an amount: %v", s, err)
	}
	return d
}
