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

// ParseBalanceCSV reads a Stripe balance-transactions export into the
// succeeded charges it lists, for reconciliation: each "charge" row is one
// (its ID the PaymentIntent's, as payd stores it, else the charge's), and
// the "refund" rows of the same payment add up in RefundedAmount. Amounts
// are decimal major units, as Stripe's reports write them. Every other
// category (fees, payouts, disputes, ...) is not a charge and is skipped.
// The whole file is checked before anything is returned; a bad line is a
// *domain.SettlementError naming it.
func ParseBalanceCSV(r io.Reader) ([]domain.Charge, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	head, err := cr.Read()
	if err != nil {
		return nil, balanceCSVError(err, 1)
	}
	col, err := balanceHeader(head)
	if err != nil {
		return nil, err
	}
	var charges []domain.Charge
	index := map[string]int{}
	refunds := map[string]decimal.Decimal{}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, balanceCSVError(err, line)
		}
		if line > MaxBalanceRows+1 {
			return nil, &domain.SettlementError{Line: line, Reason: fmt.Sprintf("a file may list at most %d rows", MaxBalanceRows)}
		}
		get := func(k string) string {
			if i, ok := col[k]; ok && i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		cat := strings.ToLower(get("category"))
		if cat != "charge" && cat != "payment" && cat != "refund" {
			continue
		}
		ch, err := balanceRow(line, get)
		if err != nil {
			return nil, err
		}
		if cat == "refund" {
			refunds[ch.ID] = refunds[ch.ID].Add(ch.Amount.Abs())
			continue
		}
		if _, dup := index[ch.ID]; dup {
			return nil, &domain.SettlementError{Line: line, Field: "payment_intent_id", Reason: "the payment is listed twice"}
		}
		index[ch.ID] = len(charges)
		charges = append(charges, ch)
	}
	for id, sum := range refunds {
		if i, ok := index[id]; ok {
			charges[i].RefundedAmount = sum
		}
	}
	return charges, nil
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
