package provider_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
)

// TestParseSettlementChecksBeforePaging: a file refused for what only the
// whole file shows — a charge listed again on its last line, refunds over
// their charge or in another currency than it, listed before the charge —
// is refused by the first reading: the file is opened once, and no charge
// is ever handed out, although more than a page of good charges comes
// first.
func TestParseSettlementChecksBeforePaging(t *testing.T) {
	row := func(fields ...string) string { return strings.Join(fields, ",") + "\n" }
	var good strings.Builder // lines 2 to 1201
	for i := range 1200 {
		good.WriteString(row(fmt.Sprintf("ch_%d", i), "", "", "charge", "succeeded", "1.00", "USD", "2026-01-31T12:00:00Z"))
	}
	body := settlementHead + good.String()
	tests := []struct {
		name, file string
		line       int
		field      string
	}{
		{"charge twice, on the last line", body + row("ch_0", "", "", "charge", "failed", "1.00", "USD", "2026-01-31T12:00:00Z"), 1202, "charge_id"},
		{"refunds over the charge, before it", body +
			row("ch_big", "r1", "", "refund", "succeeded", "6.00", "USD", "2026-01-31T13:00:00Z") +
			row("ch_big", "r2", "", "refund", "succeeded", "4.01", "USD", "2026-01-31T13:00:01Z") +
			row("ch_big", "", "", "charge", "succeeded", "10.00", "USD", "2026-01-31T12:00:00Z"), 1203, "amount"},
		{"refund in another currency than the charge, before it", body +
			row("ch_eur", "r1", "", "refund", "succeeded", "1.00", "USD", "2026-01-31T13:00:00Z") +
			row("ch_eur", "", "", "charge", "succeeded", "10.00", "EUR", "2026-01-31T12:00:00Z"), 1202, "currency"},
		{"refunds in two currencies", body +
			row("ch_1", "r1", "", "refund", "succeeded", "0.10", "USD", "2026-01-31T13:00:00Z") +
			row("ch_1", "r2", "", "refund", "succeeded", "0.10", "EUR", "2026-01-31T13:00:01Z"), 1203, "currency"},
		{"the first of two bad sums", body +
			row("ch_7", "r1", "", "refund", "succeeded", "5.00", "USD", "2026-01-31T13:00:00Z") +
			row("ch_3", "r2", "", "refund", "succeeded", "5.00", "USD", "2026-01-31T13:00:01Z"), 1202, "amount"},
	}
	for _, tt := range tests {
		var opens int
		s, err := provider.ParseSettlement(opener(tt.file, &opens))
		var se *domain.SettlementError
		if !errors.As(err, &se) || se.Line != tt.line || se.Field != tt.field {
			t.Errorf("%s: ParseSettlement = %v, want a *SettlementError on line %d, field %q", tt.name, err, tt.line, tt.field)
		}
		if opens != 1 || s.Charges != nil || s.Refunds != nil {
			t.Errorf("%s: ParseSettlement opened the file %d times and returned %+v, want it read once and nothing to hand out", tt.name, opens, s)
		}
	}
}

