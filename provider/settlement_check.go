package provider

import (
	"crypto/sha256"
	"encoding/csv"
	"fmt"
	"io"
	"strings"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// RefKey is the key under which a settlement check remembers a provider id
// (a charge's, a refund's): the first 16 bytes of the id's SHA-256. A check
// must remember every id of a file of up to 200,000 lines to refuse one
// listed twice; 16 bytes an id, where the id's own string would cost its
// header, its bytes and — taken from the CSV reader — the whole line it was
// read from, which that string keeps alive. Two ids share a key with a
// chance of about 2^-128 a pair (some 10^-28 for a full file), and SHA-256
// keeps anyone from making them share one on purpose: were it ever to
// happen, a good file would be refused as listing a charge twice, or a
// refund would count against the other charge's sum.
type RefKey [16]byte

// RefKeyOf is id's RefKey.
func RefKeyOf(id string) RefKey {
	sum := sha256.Sum256([]byte(id))
	return RefKey(sum[:16])
}

// chargeMark is what the check keeps of a charge line: where it is, for a
// second line listing the charge, and its amount and currency, for the
// refunds of it the file lists, which may come before it or after.
type chargeMark struct {
	minor    int64 // its amount in minor units: at most 15 digits and 3 decimals
	line     int32
	currency uint8 // an index into settlementCheck.currencies
}

// refundSum adds up the succeeded refunds of one charge.
type refundSum struct {
	chargeID string // the charge's id, its own copy, for the message that refuses the sum
	amount   decimal.Decimal
	currency domain.Currency
	lastLine int
}

// settlementCheck is the first reading of a settlement file: every line
// checked, keeping only what the whole file must be held to, a few dozen
// bytes a charge, never the charges themselves.
type settlementCheck struct {
	withIDs     bool // the file has the refund_id column
	succeeded   int  // the succeeded charges it lists
	charges     map[RefKey]chargeMark
	refunds     map[RefKey]refundSum // by charge id: its succeeded refunds
	refundLines map[RefKey]int32     // by refund id: the line that lists it
	listed      []domain.ProviderRefund
	currencies  []domain.Currency // the file's currencies, each held once (chargeMark.currency)
}

// checkSettlement reads a settlement file once, checking every line and
// the refunds of each charge against it.
func checkSettlement(r io.Reader) (*settlementCheck, error) {
	cr := csv.NewReader(r) // every line has as many fields as the header
	cr.ReuseRecord = true  // a line's strings are its own; only the slice is reused
	withIDs, err := readHeader(cr)
	if err != nil {
		return nil, err
	}
	c := &settlementCheck{withIDs: withIDs, charges: map[RefKey]chargeMark{}, refunds: map[RefKey]refundSum{}, refundLines: map[RefKey]int32{}}
	if err := eachLine(cr, c.add); err != nil {
		return nil, err
	}
	return c, c.finish()
}

func (c *settlementCheck) add(line int, rec []string) error {
	l, err := parseSettlementLine(line, rec, c.withIDs)
	if err != nil {
		return err
	}
	if l.typ == "refund" {
		return c.addRefund(line, l)
	}
	key := RefKeyOf(l.chargeID)
	if first, ok := c.charges[key]; ok {
		return &domain.SettlementError{Line: line, Field: "charge_id", Reason: fmt.Sprintf("charge %s is already listed on line %d", l.chargeID, first.line)}
	}
	c.charges[key] = chargeMark{minor: domain.MinorUnits(l.amount, l.currency), line: int32(line), currency: c.currency(l.currency)}
	if l.status == domain.ChargeSucceeded {
		c.succeeded++
	}
	return nil
}

func (c *settlementCheck) addRefund(line int, l settlementLine) error {
	if l.refundID != "" {
		key := RefKeyOf(l.refundID)
		if first, ok := c.refundLines[key]; ok {
			return &domain.SettlementError{Line: line, Field: refundIDColumn, Reason: fmt.Sprintf("refund %s is already listed on line %d", l.refundID, first)}
		}
		c.refundLines[key] = int32(line)
	}
	if l.status != domain.ChargeSucceeded {
		return nil
	}
	if l.refundID != "" {
		c.listed = append(c.listed, domain.ProviderRefund{ID: l.refundID, IdempotencyKey: l.key, ChargeID: l.chargeID, OrderID: l.orderID,
			Amount: l.amount, Currency: string(l.currency), Status: l.status, CreatedAt: l.created})
	}
	key := RefKeyOf(l.chargeID)
	sum, ok := c.refunds[key]
	if ok && sum.currency != l.currency {
		return &domain.SettlementError{Line: line, Field: "currency", Reason: fmt.Sprintf("refunds of charge %s are in %s and %s", l.chargeID, sum.currency, l.currency)}
	}
	if !ok {
		sum = refundSum{chargeID: strings.Clone(l.chargeID), currency: c.currencies[c.currency(l.currency)]}
	}
	sum.amount, sum.lastLine = sum.amount.Add(l.amount), line
	c.refunds[key] = sum
	return nil
}

// currency is cur's index in c.currencies, which holds each currency of
// the file once, in a string of its own.
func (c *settlementCheck) currency(cur domain.Currency) uint8 {
	for i, have := range c.currencies {
		if have == cur {
			return uint8(i) // payd knows some thirty currencies
		}
	}
	c.currencies = append(c.currencies, domain.Currency(strings.Clone(string(cur))))
	return uint8(len(c.currencies) - 1)
}

// finish holds the refunds of each charge the file lists to that charge:
// in its currency, and adding up to no more than its amount. Refunds of a
// charge the file does not list (charged on an earlier day) are held to
// nothing and added to no charge: the file says nothing else about that
// charge; listed by id, they are still refunds to compare. Of several
// charges whose refunds are wrong, the one whose last refund comes first
// in the file is named, so a file is always refused the same way.
func (c *settlementCheck) finish() error {
	var first *domain.SettlementError
	for key, sum := range c.refunds {
		ch, ok := c.charges[key]
		if !ok {
			continue
		}
		var err *domain.SettlementError
		cur := c.currencies[ch.currency]
		switch amount := domain.FromMinorUnits(ch.minor, cur); {
		case sum.currency != cur:
			err = &domain.SettlementError{Line: sum.lastLine, Field: "currency", Reason: fmt.Sprintf("a refund in %s of charge %s in %s", sum.currency, sum.chargeID, cur)}
		case sum.amount.GreaterThan(amount):
			err = &domain.SettlementError{Line: sum.lastLine, Field: "amount", Reason: fmt.Sprintf("the refunds of charge %s add up to more than its %s", sum.chargeID, amount.StringFixed(sum.currency.Scale()))}
		}
		if err != nil && (first == nil || err.Line < first.Line) {
			first = err
		}
	}
	if first != nil {
		return first
	}
	return nil
}

// refunded is what reading the file again needs of the check: the sum of
// the succeeded refunds of each charge the file lists. The rest of the
// check is dropped with it.
func (c *settlementCheck) refunded() map[RefKey]decimal.Decimal {
	out := map[RefKey]decimal.Decimal{}
	for key, sum := range c.refunds {
		if _, ok := c.charges[key]; ok {
			out[key] = sum.amount
		}
	}
	return out
}
