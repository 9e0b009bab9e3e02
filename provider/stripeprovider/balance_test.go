package stripeprovider_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider/stripeprovider"
)

func TestParseBalanceCSV(t *testing.T) {
	file := "\ufeffbalance_transaction_id,created_utc,currency,gross,fee,net,reporting_category,payment_intent_id,charge_id,payment_metadata[payd_order],payment_metadata[payd_attempt]\n" +
		"txn_1,2026-11-30 12:00:00,usd,19.90,0.88,19.02,charge,pi_1,ch_1,ord-1,att-1\n" +
		"txn_2,2026-11-30 12:05:00,usd,-5.00,0.00,-5.00,refund,pi_1,ch_1,ord-1,att-1\n" +
		"txn_3,2026-11-30 12:06:00,usd,-2.00,0.00,-2.00,refund,pi_1,ch_1,ord-1,att-1\n" +
		"txn_4,2026-11-30 13:00:00,eur,7.00,0.30,6.70,charge,pi_2,ch_2,ord-2,att-2\n" +
		"txn_5,2026-11-30 14:00:00,usd,-100.00,0.00,-100.00,payout,,,,\n"
	got, err := stripeprovider.ParseBalanceCSV(strings.NewReader(file))
	if err != nil {
		t.Fatalf("ParseBalanceCSV = %v", err)
	}
	if len(got) != 2 || got[0].ID != "pi_1" || got[0].IdempotencyKey != "att-1" || got[0].OrderID != "ord-1" ||
		got[0].Amount.String() != "19.9" || got[0].RefundedAmount.String() != "7" || got[0].Currency != "USD" ||
		got[1].ID != "pi_2" || got[1].Currency != "EUR" || got[0].Status != domain.ChargeSucceeded {
		t.Fatalf("ParseBalanceCSV = %+v, want pi_1 19.90 USD refunded 7.00 and pi_2 7.00 EUR", got)
	}

	bad := []struct{ name, file, field string }{
		{"no attempt column", "reporting_category,gross,currency,created_utc,payment_intent_id\n", ""},
		{"bad amount", "reporting_category,gross,currency,created_utc,payment_intent_id,payment_metadata[payd_attempt]\ncharge,1.234,usd,2026-11-30 12:00:00,pi_1,a\n", "gross"},
		{"bad currency", "reporting_category,gross,currency,created_utc,payment_intent_id,payment_metadata[payd_attempt]\ncharge,1.00,xxx,2026-11-30 12:00:00,pi_1,a\n", "currency"},
		{"twice", "reporting_category,gross,currency,created_utc,payment_intent_id,payment_metadata[payd_attempt]\ncharge,1.00,usd,2026-11-30 12:00:00,pi_1,a\ncharge,1.00,usd,2026-11-30 12:00:00,pi_1,a\n", "payment_intent_id"},
		{"empty", "", ""},
	}
	for _, b := range bad {
		_, err := stripeprovider.ParseBalanceCSV(strings.NewReader(b.file))
		var se *domain.SettlementError
		if !errors.As(err, &se) || se.Field != b.field {
			t.Errorf("%s: ParseBalanceCSV = %v, want a SettlementError on field %q", b.name, err, b.field)
		}
	}
}
