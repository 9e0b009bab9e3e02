package domain

import (
	"time"

	"github.com/shopspring/decimal"
)

// LedgerKind says what kind of movement of money a ledger entry records.
// The zero value is invalid.
type LedgerKind string

// The kinds of ledger entry. Each is money that moved at the provider,
// whoever moved it; payd's own state machines say what payd did.
const (
	LedgerCharge        LedgerKind = "charge"         // the provider charged the customer
	LedgerRefund        LedgerKind = "refund"         // payd asked for a refund and the provider gave the money back
	LedgerOutsideRefund LedgerKind = "outside_refund" // the money was given back at the provider without payd asking
	LedgerDisputeOpened LedgerKind = "dispute_opened" // the customer's bank took the disputed money back (funds withdrawn)
	LedgerDisputeWon    LedgerKind = "dispute_won"    // the dispute was decided for the merchant: the money came back (funds reinstated)
	LedgerDisputeLost   LedgerKind = "dispute_lost"   // the dispute was decided for the customer: the money is gone for good
	// LedgerRefundReversed: the provider took back a refund it had
	// confirmed (a refund that succeeded and then failed): the money is
	// the merchant's again. Its amount is the reversed refund's.
	LedgerRefundReversed LedgerKind = "refund_reversed"
)

// A manual-capture order's hold: the provider holds the money (hold),
// then a capture, a void or a lapse ends the hold (hold_released, the
// whole hold); a capture books what it took as a charge. Neither is money
// the merchant has: Books.Authorized is what is held.
const (
	LedgerHold         LedgerKind = "hold"
	LedgerHoldReleased LedgerKind = "hold_released"
)

// HoldReference is the reference of a hold's entry, HoldReleasedReference
// of its end's: one hold per charge, ended once.
func HoldReference(chargeID string) string { return "hold:" + chargeID }

// HoldReleasedReference is the reference of the entry that ends the hold
// of HoldReference(chargeID).
func HoldReleasedReference(chargeID string) string { return "hold:" + chargeID + ":released" }

// LedgerKinds lists every kind, for table tests and documentation.
var LedgerKinds = []LedgerKind{LedgerCharge, LedgerRefund, LedgerOutsideRefund, LedgerDisputeOpened, LedgerDisputeWon, LedgerDisputeLost, LedgerRefundReversed,
	LedgerHold, LedgerHoldReleased}

// Valid reports whether k is a known kind.
func (k LedgerKind) Valid() bool {
	for _, v := range LedgerKinds {
		if k == v {
			return true
		}
	}
	return false
}

// LedgerSource says who or what told payd of a movement of money.
type LedgerSource string

// The sources of ledger entries.
const (
	SourcePayReply       LedgerSource = "pay_reply"      // the provider's answer to payd's own charge or refund request
	SourceWebhook        LedgerSource = "webhook"        // a provider event, confirmed with the provider where it moves money
	SourceRecoverer      LedgerSource = "recoverer"      // payd asked the provider about an outcome it had not learned
	SourceReconciliation LedgerSource = "reconciliation" // a reconciliation run found it in the provider's books
	SourceOperator       LedgerSource = "operator"       // an operator's action (a resolution, a refund)
)

// LedgerSources lists every source.
var LedgerSources = []LedgerSource{SourcePayReply, SourceWebhook, SourceRecoverer, SourceReconciliation, SourceOperator}

// Valid reports whether s is a known source.
func (s LedgerSource) Valid() bool {
	for _, v := range LedgerSources {
		if s == v {
			return true
		}
	}
	return false
}

// LedgerEntry is one movement of money of one order, appended once and
// never changed. Reference names the movement at its source (see
// ChargeReference, RefundReference, DisputeReference) and is unique: the
// same movement learned twice — from the pay reply and its webhook, from a
// webhook and a reconciliation run — is one entry.
type LedgerEntry struct {
	ID        string
	OrderID   string
	Kind      LedgerKind
	Reference string
	ChargeID  string // the provider's charge the money moved on
	Amount    decimal.Decimal
	Currency  Currency
	Source    LedgerSource
	Actor     string // the operator's name for SourceOperator, else empty
	Note      string
	CreatedAt time.Time
}

// ChargeReference is the reference of a charge's entry.
func ChargeReference(chargeID string) string { return "charge:" + chargeID }

// RefundReference is the reference of a refund's entry, whoever asked for
// it: payd's refund and an outside refund of the same provider refund are
// one movement.
func RefundReference(providerRefundID string) string { return "refund:" + providerRefundID }

// ReversalReference is the reference of the entry that takes back the
// refund of RefundReference(providerRefundID): a refund is reversed once.
func ReversalReference(providerRefundID string) string {
	return "refund:" + providerRefundID + ":reversed"
}

// RefundedOn is what the entries hold given back of charge chargeID:
// payd's refunds and outside refunds of it, less those the provider
// reversed. It is what an order paid by that charge has confirmed as
// refunded (Order.RefundedAmount).
func RefundedOn(chargeID string, cur Currency, entries []LedgerEntry) decimal.Decimal {
	sum := decimal.Zero
	for _, e := range entries {
		if e.ChargeID != chargeID || e.Currency != cur {
			continue
		}
		switch e.Kind {
		case LedgerRefund, LedgerOutsideRefund:
			sum = sum.Add(e.Amount)
		case LedgerRefundReversed:
			sum = sum.Sub(e.Amount)
		}
	}
	return sum
}

// DisputeReference is the reference of one step of a dispute: opened, won
// or lost.
func DisputeReference(providerDisputeID string, k LedgerKind) string {
	return "dispute:" + providerDisputeID + ":" + string(k)
}

// Books is an order's books as its ledger adds them up, in the order's
// currency: Authorized what holds keep, Charged is every charge, Refunded every refund (payd's and
// outside ones), Disputed what is withdrawn under disputes still open, Lost
// what disputes took for good, and Net = Charged − Refunded − Lost.
type Books struct {
	// Authorized is what holds keep on the buyer's card: holds less their
	// ends (not money the merchant has).
	Authorized decimal.Decimal
	Charged    decimal.Decimal
	Refunded   decimal.Decimal
	Disputed   decimal.Decimal
	Lost       decimal.Decimal
	Net        decimal.Decimal
}

// Summarize adds up an order's ledger. Entries in another currency than
// cur are not added (payd never records one: an amount or currency
// mismatch is a discrepancy, never an entry).
func Summarize(cur Currency, entries []LedgerEntry) Books {
	var m Books
	for _, e := range entries {
		if e.Currency != cur {
			continue
		}
		switch e.Kind {
		case LedgerCharge:
			m.Charged = m.Charged.Add(e.Amount)
		case LedgerHold:
			m.Authorized = m.Authorized.Add(e.Amount)
		case LedgerHoldReleased:
			m.Authorized = m.Authorized.Sub(e.Amount)
		case LedgerRefund, LedgerOutsideRefund:
			m.Refunded = m.Refunded.Add(e.Amount)
		case LedgerRefundReversed:
			m.Refunded = m.Refunded.Sub(e.Amount)
		case LedgerDisputeOpened:
			m.Disputed = m.Disputed.Add(e.Amount)
		case LedgerDisputeWon:
			m.Disputed = m.Disputed.Sub(e.Amount)
		case LedgerDisputeLost:
			m.Disputed = m.Disputed.Sub(e.Amount)
			m.Lost = m.Lost.Add(e.Amount)
		}
	}
	m.Net = m.Charged.Sub(m.Refunded).Sub(m.Lost)
	return m
}
