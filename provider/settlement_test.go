package provider_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
)

const settlementHead = "charge_id,idempotency_key,order_id,type,status,amount,currency,created_at\n"

// opener opens file at its first byte each time it is called, counting
// the calls in opens.
func opener(file string, opens *int) func() (io.Reader, error) {
	return func() (io.Reader, error) {
		*opens++
		return strings.NewReader(file), nil
	}
}

// parse checks file and returns it with every charge its pages hand out,
// copied out of each page as it comes.
func parse(t *testing.T, file string) (domain.Settlement, []domain.Charge, error) {
	t.Helper()
	var opens int
	s, err := provider.ParseSettlement(opener(file, &opens))
	if err != nil || s.Charges == nil {
		return s, nil, err
	}
	var all []domain.Charge
	err = s.Charges(func(page []domain.Charge) error {
		all = append(all, page...)
		return nil
	})
	return s, all, err
}

func TestParseSettlement(t *testing.T) {
	file := "\ufeff" + settlementHead +
		"ch_1,k1,o1,charge,succeeded,10.00,USD,2026-01-31T12:00:00Z\n" +
		"ch_2,k2,o2,charge,failed,5.00,USD,2026-01-31T12:00:01Z\n" +
		"ch_3,,,charge,succeeded,500,JPY,2026-01-31T12:00:02.123456Z\n" +
		"ch_1,r1,o1,refund,succeeded,2.50,USD,2026-01-31T13:00:00Z\n" +
		"ch_1,r2,o1,refund,failed,7.50,USD,2026-01-31T13:00:01Z\n" +
		"ch_1,r3,o1,refund,succeeded,1.25,USD,2026-01-31T13:00:02Z\n" +
		"ch_old,r4,o9,refund,succeeded,99.00,EUR,2026-01-31T13:00:03Z\n"
	s, got, err := parse(t, file)
	if err != nil {
		t.Fatalf("ParseSettlement = %v, want nil", err)
	}
	if len(s.Refunds) != 0 {
		t.Errorf("refunds of a file without refund ids = %+v, want none listed one by one", s.Refunds)
	}
	if len(got) != 2 || got[0].ID != "ch_1" || got[1].ID != "ch_3" {
		t.Fatalf("ParseSettlement = %+v, want the succeeded charges ch_1 and ch_3", got)
	}
	if r := got[0].RefundedAmount.StringFixed(2); r != "3.75" {
		t.Errorf("ch_1 refunded = %s, want 3.75 (succeeded refunds only)", r)
	}
	if got[1].Currency != "JPY" || got[1].IdempotencyKey != "" || !got[1].RefundedAmount.IsZero() {
		t.Errorf("ch_3 = %+v, want JPY 500, no key, nothing refunded", got[1])
	}
}