// TestSettlementPages: the second reading hands out exactly what the file
// lists, as an independent reading of it expects (model): its succeeded
// charges in the file's order, each with its succeeded refunds added up
// whether they come before it or after, in full pages of SettlementPage
// but the last; the refunds listed by id beside them. A walk can be
// repeated, and an error of its caller's stops it and comes back as is.
func TestSettlementPages(t *testing.T) {
	for _, n := range []int{0, 1, 7, provider.SettlementPage - 1, provider.SettlementPage, provider.SettlementPage + 1, 2 * provider.SettlementPage, 1337} {
		for _, withIDs := range []bool{false, true} {
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			file, want, wantRefunds := randomSettlement(rng, n, withIDs)
			name := fmt.Sprintf("%d charges, refund ids %v", n, withIDs)
			var opens int
			s, err := provider.ParseSettlement(opener(file, &opens))
			if err != nil {
				t.Fatalf("%s: ParseSettlement = %v, want nil", name, err)
			}
			if (s.Charges == nil) != (len(want) == 0) {
				t.Fatalf("%s: Charges nil = %v, want %v", name, s.Charges == nil, len(want) == 0)
			}
			for walk := range 2 {
				var got []domain.Charge
				var sizes []int
				if s.Charges != nil {
					if err := s.Charges(func(page []domain.Charge) error {
						sizes = append(sizes, len(page))
						got = append(got, page...)
						return nil
					}); err != nil {
						t.Fatalf("%s: walk %d = %v, want nil", name, walk, err)
					}
				}
				for i, size := range sizes {
					if size == 0 || size > provider.SettlementPage || i < len(sizes)-1 && size != provider.SettlementPage {
						t.Errorf("%s: walk %d: pages of %v, want full pages of %d but the last", name, walk, sizes, provider.SettlementPage)
						break
					}
				}
				sameCharges(t, name, got, want)
			}
			if opens != 1+min(1, len(want))*2 {
				t.Errorf("%s: the file was opened %d times, want once for the check and once a walk", name, opens)
			}
			sameRefunds(t, name, s.Refunds, wantRefunds, withIDs)
		}
	}

	rng := rand.New(rand.NewPCG(7, 7))
	file, want, _ := randomSettlement(rng, 3*provider.SettlementPage, false)
	var opens int
	s, err := provider.ParseSettlement(opener(file, &opens))
	if err != nil || len(want) <= provider.SettlementPage {
		t.Fatalf("ParseSettlement = %v with %d succeeded charges, want more than a page", err, len(want))
	}
	stop, pages := errors.New("the run failed"), 0
	if err := s.Charges(func([]domain.Charge) error { pages++; return stop }); err != stop || pages != 1 {
		t.Errorf("a walk whose caller fails = %v after %d pages, want that very error after 1", err, pages)
	}
}

// sameCharges compares the charges a walk handed out with the model's.
func sameCharges(t *testing.T, name string, got, want []domain.Charge) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d charges, want %d", name, len(got), len(want))
		return
	}
	for i, w := range want {
		g := got[i]
		if g.ID != w.ID || g.IdempotencyKey != w.IdempotencyKey || g.OrderID != w.OrderID || !g.Amount.Equal(w.Amount) || g.Currency != w.Currency ||
			g.Status != w.Status || !g.RefundedAmount.Equal(w.RefundedAmount) || !g.CreatedAt.Equal(w.CreatedAt) {
			t.Errorf("%s: charge %d = %+v, want %+v", name, i, g, w)
			return
		}
	}
}

// sameRefunds compares the refunds listed by id with the model's.
func sameRefunds(t *testing.T, name string, got, want []domain.ProviderRefund, withIDs bool) {
	t.Helper()
	if (got != nil) != withIDs || len(got) != len(want) {
		t.Errorf("%s: %d refunds listed (nil %v), want %d (nil %v)", name, len(got), got == nil, len(want), !withIDs)
		return
	}
	for i, w := range want {
		g := got[i]
		if g.ID != w.ID || g.ChargeID != w.ChargeID || g.IdempotencyKey != w.IdempotencyKey || !g.Amount.Equal(w.Amount) || g.Currency != w.Currency || g.Status != w.Status {
			t.Errorf("%s: refund %d = %+v, want %+v", name, i, g, w)
			return
		}
	}
}

// settlementRow is one line of a generated file, with what a reading of it
// must make of it.
type settlementRow struct {
	charge *domain.Charge         // a charge line
	refund *domain.ProviderRefund // a refund line
}

