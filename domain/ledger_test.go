package domain_test

import (
	"testing"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

func TestSummarize(t *testing.T) {
	d := decimal.RequireFromString
	entry := func(k domain.LedgerKind, amount string, cur domain.Currency) domain.LedgerEntry {
		return domain.LedgerEntry{Kind: k, Amount: d(amount), Currency: cur}
	}
	tests := []struct {
		name    string
		entries []domain.LedgerEntry
		want    [5]string // charged, refunded, disputed, lost, net
	}{
		{"nothing", nil, [5]string{"0", "0", "0", "0", "0"}},
		{"a charge", []domain.LedgerEntry{entry(domain.LedgerCharge, "10.00", "USD")}, [5]string{"10", "0", "0", "0", "10"}},
		{"payd's and an outside refund", []domain.LedgerEntry{
			entry(domain.LedgerCharge, "10.00", "USD"), entry(domain.LedgerRefund, "2.50", "USD"), entry(domain.LedgerOutsideRefund, "1.50", "USD"),
		}, [5]string{"10", "4", "0", "0", "6"}},
		{"a dispute open: withdrawn, not lost", []domain.LedgerEntry{
			entry(domain.LedgerCharge, "10.00", "USD"), entry(domain.LedgerDisputeOpened, "10.00", "USD"),
		}, [5]string{"10", "0", "10", "0", "10"}},
		{"a dispute won", []domain.LedgerEntry{
			entry(domain.LedgerCharge, "10.00", "USD"), entry(domain.LedgerDisputeOpened, "10.00", "USD"), entry(domain.LedgerDisputeWon, "10.00", "USD"),
		}, [5]string{"10", "0", "0", "0", "10"}},
		{"a refund and a lost dispute: net below zero", []domain.LedgerEntry{
			entry(domain.LedgerCharge, "10.00", "USD"), entry(domain.LedgerOutsideRefund, "3.00", "USD"),
			entry(domain.LedgerDisputeOpened, "10.00", "USD"), entry(domain.LedgerDisputeLost, "10.00", "USD"),
		}, [5]string{"10", "3", "0", "10", "-3"}},
		{"another currency is not added", []domain.LedgerEntry{
			entry(domain.LedgerCharge, "10.00", "USD"), entry(domain.LedgerCharge, "500", "JPY"),
		}, [5]string{"10", "0", "0", "0", "10"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := domain.Summarize("USD", tt.entries)
			got := [5]decimal.Decimal{m.Charged, m.Refunded, m.Disputed, m.Lost, m.Net}
			for i, w := range tt.want {
				if !got[i].Equal(d(w)) {
					t.Errorf("Summarize = %v, want %v", got, tt.want)
					break
				}
			}
		})
	}
}

func TestLedgerVocabulary(t *testing.T) {
	for _, k := range domain.LedgerKinds {
		if !k.Valid() {
			t.Errorf("%q.Valid() = false", k)
		}
	}
	for _, s := range domain.LedgerSources {
		if !s.Valid() {
			t.Errorf("%q.Valid() = false", s)
		}
	}
	if domain.LedgerKind("bonus").Valid() || domain.LedgerSource("rumour").Valid() || domain.LedgerKind("").Valid() {
		t.Error("an unknown kind or source is valid")
	}
	// payd's refund and an outside refund of one provider refund share a
	// reference: one movement, booked once.
	if domain.RefundReference("re_1") != "refund:re_1" || domain.ChargeReference("ch_1") != "charge:ch_1" ||
		domain.DisputeReference("dp_1", domain.LedgerDisputeLost) != "dispute:dp_1:dispute_lost" {
		t.Error("references changed: existing ledgers would book a movement twice")
	}
}

func TestDisputeMachine(t *testing.T) {
	for _, e := range domain.DisputeEvents {
		for _, s := range domain.DisputeStatuses {
			got, err := domain.NextDispute(s, e)
			if s == domain.DisputeOpen {
				if err != nil || got != e.To() || !got.Valid() {
					t.Errorf("NextDispute(%s, %s) = %q, %v, want %s", s, e, got, err, e.To())
				}
				continue
			}
			if err == nil {
				t.Errorf("NextDispute(%s, %s) = %q: a closed dispute closes again", s, e, got)
			}
		}
	}
	for _, to := range []domain.DisputeStatus{domain.DisputeWon, domain.DisputeLost} {
		e, ok := domain.CloseEvent(to)
		if !ok || e.To() != to {
			t.Errorf("CloseEvent(%s) = %s, %v", to, e, ok)
		}
	}
	if _, ok := domain.CloseEvent(domain.DisputeOpen); ok {
		t.Error("CloseEvent(open) found an event: nothing closes a dispute as open")
	}
	if domain.DisputeEventWin.Ledger() != domain.LedgerDisputeWon || domain.DisputeEventLose.Ledger() != domain.LedgerDisputeLost {
		t.Error("a close books the wrong kind")
	}
}