// TestParseSettlementRefundIDs: a file with the refund_id column lists
// each succeeded refund under the provider's id, beside the charges, and
// still adds them up on the charges it lists.
func TestParseSettlementRefundIDs(t *testing.T) {
	file := strings.TrimSuffix(settlementHead, "\n") + ",refund_id\n" +
		"ch_1,k1,o1,charge,succeeded,10.00,USD,2026-01-31T12:00:00Z,\n" +
		"ch_1,r1,o1,refund,succeeded,2.50,USD,2026-01-31T13:00:00Z,re_1\n" +
		"ch_1,r2,o1,refund,failed,7.50,USD,2026-01-31T13:00:01Z,re_2\n" +
		"ch_old,,o9,refund,succeeded,99.00,EUR,2026-01-31T13:00:03Z,re_3\n"
	s, charges, err := parse(t, file)
	if err != nil {
		t.Fatalf("ParseSettlement = %v, want nil", err)
	}
	if len(charges) != 1 || charges[0].RefundedAmount.StringFixed(2) != "2.50" {
		t.Fatalf("charges = %+v, want ch_1 with 2.50 refunded", charges)
	}
	want := []domain.ProviderRefund{
		{ID: "re_1", IdempotencyKey: "r1", ChargeID: "ch_1", OrderID: "o1", Currency: "USD", Status: domain.ChargeSucceeded},
		{ID: "re_3", ChargeID: "ch_old", OrderID: "o9", Currency: "EUR", Status: domain.ChargeSucceeded},
	}
	if len(s.Refunds) != len(want) {
		t.Fatalf("refunds = %+v, want re_1 and re_3", s.Refunds)
	}
	for i, w := range want {
		g := s.Refunds[i]
		if g.ID != w.ID || g.IdempotencyKey != w.IdempotencyKey || g.ChargeID != w.ChargeID || g.OrderID != w.OrderID || g.Currency != w.Currency || g.Status != w.Status {
			t.Errorf("refund %d = %+v, want %+v", i, g, w)
		}
	}
	if !s.Refunds[1].Amount.Equal(decimal.RequireFromString("99")) || s.Refunds[0].CreatedAt.IsZero() {
		t.Errorf("refunds = %+v, want 99.00 and a time", s.Refunds)
	}
	none, _, err := parse(t, strings.TrimSuffix(settlementHead, "\n")+",refund_id\n")
	if err != nil || none.Refunds == nil || len(none.Refunds) != 0 || none.Charges != nil {
		t.Errorf("a file with the column and no lines = %+v, %v; want an empty, non-nil list of refunds and no charges", none, err)
	}
}

