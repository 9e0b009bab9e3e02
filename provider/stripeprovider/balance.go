package stripeprovider

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
)

// MaxBalanceRows bounds one uploaded balance-transactions file.
const MaxBalanceRows = 200_000

// balanceColumns are the columns payd reads from a Stripe itemized balance
// report ("Balance change from activity", itemized; or the Dashboard's
// balance-transactions export with these columns and the payment metadata
// payd writes), each with the other spellings Stripe's exports use. Other
// columns are ignored, in any order.
var balanceColumns = map[string][]string{
	"category":       {"reporting_category", "type"},
	"gross":          {"gross", "amount"},
	"currency":       {"currency"},
	"created":        {"created_utc", "created (utc)", "created"},
	"payment_intent": {"payment_intent_id", "payment_intent"},
	"charge":         {"charge_id", "source_id", "source"},
	"attempt":        {"payment_metadata[payd_attempt]", "payd_attempt (metadata)", "metadata[payd_attempt]"},
	"order":          {"payment_metadata[payd_order]", "payd_order (metadata)", "metadata[payd_order]"},
}

var stripeRef = regexp.MustCompile(`^[A-Za-z0-9._:-]{0,64}$`)

// ParseBalanceCSV checks a Stripe balance-transactions export and returns
// the succeeded charges it lists, for reconciliation: each "charge" row is
// one (its ID the PaymentIntent's, as payd stores it, else the charge's),
// and the "refund" rows of the same payment add up in RefundedAmount.
// Amounts are decimal major units, as Stripe's reports write them. Every
// other category (fees, payouts, disputes, ...) is not a charge and is
// skipped. It lists no refunds by id: a run takes those from Stripe's list.
//
// As provider.ParseSettlement does, it reads the file twice, each time
// from open (ADR 0066): once to check every row before returning anything
// — a bad line is a *domain.SettlementError naming it — keeping only a key
// per payment and each refunded payment's sum, and again, for the
// Settlement's Charges, provider.SettlementPage charges at a time.
func ParseBalanceCSV(open func() (io.Reader, error)) (domain.Settlement, error) {
	r, err := open()
	if err != nil {
		return domain.Settlement{}, fmt.Errorf("balance transactions: open: %w", err)
	}
	p, err := checkBalance(r)
	if err != nil || p.charges == 0 {
		return domain.Settlement{}, err
	}
	p.open = open
	return domain.Settlement{Charges: p.walk}, nil
}

// balancePages is what checking an export keeps to read it again.
type balancePages struct {
	open     func() (io.Reader, error)
	charges  int                                 // the charge rows
	refunded map[provider.RefKey]decimal.Decimal // payment → its refunds, for the payments the file charges
}

// checkBalance reads an export once, checking every charge and refund row.
func checkBalance(r io.Reader) (balancePages, error) {
	var p balancePages
	seen := map[provider.RefKey]struct{}{}
	refunds := map[provider.RefKey]decimal.Decimal{}
	err := eachBalanceRow(r, func(line int, cat string, get func(string) string) error {
		ch, err := balanceRow(line, get)
		if err != nil {
			return err
		}
		key := provider.RefKeyOf(ch.ID)
		if cat == "refund" {
			refunds[key] = refunds[key].Add(ch.Amount.Abs())
			return nil
		}
		if _, dup := seen[key]; dup {
			return &domain.SettlementError{Line: line, Field: "payment_intent_id", Reason: "the payment is listed twice"}
		}
		seen[key] = struct{}{}
		p.charges++
		return nil
	})
	if err != nil {
		return balancePages{}, err
	}
	p.refunded = map[provider.RefKey]decimal.Decimal{}
	for key, sum := range refunds {
		if _, ok := seen[key]; ok {
			p.refunded[key] = sum
		}
	}
	return p, nil
}

// walk is the export's domain.ChargePages: its charges, read again, in the
// file's order, in pages that share one array.
func (p balancePages) walk(yield func([]domain.Charge) error) error {
	r, err := p.open()
	if err != nil {
		return fmt.Errorf("balance transactions: open again: %w", err)
	}
	pages := provider.NewPager(yield)
	err = eachBalanceRow(r, func(line int, cat string, get func(string) string) error {
		if cat == "refund" {
			return nil
		}
		ch, err := balanceRow(line, get)
		if err != nil {
			return err
		}
		if sum, ok := p.refunded[provider.RefKeyOf(ch.ID)]; ok {
			ch.RefundedAmount = sum
		}
		return pages.Add(ch)
	})
	return pages.End(err, "balance transactions")
}

