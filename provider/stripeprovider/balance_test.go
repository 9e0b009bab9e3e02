package stripeprovider_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/provider/stripeprovider"
)

func TestParseBalanceCSV(t *testing.T) {
	file := "\ufeffbalance_transaction_id,created_utc,currency,gross,fee,net,reporting_category,payment_intent_id,charge_id,payment_metadata[payd_order],payment_metadata[payd_attempt]\n" +
		"txn_1,2026-11-30 12:00:00,usd,19.90,0.88,19.02,charge,pi_1,ch_1,ord-1,att-1\n" +
		"txn_2,2026-11-30 12:05:00,usd,-5.00,0.00,-5.00,refund,pi_1,ch_1,ord-1,att-1\n" +
		"txn_3,2026-11-30 12:06:00,usd,-2.00,0.00,-2.00,refund,pi_1,ch_1,ord-1,att-1\n" +
		"txn_4,2026-11-30 13:00:00,eur,7.00,0.30,6.70,charge,pi_2,ch_2,ord-2,att-2\n" +
		"txn_5,2026-11-30 14:00:00,usd,-100.00,0.00,-100.00,payout,,,,\n"
	got, err := balanceCharges(file)
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
		_, err := balanceCharges(b.file)
		var se *domain.SettlementError
		if !errors.As(err, &se) || se.Field != b.field {
			t.Errorf("%s: ParseBalanceCSV = %v, want a SettlementError on field %q", b.name, err, b.field)
		}
	}
}

// balanceCharges checks a balance export and returns every charge its
// pages hand out.
func balanceCharges(file string) ([]domain.Charge, error) {
	s, err := stripeprovider.ParseBalanceCSV(func() (io.Reader, error) { return strings.NewReader(file), nil })
	if err != nil || s.Charges == nil {
		return nil, err
	}
	if s.Refunds != nil {
		return nil, fmt.Errorf("refunds = %+v, want none: a run takes them from Stripe's list", s.Refunds)
	}
	var all []domain.Charge
	err = s.Charges(func(page []domain.Charge) error {
		all = append(all, page...)
		return nil
	})
	return all, err
}

// TestParseBalanceCSVPages: an export is checked whole before a charge is
// handed out — a payment listed again on the last line is refused with
// the file opened once — and a good one hands out its charges in the
// file's order, each with its refunds whether they come before it or
// after, in full pages but the last.
func TestParseBalanceCSVPages(t *testing.T) {
	const head = "reporting_category,gross,currency,created_utc,payment_intent_id,payment_metadata[payd_attempt]\n"
	var b strings.Builder
	b.WriteString(head)
	b.WriteString("refund,-1.50,usd,2026-11-30 12:00:00,pi_1,a1\n") // before its charge
	n := 2*provider.SettlementPage + 3
	for i := range n {
		fmt.Fprintf(&b, "charge,2.00,usd,2026-11-30 12:00:00,pi_%d,a%d\n", i, i)
	}
	b.WriteString("refund,-0.25,usd,2026-11-30 13:00:00,pi_1,a1\nrefund,-9.00,usd,2026-11-30 13:00:00,pi_earlier,a\n")
	good := b.String()

	opens := 0
	open := func(file string) func() (io.Reader, error) {
		return func() (io.Reader, error) { opens++; return strings.NewReader(file), nil }
	}
	s, err := stripeprovider.ParseBalanceCSV(open(good + "charge,2.00,usd,2026-11-30 12:00:00,pi_0,a0\n"))
	var se *domain.SettlementError
	if !errors.As(err, &se) || se.Line != n+5 || se.Field != "payment_intent_id" || opens != 1 || s.Charges != nil {
		t.Errorf("ParseBalanceCSV(the first payment again, last) = %v, opened %d times; want a SettlementError on line %d, read once", err, opens, n+5)
	}

	opens = 0
	s, err = stripeprovider.ParseBalanceCSV(open(good))
	if err != nil || s.Charges == nil {
		t.Fatalf("ParseBalanceCSV = %+v, %v; want charges", s, err)
	}
	var sizes []int
	var got []domain.Charge
	if err := s.Charges(func(page []domain.Charge) error {
		sizes = append(sizes, len(page))
		got = append(got, page...)
		return nil
	}); err != nil {
		t.Fatalf("walk = %v", err)
	}
	if want := []int{provider.SettlementPage, provider.SettlementPage, 3}; fmt.Sprint(sizes) != fmt.Sprint(want) || opens != 2 {
		t.Errorf("pages of %v after %d opens, want %v after 2", sizes, opens, want)
	}
	for i, ch := range got {
		refunded := "0"
		if i == 1 {
			refunded = "1.75"
		}
		if ch.ID != fmt.Sprintf("pi_%d", i) || ch.RefundedAmount.String() != refunded {
			t.Fatalf("charge %d = %s refunded %s, want pi_%d refunded %s", i, ch.ID, ch.RefundedAmount, i, refunded)
		}
	}
}