func TestParseSettlementRefuses(t *testing.T) {
	row := func(fields ...string) string { return strings.Join(fields, ",") + "\n" }
	ok := row("ch_1", "k1", "o1", "charge", "succeeded", "10.00", "USD", "2026-01-31T12:00:00Z")
	withIDs := strings.TrimSuffix(settlementHead, "\n") + ",refund_id\n"
	okID := row("ch_1", "k1", "o1", "charge", "succeeded", "10.00", "USD", "2026-01-31T12:00:00Z", "")
	tests := []struct {
		name, file string
		line       int
		field      string
	}{
		{"empty file", "", 1, ""},
		{"wrong header", "charge,key\n", 1, ""},
		{"renamed column", strings.Replace(settlementHead, "amount", "amt", 1) + ok, 1, ""},
		{"missing field", settlementHead + ok + "ch_2,k2,o2,charge,succeeded,1.00,USD\n", 3, ""},
		{"exponent", settlementHead + ok + row("ch_2", "k", "o", "charge", "succeeded", "1e30", "USD", "2026-01-31T12:00:00Z"), 3, "amount"},
		{"scale", settlementHead + ok + row("ch_2", "k", "o", "charge", "succeeded", "1.5", "JPY", "2026-01-31T12:00:00Z"), 3, "amount"},
		{"sixteen digits", settlementHead + ok + row("ch_2", "k", "o", "charge", "succeeded", "1234567890123456", "USD", "2026-01-31T12:00:00Z"), 3, "amount"},
		{"sign", settlementHead + ok + row("ch_2", "k", "o", "charge", "succeeded", "+1.00", "USD", "2026-01-31T12:00:00Z"), 3, "amount"},
		{"space", settlementHead + ok + row("ch_2", "k", "o", "charge", "succeeded", " 1.00", "USD", "2026-01-31T12:00:00Z"), 3, "amount"},
		{"lower-case currency", settlementHead + ok + row("ch_2", "k", "o", "charge", "succeeded", "1.00", "usd", "2026-01-31T12:00:00Z"), 3, "currency"},
		{"65-character charge id", settlementHead + ok + row(strings.Repeat("c", 65), "k", "o", "charge", "succeeded", "1.00", "USD", "2026-01-31T12:00:00Z"), 3, "charge_id"},
		{"comma-free junk in charge id", settlementHead + ok + row("ch 2", "k", "o", "charge", "succeeded", "1.00", "USD", "2026-01-31T12:00:00Z"), 3, "charge_id"},
		{"256-character key", settlementHead + ok + row("ch_2", strings.Repeat("k", 256), "o", "charge", "succeeded", "1.00", "USD", "2026-01-31T12:00:00Z"), 3, "idempotency_key"},
		{"invalid UTF-8", settlementHead + ok + row("ch_2", "k", "o\xff", "charge", "succeeded", "1.00", "USD", "2026-01-31T12:00:00Z"), 3, "order_id"},
		{"status", settlementHead + ok + row("ch_2", "k", "o", "charge", "SUCCEEDED", "1.00", "USD", "2026-01-31T12:00:00Z"), 3, "status"},
		{"time", settlementHead + ok + row("ch_2", "k", "o", "charge", "succeeded", "1.00", "USD", "31/01/2026"), 3, "created_at"},
		{"charge twice", settlementHead + ok + ok, 3, "charge_id"},
		{"refund over the charge", settlementHead + ok + row("ch_1", "r", "o1", "refund", "succeeded", "6.00", "USD", "2026-01-31T13:00:00Z") +
			row("ch_1", "r2", "o1", "refund", "succeeded", "4.01", "USD", "2026-01-31T13:00:01Z"), 4, "amount"},
		{"refund in another currency", settlementHead + ok + row("ch_1", "r", "o1", "refund", "succeeded", "1.00", "EUR", "2026-01-31T13:00:00Z"), 3, "currency"},
		{"ninth column not refund_id", strings.TrimSuffix(settlementHead, "\n") + ",note\n", 1, ""},
		{"refund line without its id", withIDs + okID + row("ch_1", "r", "o1", "refund", "succeeded", "1.00", "USD", "2026-01-31T13:00:00Z", ""), 3, "refund_id"},
		{"refund id with junk", withIDs + okID + row("ch_1", "r", "o1", "refund", "succeeded", "1.00", "USD", "2026-01-31T13:00:00Z", "re 1"), 3, "refund_id"},
		{"charge line with a refund id", withIDs + okID + row("ch_2", "k", "o", "charge", "succeeded", "1.00", "USD", "2026-01-31T13:00:00Z", "re_1"), 3, "refund_id"},
		{"refund twice", withIDs + okID + row("ch_1", "r", "o1", "refund", "succeeded", "1.00", "USD", "2026-01-31T13:00:00Z", "re_1") +
			row("ch_1", "r2", "o1", "refund", "succeeded", "1.00", "USD", "2026-01-31T13:00:01Z", "re_1"), 4, "refund_id"},
		{"eight fields under nine columns", withIDs + ok, 2, ""},
		{"bare quote", settlementHead + ok + "ch_\"2,k,o,charge,succeeded,1.00,USD,2026-01-31T12:00:00Z\n", 3, ""},
	}
	for _, tt := range tests {
		_, _, err := parse(t, tt.file)
		var se *domain.SettlementError
		if !errors.As(err, &se) {
			t.Errorf("%s: ParseSettlement = %v, want a *SettlementError", tt.name, err)
			continue
		}
		if se.Line != tt.line || se.Field != tt.field {
			t.Errorf("%s: ParseSettlement = %q (line %d, field %q), want line %d, field %q", tt.name, se, se.Line, se.Field, tt.line, tt.field)
		}
	}
}

func TestParseSettlementRowLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString(settlementHead)
	for i := range provider.MaxSettlementRows + 1 {
		fmt.Fprintf(&b, "c%d,,,charge,failed,1,JPY,2026-01-31T12:00:00Z\n", i)
	}
	_, _, err := parse(t, b.String())
	var se *domain.SettlementError
	if !errors.As(err, &se) || se.Line != provider.MaxSettlementRows+2 {
		t.Errorf("ParseSettlement(%d rows) = %v, want a *SettlementError on line %d", provider.MaxSettlementRows+1, err, provider.MaxSettlementRows+2)
	}
}