// eachBalanceRow reads an export's header, then calls fn with each charge
// or refund row: its line (the header is line 1), its category (charge
// for "charge" and "payment" alike, or refund) and its fields by name. It
// stops at the first error, naming the line, or fn's.
func eachBalanceRow(r io.Reader, fn func(line int, cat string, get func(string) string) error) error {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true // a row's strings are its own; only the slice is reused
	head, err := cr.Read()
	if err != nil {
		return balanceCSVError(err, 1)
	}
	col, err := balanceHeader(head)
	if err != nil {
		return err
	}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return balanceCSVError(err, line)
		}
		if line > MaxBalanceRows+1 {
			return &domain.SettlementError{Line: line, Reason: fmt.Sprintf("a file may list at most %d rows", MaxBalanceRows)}
		}
		get := func(k string) string {
			if i, ok := col[k]; ok && i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		switch cat := strings.ToLower(get("category")); cat {
		case "charge", "payment":
			err = fn(line, "charge", get)
		case "refund":
			err = fn(line, cat, get)
		}
		if err != nil {
			return err
		}
	}
}

func balanceHeader(head []string) (map[string]int, error) {
	if len(head) > 0 {
		head[0] = strings.TrimPrefix(head[0], "\ufeff")
	}
	col := map[string]int{}
	for i, h := range head {
		h = strings.ToLower(strings.TrimSpace(h))
		for k, names := range balanceColumns {
			for _, n := range names {
				if _, seen := col[k]; h == n && !seen {
					col[k] = i
				}
			}
		}
	}
	for _, k := range []string{"category", "gross", "currency", "created", "attempt"} {
		if _, ok := col[k]; !ok {
			return nil, &domain.SettlementError{Line: 1, Reason: fmt.Sprintf("no %s column (one of %s)", k, strings.Join(balanceColumns[k], ", "))}
		}
	}
	if _, ok := col["payment_intent"]; !ok {
		if _, ok := col["charge"]; !ok {
			return nil, &domain.SettlementError{Line: 1, Reason: "no payment_intent_id or charge_id column"}
		}
	}
	return col, nil
}

// balanceRow reads one charge or refund row.
func balanceRow(line int, get func(string) string) (domain.Charge, error) {
	bad := func(field, reason string) error {
		return &domain.SettlementError{Line: line, Field: field, Reason: reason}
	}
	id := get("payment_intent")
	if id == "" {
		id = get("charge")
	}
	if id == "" || !stripeRef.MatchString(id) {
		return domain.Charge{}, bad("payment_intent_id", "must name the payment (at most 64 letters, digits or ._:-)")
	}
	key, order := get("attempt"), get("order")
	if !stripeRef.MatchString(key) || !stripeRef.MatchString(order) {
		return domain.Charge{}, bad("payment_metadata", "payd_attempt and payd_order must be at most 64 letters, digits or ._:-")
	}
	cur, err := domain.ParseCurrency(strings.ToUpper(get("currency")))
	if err != nil {
		return domain.Charge{}, bad("currency", "is not a currency payd supports")
	}
	amount, err := decimal.NewFromString(get("gross"))
	if err != nil || !amount.Equal(amount.Round(cur.Scale())) {
		return domain.Charge{}, bad("gross", "must be a decimal amount of "+string(cur))
	}
	created, err := parseStripeTime(get("created"))
	if err != nil {
		return domain.Charge{}, bad("created_utc", "must be a time such as 2026-11-30 12:00:00")
	}
	return domain.Charge{ID: id, IdempotencyKey: key, OrderID: order, Amount: amount, Currency: string(cur),
		Status: domain.ChargeSucceeded, RefundedAmount: decimal.Zero, CreatedAt: created}, nil
}

func parseStripeTime(s string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02 15:04:05", time.RFC3339, "2006-01-02 15:04"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("time %q", s)
}

func balanceCSVError(err error, line int) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &domain.SettlementError{Line: pe.Line, Reason: pe.Err.Error()}
	}
	if errors.Is(err, io.EOF) {
		return &domain.SettlementError{Line: line, Reason: "the file is empty; the first line must be the header"}
	}
	return fmt.Errorf("balance transactions: read line %d: %w", line, err)
}