// randomSettlement writes a good settlement file of n charge lines, in
// three currencies and every status, with refunds of some — succeeded or
// not, before their charge or after it, adding up to at most its amount —
// and of charges of earlier days, in random order. It returns the file and
// what a reading of it must hand out: the succeeded charges in the file's
// order with their succeeded refunds added up, and the succeeded refunds
// in the file's order when it has the refund_id column (withIDs).
func randomSettlement(rng *rand.Rand, n int, withIDs bool) (string, []domain.Charge, []domain.ProviderRefund) {
	currencies := []domain.Currency{"USD", "JPY", "KWD"}
	statuses := []domain.ChargeStatus{domain.ChargeSucceeded, domain.ChargeSucceeded, domain.ChargeSucceeded, domain.ChargeFailed, domain.ChargePending}
	at := time.Date(2026, 1, 31, 12, 0, 0, 0, time.UTC)
	var rows []settlementRow
	refundRow := func(chargeID string, cur domain.Currency, amount decimal.Decimal) {
		r := domain.ProviderRefund{ID: fmt.Sprintf("re_%d", len(rows)), IdempotencyKey: fmt.Sprintf("rk-%d", len(rows)), ChargeID: chargeID,
			Amount: amount, Currency: string(cur), Status: statuses[rng.IntN(len(statuses))], CreatedAt: at.Add(time.Hour)}
		rows = append(rows, settlementRow{refund: &r})
	}
	for i := range n {
		cur := currencies[rng.IntN(len(currencies))]
		minor := 1 + rng.Int64N(1_000_000)
		ch := domain.Charge{ID: fmt.Sprintf("ch_%d_%d", i, rng.IntN(1000)), IdempotencyKey: fmt.Sprintf("key-%d", i), OrderID: fmt.Sprintf("ord-%d", i),
			Amount: domain.FromMinorUnits(minor, cur), Currency: string(cur), Status: statuses[rng.IntN(len(statuses))], CreatedAt: at.Add(time.Duration(i) * time.Millisecond)}
		rows = append(rows, settlementRow{charge: &ch})
		for left := minor; rng.IntN(3) == 0 && left > 0; { // refunds of it, never more than it
			part := 1 + rng.Int64N(left)
			left -= part
			refundRow(ch.ID, cur, domain.FromMinorUnits(part, cur))
		}
		if rng.IntN(20) == 0 {
			refundRow(fmt.Sprintf("ch_earlier_%d", i), cur, domain.FromMinorUnits(minor*10, cur)) // a charge of another day: held to nothing
		}
	}
	rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })

	refunded := map[string]decimal.Decimal{}
	var file strings.Builder
	file.WriteString(strings.TrimSuffix(settlementHead, "\n"))
	if withIDs {
		file.WriteString(",refund_id")
	}
	file.WriteString("\n")
	var listed []domain.ProviderRefund
	for _, r := range rows {
		var fields []string
		if c := r.charge; c != nil {
			fields = []string{c.ID, c.IdempotencyKey, c.OrderID, "charge", string(c.Status), domain.FormatAmount(c.Amount, domain.Currency(c.Currency)), c.Currency, c.CreatedAt.Format(time.RFC3339Nano), ""}
		} else {
			f := r.refund
			fields = []string{f.ChargeID, f.IdempotencyKey, "", "refund", string(f.Status), domain.FormatAmount(f.Amount, domain.Currency(f.Currency)), f.Currency, f.CreatedAt.Format(time.RFC3339Nano), f.ID}
			if f.Status == domain.ChargeSucceeded {
				refunded[f.ChargeID] = refunded[f.ChargeID].Add(f.Amount)
				if withIDs {
					listed = append(listed, *f)
				}
			}
		}
		if !withIDs {
			fields = fields[:len(fields)-1]
		}
		file.WriteString(strings.Join(fields, ",") + "\n")
	}
	var want []domain.Charge
	for _, r := range rows {
		if c := r.charge; c != nil && c.Status == domain.ChargeSucceeded {
			w := *c
			w.RefundedAmount = refunded[c.ID]
			want = append(want, w)
		}
	}
	return file.String(), want, listed
}
