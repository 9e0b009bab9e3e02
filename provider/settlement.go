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
// (docs/settlement-csv.md describes the format). A file may add the
// column refundIDColumn after them: the provider's id of each refund line's
// refund, which lets reconciliation compare refunds one by one.
var settlementColumns = []string{"charge_id", "idempotency_key", "order_id", "type", "status", "amount", "currency", "created_at"}

// refundIDColumn is the optional last column of a settlement file.
const refundIDColumn = "refund_id"

// MaxSettlementRows bounds one uploaded settlement file.
const MaxSettlementRows = 200_000

// providerRef is the spelling of a provider charge id and of an order id
// in a settlement line: what payd can store and show (at most 64
// characters, the width of those columns) and nothing a spreadsheet or a
// log could misread.
var providerRef = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// ParseSettlement reads a settlement CSV into the succeeded charges it
// lists, each with the succeeded refunds the file lists for it added up in
// RefundedAmount, and — when the file has the refund_id column — the
// succeeded refunds it lists, each under the provider's refund id. It
// checks the whole file before returning anything: a reconciliation must
// never start from a file it would trip over halfway, so any bad line
// refuses the whole file with a *domain.SettlementError.
func ParseSettlement(r io.Reader) (domain.Settlement, error) {
	cr := csv.NewReader(r) // every line has as many fields as the header
	withIDs, err := readHeader(cr)
	if err != nil {
		return domain.Settlement{}, err
	}
	p := settlementParser{withIDs: withIDs, index: map[string]int{}, refunds: map[string]refundSum{}, refundLines: map[string]int{}}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return domain.Settlement{}, csvError(err, line)
		}
		if line > MaxSettlementRows+1 {
			return domain.Settlement{}, &domain.SettlementError{Line: line, Reason: fmt.Sprintf("a settlement file may list at most %d rows", MaxSettlementRows)}
		}
		if err := p.add(line, rec); err != nil {
			return domain.Settlement{}, err
		}
	}
	return p.finish()
}

// readHeader checks the header and reports whether it ends with the
// refund_id column.
func readHeader(cr *csv.Reader) (bool, error) {
	head, err := cr.Read()
	if err != nil {
		return false, csvError(err, 1)
	}
	head[0] = strings.TrimPrefix(head[0], "\ufeff") // a byte order mark, as spreadsheets write
	want := strings.Join(settlementColumns, ",")
	if len(head) != len(settlementColumns) && (len(head) != len(settlementColumns)+1 || head[len(settlementColumns)] != refundIDColumn) {
		return false, &domain.SettlementError{Line: 1, Reason: fmt.Sprintf("the header has %d columns, want %s (and optionally %s)", len(head), want, refundIDColumn)}
	}
	for i, c := range settlementColumns {
		if head[i] != c {
			return false, &domain.SettlementError{Line: 1, Reason: fmt.Sprintf("column %d is %.40q, want %q (header: %s)", i+1, head[i], c, want)}
		}
	}
	return len(head) > len(settlementColumns), nil
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
	refundID               string // a refund line's refund, in a file with the refund_id column
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
	withIDs     bool // the file has the refund_id column
	charges     []domain.Charge
	lines       []int          // the line of each charge
	index       map[string]int // charge id → position in charges
	refunds     map[string]refundSum
	listed      []domain.ProviderRefund // the succeeded refunds, by id
	refundLines map[string]int          // refund id → its line
}

func (p *settlementParser) add(line int, rec []string) error {
	l, err := parseSettlementLine(line, rec, p.withIDs)
	if err != nil {
		return err
	}
	if l.typ == "refund" {
		if l.refundID != "" {
			if first, ok := p.refundLines[l.refundID]; ok {
				return &domain.SettlementError{Line: line, Field: refundIDColumn, Reason: fmt.Sprintf("refund %s is already listed on line %d", l.refundID, first)}
			}
			p.refundLines[l.refundID] = line
		}
		if l.status == domain.ChargeSucceeded {
			if l.refundID != "" {
				p.listed = append(p.listed, domain.ProviderRefund{ID: l.refundID, IdempotencyKey: l.key, ChargeID: l.chargeID, OrderID: l.orderID,
					Amount: l.amount, Currency: string(l.currency), Status: l.status, CreatedAt: l.created})
			}
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
// charges with the succeeded refunds listed by id. Refunds of a charge the
// file does not list (charged on an earlier day) are not added to any
// charge: the file says nothing else about that charge; listed by id, they
// are still refunds to compare.
func (p *settlementParser) finish() (domain.Settlement, error) {
	for chargeID, sum := range p.refunds {
		i, ok := p.index[chargeID]
		if !ok {
			continue
		}
		ch := &p.charges[i]
		if string(sum.currency) != ch.Currency {
			return domain.Settlement{}, &domain.SettlementError{Line: sum.lastLine, Field: "currency", Reason: fmt.Sprintf("a refund in %s of charge %s in %s", sum.currency, chargeID, ch.Currency)}
		}
		if sum.amount.GreaterThan(ch.Amount) {
			return domain.Settlement{}, &domain.SettlementError{Line: sum.lastLine, Field: "amount", Reason: fmt.Sprintf("the refunds of charge %s add up to more than its %s", chargeID, ch.Amount.StringFixed(sum.currency.Scale()))}
		}
		ch.RefundedAmount = sum.amount
	}
	var out domain.Settlement
	for _, ch := range p.charges {
		if ch.Status == domain.ChargeSucceeded {
			out.Charges = append(out.Charges, ch)
		}
	}
	out.Refunds = p.listed
	if p.withIDs && out.Refunds == nil {
		out.Refunds = []domain.ProviderRefund{} // the file names its refunds: none
	}
	return out, nil
}

// columnName is the name of column i (from 0) of a settlement file.
func columnName(i int) string {
	if i < len(settlementColumns) {
		return settlementColumns[i]
	}
	return refundIDColumn
}

// parseSettlementLine checks every field of one row; withIDs says the
// row ends with the refund_id column.
func parseSettlementLine(line int, rec []string, withIDs bool) (settlementLine, error) {
	bad := func(field, reason string) (settlementLine, error) {
		return settlementLine{}, &domain.SettlementError{Line: line, Field: field, Reason: reason}
	}
	for i, v := range rec {
		if !utf8.ValidString(v) {
			return bad(columnName(i), "is not valid UTF-8")
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
	if withIDs {
		l.refundID = rec[len(settlementColumns)]
		switch {
		case l.typ == "refund" && !providerRef.MatchString(l.refundID):
			return bad(refundIDColumn, "a refund line names its refund: 1 to 64 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-'")
		case l.typ == "charge" && l.refundID != "":
			return bad(refundIDColumn, "must be empty on a charge line")
		}
	}
	return l, nil
}
