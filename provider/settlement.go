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

// SettlementPage is how many charges a checked settlement file hands out
// at a time: a run decides a page as it decides a page of the provider's
// list, and holds no more of the file than that.
const SettlementPage = 500

// ParseSettlement checks a settlement CSV whole and returns it as a
// domain.Settlement: the succeeded charges it lists, each with the
// succeeded refunds the file lists for it added up in RefundedAmount, and
// — when the file has the refund_id column — the succeeded refunds it
// lists, each under the provider's refund id.
//
// open opens the file at its first byte each time it is called, and the
// file is read twice (ADR 0066). ParseSettlement reads it once to check
// every line before returning anything: a reconciliation must never start
// from a file it would trip over halfway, so any bad line refuses the whole
// file with a *domain.SettlementError. The Settlement's Charges read it
// again, SettlementPage charges at a time; between the two, payd holds the
// refunds listed by id and each refunded charge's sum, never the charges.
func ParseSettlement(open func() (io.Reader, error)) (domain.Settlement, error) {
	r, err := open()
	if err != nil {
		return domain.Settlement{}, fmt.Errorf("settlement: open: %w", err)
	}
	c, err := checkSettlement(r)
	if err != nil {
		return domain.Settlement{}, err
	}
	out := domain.Settlement{Refunds: c.listed}
	if c.withIDs && out.Refunds == nil {
		out.Refunds = []domain.ProviderRefund{} // the file names its refunds: none
	}
	if c.succeeded > 0 {
		p := settlementPages{open: open, withIDs: c.withIDs, refunded: c.refunded()}
		out.Charges = p.walk
	}
	return out, nil
}

// eachLine reads the lines after the header, calling fn with each and its
// number (the header is line 1), and stops at the first error: the CSV
// reader's or the row limit's, naming the line, or fn's.
func eachLine(cr *csv.Reader, fn func(line int, rec []string) error) error {
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return csvError(err, line)
		}
		if line > MaxSettlementRows+1 {
			return &domain.SettlementError{Line: line, Reason: fmt.Sprintf("a settlement file may list at most %d rows", MaxSettlementRows)}
		}
		if err := fn(line, rec); err != nil {
			return err
		}
	}
}

// settlementPages reads a checked file again for its succeeded charges.
// It holds what the check learned that the lines alone do not say: each
// refunded charge's sum.
type settlementPages struct {
	open     func() (io.Reader, error)
	withIDs  bool
	refunded map[RefKey]decimal.Decimal // charge id → its succeeded refunds, for the charges the file lists
}

// walk is the file's domain.ChargePages: it reads the file from its first
// line and hands out its succeeded charges in the file's order, in pages of
// SettlementPage that share one array. The file was checked whole, so a
// line that no longer reads means it changed underneath: an error, not a
// *domain.SettlementError.
func (p settlementPages) walk(yield func([]domain.Charge) error) error {
	r, err := p.open()
	if err != nil {
		return fmt.Errorf("settlement: open again: %w", err)
	}
	cr := csv.NewReader(r)
	cr.ReuseRecord = true // each line is copied into its charge, and its strings are its own
	if _, err := readHeader(cr); err != nil {
		return fmt.Errorf("settlement: read again: %w", err)
	}
	pages := NewPager(yield)
	err = eachLine(cr, func(line int, rec []string) error {
		if rec[3] != "charge" || rec[4] != string(domain.ChargeSucceeded) {
			return nil // checked already; only the succeeded charges are handed out
		}
		l, err := parseSettlementLine(line, rec, p.withIDs)
		if err != nil {
			return err
		}
		return pages.Add(domain.Charge{ID: l.chargeID, IdempotencyKey: l.key, OrderID: l.orderID, Amount: l.amount,
			Currency: string(l.currency), Status: l.status, RefundedAmount: p.refunded[RefKeyOf(l.chargeID)], CreatedAt: l.created})
	})
	return pages.End(err, "settlement")
}

// Pager gathers a settlement file's charges, read again, into pages of
// SettlementPage that share one array, for a domain.ChargePages's yield.
type Pager struct {
	yield   func([]domain.Charge) error
	page    []domain.Charge
	stopped error // yield's error, returned as it is
}

// NewPager returns a Pager handing its pages to yield.
func NewPager(yield func([]domain.Charge) error) *Pager {
	return &Pager{yield: yield, page: make([]domain.Charge, 0, SettlementPage)}
}

// Add adds ch to the page, and hands the page to yield once it is full; it
// returns yield's error, which ends the reading.
func (p *Pager) Add(ch domain.Charge) error {
	if p.page = append(p.page, ch); len(p.page) < SettlementPage {
		return nil
	}
	p.stopped = p.yield(p.page)
	p.page = p.page[:0]
	return p.stopped
}

// End ends a reading that returned err: yield's own error as it is, the
// reading's as the file (what) no longer reading, else the last page's
// yield.
func (p *Pager) End(err error, what string) error {
	switch {
	case p.stopped != nil:
		return p.stopped
	case err != nil:
		return fmt.Errorf("%s: read again: %w", what, err)
	case len(p.page) > 0:
		return p.yield(p.page)
	}
	return nil
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
