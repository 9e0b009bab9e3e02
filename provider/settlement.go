package provider

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// settlementColumns is the header of the provider's settlement CSV
// (docs/settlement-csv.md describes the format).
var settlementColumns = []string{"charge_id", "idempotency_key", "order_id", "type", "status", "amount", "currency", "created_at"}

// MaxSettlementRows bounds one uploaded settlement file.
const MaxSettlementRows = 200_000

// providerRef is the spelling of a provider charge id and of an order id
// in a settlement line: what payd can store and show (at most 64
// characters, the width of those columns) and nothing a spreadsheet or a
// log could misread.
var providerRef = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// ParseSettlement reads a settlement CSV into the succeeded charges it
// lists, each with the succeeded refunds the file lists for it added up in
// RefundedAmount. It checks the whole file before returning anything: a
// reconciliation must never start from a file it would trip over halfway,
// so any bad line refuses the whole file with a *domain.SettlementError.
func ParseSettlement(r io.Reader) ([]domain.Charge, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = len(settlementColumns)
	if err := readHeader(cr); err != nil {
		return nil, err
	}
	p := settlementParser{index: map[string]int{}, refunds: map[string]refundSum{}}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, csvError(err, line)
		}
		if line > MaxSettlementRows+1 {
			return nil, &domain.SettlementError{Line: line, Reason: fmt.Sprintf("a settlement file may list at most %d rows", MaxSettlementRows)}
		}
		if err := p.add(line, rec); err != nil {
			return nil, err
		}
	}
	return p.finish()
}

func readHeader(cr *csv.Reader) error {
	head, err := cr.Read()
	if err != nil {
		return csvError(err, 1)
	}
	head[0] = strings.TrimPrefix(head[0], "\ufeff") // a byte order mark, as spreadsheets write
	for i, c := range settlementColumns {
		if head[i] != c {
			return &domain.SettlementError{Line: 1, Reason: fmt.Sprintf("column %d is %.40q, want %q (header: %s)", i+1, head[i], c, strings.Join(settlementColumns, ","))}
		}
	}
	return nil
}

// csvError turns the CSV reader's error into one that names the line.
func csvError(err error, line int) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &domain.SettlementError{Line: pe.Line, Reason: pe.Err.Error()}
	}
	if errors.Is(err, io.EOF) {
		return &domain.SettlementError{Line: line, Reason: "the file is empty; the first line must be the header"}
	}
	return fmt.Errorf("settlement: read line %d: %w", line, err)
}

// settlementLine is one checked row.
type settlementLine struct {
	chargeID, key, orderID string
	typ                    string
	status                 domain.ChargeStatus
	amount                 decimal.Decimal
	currency               domain.Currency
	created                time.Time
}

// refundSum adds up the succeeded refunds of one charge.
type refundSum struct {
	amount   decimal.Decimal
	currency domain.Currency
	lastLine int
}

type settlementParser struct {
	charges []domain.Charge
	lines   []int          // the line of each charge
	index   map[string]int // charge id → position in charges
	refunds map[string]refundSum
}

func (p *settlementParser) add(line int, rec []string) error {
	l, err := parseSettlementLine(line, rec)
	if err != nil {
		return err
	}
	if l.typ == "refund" {
		if l.status == domain.ChargeSucceeded {
			sum := p.refunds[l.chargeID]
			if sum.currency != "" && sum.currency != l.currency {
				return &domain.SettlementError{Line: line, Field: "currency", Reason: fmt.Sprintf("refunds of charge %s are in %s and %s", l.chargeID, sum.currency, l.currency)}
			}
			p.refunds[l.chargeID] = refundSum{amount: sum.amount.Add(l.amount), currency: l.currency, lastLine: line}
		}
		return nil
	}
	if first, ok := p.index[l.chargeID]; ok {
		return &domain.SettlementError{Line: line, Field: "charge_id", Reason: fmt.Sprintf("charge %s is already listed on line %d", l.chargeID, p.lines[first])}
	}
	p.index[l.chargeID] = len(p.charges)
	p.lines = append(p.lines, line)
	p.charges = append(p.charges, domain.Charge{ID: l.chargeID, IdempotencyKey: l.key, OrderID: l.orderID, Amount: l.amount,
		Currency: string(l.currency), Status: l.status, CreatedAt: l.created})
	return nil
}

// finish adds each charge's refunds to it and returns the succeeded
// charges. Refunds of a charge the file does not list (charged on an
// earlier day) are left out: the file says nothing about that charge.
func (p *settlementParser) finish() ([]domain.Charge, error) {
	for chargeID, sum := range p.refunds {
		i, ok := p.index[chargeID]
		if !ok {
			continue
		}
		ch := &p.charges[i]
		if string(sum.currency) != ch.Currency {
			return nil, &domain.SettlementError{Line: sum.lastLine, Field: "currency", Reason: fmt.Sprintf("a refund in %s of charge %s in %s", sum.currency, chargeID, ch.Currency)}
		}
		if sum.amount.GreaterThan(ch.Amount) {
			return nil, &domain.SettlementError{Line: sum.lastLine, Field: "amount", Reason: fmt.Sprintf("the refunds of charge %s add up to more than its %s", chargeID, ch.Amount.StringFixed(sum.currency.Scale()))}
		}
		ch.RefundedAmount = sum.amount
	}
	var out []domain.Charge
	for _, ch := range p.charges {
		if ch.Status == domain.ChargeSucceeded {
			out = append(out, ch)
		}
	}
	return out, nil
}

// parseSettlementLine checks every field of one row.
func parseSettlementLine(line int, rec []string) (settlementLine, error) {
	bad := func(field, reason string) (settlementLine, error) {
		return settlementLine{}, &domain.SettlementError{Line: line, Field: field, Reason: reason}
	}
	for i, v := range rec {
		if !utf8.ValidString(v) {
			return bad(settlementColumns[i], "is not valid UTF-8")
		}
	}
	l := settlementLine{chargeID: rec[0], key: rec[1], orderID: rec[2], typ: rec[3], status: domain.ChargeStatus(rec[4])}
	if !providerRef.MatchString(l.chargeID) {
		return bad("charge_id", "must be 1 to 64 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-'")
	}
	if l.key != "" && !domain.ValidKey(l.key) {
		return bad("idempotency_key", "must be empty or 1 to 255 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-'")
	}
	if l.orderID != "" && !providerRef.MatchString(l.orderID) {
		return bad("order_id", "must be empty or 1 to 64 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-'")
	}
	if l.typ != "charge" && l.typ != "refund" {
		return bad("type", "must be charge or refund")
	}
	switch l.status {
	case domain.ChargeSucceeded, domain.ChargeFailed, domain.ChargePending:
	default:
		return bad("status", "must be succeeded, failed or pending")
	}
	cur, err := domain.ParseCurrency(rec[6])
	if err != nil {
		return bad("currency", fmt.Sprintf("%.8q is not a currency payd supports", rec[6]))
	}
	l.currency = cur
	amount, err := domain.ParseAmount(rec[5], cur, "amount")
	if err != nil || !amount.IsPositive() {
		return bad("amount", fmt.Sprintf("must be a positive decimal such as 12.30, with at most %d decimal places for %s and no sign or exponent", cur.Scale(), cur))
	}
	l.amount = amount
	created, err := time.Parse(time.RFC3339Nano, rec[7])
	if err != nil || len(rec[7]) > 40 {
		return bad("created_at", "must be an RFC 3339 time such as 2026-01-31T12:00:00Z")
	}
	l.created = created.UTC()
	return l, nil
}
