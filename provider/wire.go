package provider

import (
	"fmt"
	"time"

	"github.com/payd/payd/domain"
	"github.com/shopspring/decimal"
)

// The provider's wire format. These types stay unexported: callers only
// ever see domain.Charge, domain.ProviderRefund and domain.ProviderEvent,
// through the converters below (and domain.ProviderDispute).

type chargeRequestDTO struct {
	OrderID       string `json:"order_id"`
	Amount        string `json:"amount"`
	Currency      string `json:"currency"`
	PaymentMethod string `json:"payment_method"`
	// CaptureMethod is left out for an automatic charge: the provider's
	// default.
	CaptureMethod string `json:"capture_method,omitempty"`
}

type captureRequestDTO struct {
	ChargeID string `json:"charge_id"`
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

type voidRequestDTO struct {
	ChargeID string `json:"charge_id"`
}

type chargeDTO struct {
	ID             string `json:"id"`
	IdempotencyKey string `json:"idempotency_key"`
	OrderID        string `json:"order_id"`
	Amount         string `json:"amount"`
	Currency       string `json:"currency"`
	PaymentMethod  string `json:"payment_method"`
	Status         string `json:"status"`
	FailureCode    string `json:"failure_code"`
	RefundedAmount string `json:"refunded_amount"`
	DisputedAmount string `json:"disputed_amount"`
	CreatedAt      string `json:"created_at"`
	// The hold's fields; a provider without holds leaves them out.
	CaptureMethod  string `json:"capture_method"`
	AmountCaptured string `json:"amount_captured"`
	CaptureBefore  string `json:"capture_before"`
}

type chargeListDTO struct {
	Data    []chargeDTO `json:"data"`
	HasMore bool        `json:"has_more"`
}

type refundRequestDTO struct {
	ChargeID string `json:"charge_id"`
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
	Reason   string `json:"reason"`
}

type refundDTO struct {
	ID             string `json:"id"`
	IdempotencyKey string `json:"idempotency_key"`
	ChargeID       string `json:"charge_id"`
	OrderID        string `json:"order_id"`
	Amount         string `json:"amount"`
	Currency       string `json:"currency"`
	Status         string `json:"status"`
	CreatedAt      string `json:"created_at"`
}

type refundListDTO struct {
	Data    []refundDTO `json:"data"`
	HasMore bool        `json:"has_more"`
}

type disputeDTO struct {
	ID             string  `json:"id"`
	ChargeID       string  `json:"charge_id"`
	IdempotencyKey string  `json:"idempotency_key"`
	OrderID        string  `json:"order_id"`
	Amount         string  `json:"amount"`
	Currency       string  `json:"currency"`
	Status         string  `json:"status"`
	Reason         string  `json:"reason"`
	CreatedAt      string  `json:"created_at"`
	ClosedAt       *string `json:"closed_at"`
	EvidenceDueBy  string  `json:"evidence_due_by"` // absent: no date named
}

type disputeListDTO struct {
	Data []disputeDTO `json:"data"`
}

type errorDTO struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func fromChargeRequest(r domain.ChargeRequest) (chargeRequestDTO, error) {
	amount, err := formatAmount(r.Amount, r.Currency)
	if err != nil {
		return chargeRequestDTO{}, fmt.Errorf("charge %s: %w", r.IdempotencyKey, err)
	}
	dto := chargeRequestDTO{OrderID: r.OrderID, Amount: amount, Currency: r.Currency, PaymentMethod: r.PaymentMethod}
	if r.CaptureMethod == domain.CaptureManual {
		dto.CaptureMethod = string(r.CaptureMethod)
	}
	return dto, nil
}

func fromCaptureRequest(r domain.CaptureRequest) (captureRequestDTO, error) {
	amount, err := formatAmount(r.Amount, r.Currency)
	if err != nil {
		return captureRequestDTO{}, fmt.Errorf("capture %s: %w", r.IdempotencyKey, err)
	}
	return captureRequestDTO{ChargeID: r.ChargeID, Amount: amount, Currency: r.Currency}, nil
}

func fromRefundRequest(r domain.ProviderRefundRequest) (refundRequestDTO, error) {
	amount, err := formatAmount(r.Amount, r.Currency)
	if err != nil {
		return refundRequestDTO{}, fmt.Errorf("refund %s: %w", r.IdempotencyKey, err)
	}
	return refundRequestDTO{ChargeID: r.ChargeID, Amount: amount, Currency: r.Currency, Reason: r.Reason}, nil
}

// formatAmount writes d at the currency's full scale. It refuses rather than
// rounds an amount finer than the currency allows: rounding would charge a
// different sum than the one asked for.
func formatAmount(d decimal.Decimal, currency string) (string, error) {
	c, err := domain.ParseCurrency(currency)
	if err != nil {
		return "", err
	}
	if !d.IsPositive() || !d.Equal(d.Round(c.Scale())) {
		return "", &domain.ValidationError{Field: "amount", Reason: fmt.Sprintf("%s is not a positive amount of %s", d, c)}
	}
	return domain.FormatAmount(d, c), nil
}

// processingError is the failure code of a charge the provider's processor
// failed on before charging anything: no decline, so payd calls it
// domain.NotCharged (the payment did not complete, the key may pay again).
const processingError = "processing_error"

func (d chargeDTO) toCharge() (domain.Charge, error) {
	amount, err := decimal.NewFromString(d.Amount)
	if err != nil {
		return domain.Charge{}, fmt.Errorf("charge amount %q: %w", d.Amount, err)
	}
	refunded, err := optionalAmount(d.RefundedAmount)
	if err != nil {
		return domain.Charge{}, fmt.Errorf("charge refunded_amount %q: %w", d.RefundedAmount, err)
	}
	disputed, err := optionalAmount(d.DisputedAmount)
	if err != nil {
		return domain.Charge{}, fmt.Errorf("charge disputed_amount %q: %w", d.DisputedAmount, err)
	}
	status, err := parseChargeStatus(d.Status)
	if err != nil {
		return domain.Charge{}, err
	}
	created, err := time.Parse(time.RFC3339Nano, d.CreatedAt)
	if err != nil {
		return domain.Charge{}, fmt.Errorf("charge created_at: %w", err)
	}
	code := d.FailureCode
	if status == domain.ChargeFailed && code == processingError {
		code = domain.NotCharged
	}
	ch := domain.Charge{
		ID: d.ID, IdempotencyKey: d.IdempotencyKey, OrderID: d.OrderID,
		Amount: amount, Currency: d.Currency, PaymentMethod: d.PaymentMethod,
		Status: status, FailureCode: code, RefundedAmount: refunded, DisputedAmount: disputed,
		CreatedAt: created.UTC(), CaptureMethod: domain.CaptureAutomatic,
	}
	if err := d.readHold(&ch); err != nil {
		return domain.Charge{}, err
	}
	return ch, nil
}

// readHold reads the charge's hold fields into ch. A charge that says
// nothing of them is automatic, and an automatic charge took its whole
// amount if it succeeded. What a manual charge says must hang together:
// an amount captured is never more than the charge, and never of a charge
// that did not succeed; an authorized one names its capture_before. Only
// a manual charge is ever authorized or voided.
func (d chargeDTO) readHold(ch *domain.Charge) error {
	if d.CaptureMethod != "" {
		ch.CaptureMethod = domain.CaptureMethod(d.CaptureMethod)
		if !ch.CaptureMethod.Valid() {
			return fmt.Errorf("charge capture_method %q is not automatic or manual", d.CaptureMethod)
		}
	}
	manual := ch.CaptureMethod == domain.CaptureManual
	if (ch.Status == domain.ChargeAuthorized || ch.Status == domain.ChargeVoided) && !manual {
		return fmt.Errorf("charge status %q of an automatic charge", ch.Status)
	}
	if !manual {
		// An automatic charge took its whole amount if it succeeded: its
		// amount_captured says nothing payd needs.
		if ch.Status == domain.ChargeSucceeded {
			ch.AmountCaptured = ch.Amount
		}
		return nil
	}
	captured, err := optionalAmount(d.AmountCaptured)
	if err != nil {
		return fmt.Errorf("charge amount_captured %q: %w", d.AmountCaptured, err)
	}
	switch {
	case d.AmountCaptured == "" && ch.Status == domain.ChargeSucceeded:
		return fmt.Errorf("a captured manual charge without amount_captured")
	case captured.IsNegative() || captured.GreaterThan(ch.Amount):
		return fmt.Errorf("charge amount_captured %s outside 0..%s", captured, ch.Amount)
	case !captured.IsZero() && ch.Status != domain.ChargeSucceeded:
		return fmt.Errorf("charge amount_captured %s of a %s charge", captured, ch.Status)
	}
	ch.AmountCaptured = captured
	if ch.Status == domain.ChargeAuthorized {
		before, err := time.Parse(time.RFC3339Nano, d.CaptureBefore)
		if err != nil {
			return fmt.Errorf("charge capture_before: %w", err)
		}
		ch.CaptureBefore = before.UTC()
	}
	return nil
}

// optionalAmount reads an amount a provider may leave out (zero then).
func optionalAmount(s string) (decimal.Decimal, error) {
	if s == "" {
		return decimal.Zero, nil
	}
	return decimal.NewFromString(s)
}

func (d refundDTO) toRefund() (domain.ProviderRefund, error) {
	amount, err := decimal.NewFromString(d.Amount)
	if err != nil {
		return domain.ProviderRefund{}, fmt.Errorf("refund amount %q: %w", d.Amount, err)
	}
	status, err := parseStatus(d.Status)
	if err != nil {
		return domain.ProviderRefund{}, err
	}
	created, err := time.Parse(time.RFC3339Nano, d.CreatedAt)
	if err != nil {
		return domain.ProviderRefund{}, fmt.Errorf("refund created_at: %w", err)
	}
	return domain.ProviderRefund{
		ID: d.ID, IdempotencyKey: d.IdempotencyKey, ChargeID: d.ChargeID, OrderID: d.OrderID,
		Amount: amount, Currency: d.Currency, Status: status, CreatedAt: created.UTC(),
	}, nil
}

func (d disputeDTO) toDispute() (domain.ProviderDispute, error) {
	amount, err := decimal.NewFromString(d.Amount)
	if err != nil {
		return domain.ProviderDispute{}, fmt.Errorf("dispute amount %q: %w", d.Amount, err)
	}
	status := domain.DisputeStatus(d.Status)
	if !status.Valid() {
		return domain.ProviderDispute{}, fmt.Errorf("unknown dispute status %q", d.Status)
	}
	created, err := time.Parse(time.RFC3339Nano, d.CreatedAt)
	if err != nil {
		return domain.ProviderDispute{}, fmt.Errorf("dispute created_at: %w", err)
	}
	var closed time.Time
	if d.ClosedAt != nil && *d.ClosedAt != "" {
		if closed, err = time.Parse(time.RFC3339Nano, *d.ClosedAt); err != nil {
			return domain.ProviderDispute{}, fmt.Errorf("dispute closed_at: %w", err)
		}
		closed = closed.UTC()
	}
	var due time.Time
	if d.EvidenceDueBy != "" {
		if due, err = time.Parse(time.RFC3339Nano, d.EvidenceDueBy); err != nil {
			return domain.ProviderDispute{}, fmt.Errorf("dispute evidence_due_by: %w", err)
		}
		due = due.UTC()
	}
	return domain.ProviderDispute{
		ID: d.ID, ChargeID: d.ChargeID, IdempotencyKey: d.IdempotencyKey, OrderID: d.OrderID,
		Amount: amount, Currency: d.Currency, Status: status, Reason: d.Reason,
		CreatedAt: created.UTC(), ClosedAt: closed, EvidenceDueBy: due,
	}, nil
}

// parseChargeStatus is parseStatus, and a hold's statuses.
func parseChargeStatus(s string) (domain.ChargeStatus, error) {
	switch st := domain.ChargeStatus(s); st {
	case domain.ChargeAuthorized, domain.ChargeVoided:
		return st, nil
	}
	return parseStatus(s)
}

// parseStatus accepts only the statuses payd knows, so an unexpected one is
// treated as an unreadable reply rather than silently as "not succeeded".
func parseStatus(s string) (domain.ChargeStatus, error) {
	switch st := domain.ChargeStatus(s); st {
	case domain.ChargePending, domain.ChargeSucceeded, domain.ChargeFailed:
		return st, nil
	}
	return "", fmt.Errorf("unknown status %q", s)
}
