package provider

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/shopspring/decimal"
)

// settlementColumns is the header of the provider's settlement CSV.
var settlementColumns = []string{"charge_id", "idempotency_key", "order_id", "type", "status", "amount", "currency", "created_at"}

// MaxSettlementRows bounds one uploaded settlement file.
const MaxSettlementRows = 200_000

// ParseSettlement reads a settlement CSV into the succeeded charges it
// lists, each with the refunds the file lists for it added up in
// RefundedAmount. A malformed file is an error that names the line.
func ParseSettlement(r io.Reader) ([]Charge, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = len(settlementColumns)
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("settlement: header: %w", err)
	}
	for i, c := range settlementColumns {
		if head[i] != c {
			return nil, fmt.Errorf("settlement: column %d is %q, want %q", i+1, head[i], c)
		}
	}
	var charges []Charge
	index := map[string]int{}
	refunds := map[string]decimal.Decimal{}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("settlement: %w", err)
		}
		if line > MaxSettlementRows {
			return nil, fmt.Errorf("settlement: more than %d rows", MaxSettlementRows)
		}
		amount, err := decimal.NewFromString(rec[5])
		if err != nil || amount.IsNegative() {
			return nil, fmt.Errorf("settlement: line %d: amount %q is not a decimal", line, rec[5])
		}
		created, err := time.Parse(time.RFC3339Nano, rec[7])
		if err != nil {
			return nil, fmt.Errorf("settlement: line %d: created_at %q is not RFC 3339", line, rec[7])
		}
		switch rec[3] {
		case "charge":
			if rec[4] != string(ChargeSucceeded) {
				continue
			}
			index[rec[0]] = len(charges)
			charges = append(charges, Charge{ID: rec[0], IdempotencyKey: rec[1], OrderID: rec[2], Amount: amount,
				Currency: rec[6], Status: ChargeSucceeded, CreatedAt: created.UTC()})
		case "refund":
			refunds[rec[0]] = refunds[rec[0]].Add(amount)
		default:
			return nil, fmt.Errorf("settlement: line %d: type %q is neither charge nor refund", line, rec[3])
		}
	}
	for chargeID, sum := range refunds {
		if i, ok := index[chargeID]; ok {
			charges[i].RefundedAmount = sum
		}
	}
	return charges, nil
}
