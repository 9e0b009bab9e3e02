package handler

import (
	"cmp"
	"encoding/json"
	"time"

	"github.com/payd/payd/domain"
)

// timeFormat is RFC 3339 in UTC with microseconds: the precision payd stores.
const timeFormat = "2006-01-02T15:04:05.000000Z07:00"

func stamp(t time.Time) string { return t.UTC().Format(timeFormat) }

func stampPtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := stamp(*t)
	return &s
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

type itemJSON struct {
	SKU       string `json:"sku"`
	Name      string `json:"name"`
	Quantity  int64  `json:"quantity"`
	UnitPrice string `json:"unit_price"`
}

type attemptJSON struct {
	ID               string  `json:"id"`
	RequestID        string  `json:"request_id"`
	Status           string  `json:"status"`
	ProviderChargeID *string `json:"provider_charge_id,omitempty"`
	// FailureCode, for operators, is the provider's reason for a decline.
	FailureCode *string `json:"failure_code,omitempty"`
	Amount      string  `json:"amount"`
	CreatedAt   string  `json:"created_at"`
}

type orderJSON struct {
	ID             string     `json:"id"`
	CustomerID     *string    `json:"customer_id"` // null: a guest order the merchant created
	Status         string     `json:"status"`
	Amount         string     `json:"amount"`
	Currency       string     `json:"currency"`
	Items          []itemJSON `json:"items"`
	PayRequestID   *string    `json:"pay_request_id"`
	PaidAt         *string    `json:"paid_at"`
	RefundedAmount string     `json:"refunded_amount"`
	// RefundPending is what refunds in flight reserved: not money yet.
	RefundPending string `json:"refund_pending_amount"`
	CreatedAt     string `json:"created_at"`
	UpdatedAt     string `json:"updated_at"`
	// NextAction: a 202 whose payment waits for the customer (3-D Secure).
	NextAction *nextActionJSON `json:"next_action,omitempty"`
	// ClientSecret, on the creation's answer and every answer to the
	// merchant, is the order's own bearer credential (ADR 0059).
	ClientSecret string `json:"client_secret,omitempty"`
	// FulfillmentStatus is how much of the paid order has shipped;
	// Shipments, on the order's own read, its parcels (ADR 0060).
	FulfillmentStatus string          `json:"fulfillment_status"`
	Shipments         *[]shipmentJSON `json:"shipments,omitempty"`
	// CaptureMethod is how a successful pay takes the money; a manual
	// order is authorized (held) until captured, before CaptureBefore;
	// CapturedAmount is what the charge took (ADR 0060).
	CaptureMethod  string  `json:"capture_method"`
	CapturedAmount string  `json:"captured_amount"`
	CaptureBefore  *string `json:"capture_before"`
}

// nextActionJSON is what the checkout page needs to let the customer
// complete a payment (ADR 0019).
type nextActionJSON struct {
	Type         string  `json:"type"`
	ClientSecret string  `json:"client_secret"`
	RedirectURL  *string `json:"redirect_url"`
}

func toNextAction(a *domain.CustomerAction) *nextActionJSON {
	if a == nil {
		return nil
	}
	return &nextActionJSON{Type: a.Type, ClientSecret: a.ClientSecret, RedirectURL: strPtr(a.RedirectURL)}
}

func toOrderJSON(o domain.Order) orderJSON {
	items := make([]itemJSON, len(o.Items))
	for i, it := range o.Items {
		items[i] = itemJSON{SKU: it.SKU, Name: it.Name, Quantity: it.Quantity, UnitPrice: domain.FormatAmount(it.UnitPrice, o.Currency)}
	}
	return orderJSON{
		ID: o.ID, CustomerID: strPtr(o.CustomerID), Status: string(o.Status),
		Amount: domain.FormatAmount(o.Amount, o.Currency), Currency: string(o.Currency), Items: items,
		PayRequestID: strPtr(o.PayRequestID), PaidAt: stampPtr(o.PaidAt),
		RefundedAmount: domain.FormatAmount(o.RefundedAmount, o.Currency),
		RefundPending:  domain.FormatAmount(o.RefundPending, o.Currency),
		CreatedAt:      stamp(o.CreatedAt), UpdatedAt: stamp(o.UpdatedAt),
		NextAction: toNextAction(o.Action), FulfillmentStatus: string(o.Fulfillment),
		CaptureMethod:  string(cmp.Or(o.CaptureMethod, domain.CaptureAutomatic)),
		CapturedAmount: domain.FormatAmount(o.Captured(), o.Currency),
		CaptureBefore:  stampPtr(heldUntil(o)),
	}
}

// heldUntil is when an authorized order's hold lapses; nil for any other.
func heldUntil(o domain.Order) *time.Time {
	if o.Status != domain.StatusAuthorized {
		return nil
	}
	return o.CaptureBefore
}

// toAttemptJSON renders an attempt; the provider's charge ID is for operators only.
func toAttemptJSON(a domain.Attempt, withCharge bool) attemptJSON {
	j := attemptJSON{ID: a.ID, RequestID: a.RequestID, Status: string(a.Status), Amount: domain.FormatAmount(a.Amount, a.Currency), CreatedAt: stamp(a.CreatedAt)}
	if withCharge {
		j.ProviderChargeID, j.FailureCode = strPtr(a.ProviderChargeID), strPtr(a.FailureCode)
	}
	return j
}

// orderWithAttempts renders GET /v1/orders/{id}: attempts is always present.
type orderWithAttempts struct {
	orderJSON
	Attempts []attemptJSON `json:"attempts"`
}

func toOrderWithAttempts(o domain.Order, attempts []domain.Attempt) orderWithAttempts {
	out := orderWithAttempts{orderJSON: toOrderJSON(o), Attempts: make([]attemptJSON, len(attempts))}
	for i, a := range attempts {
		out.Attempts[i] = toAttemptJSON(a, false)
	}
	return out
}

type customerJSON struct {
	ID        string `json:"id"`
	Email     string `json:"email"`
	Name      string `json:"name"`
	CreatedAt string `json:"created_at"`
}

type registrationJSON struct {
	Customer customerJSON `json:"customer"`
	Token    string       `json:"token"`
}

type pageJSON struct {
	Data       []orderJSON `json:"data"`
	NextCursor *string     `json:"next_cursor"`
}

type recordJSON struct {
	Key       string          `json:"key"`
	Status    string          `json:"status"`
	Method    string          `json:"method"`
	Path      string          `json:"path"`
	CreatedAt string          `json:"created_at"`
	ExpiresAt string          `json:"expires_at"`
	Response  *storedResponse `json:"response"`
}

type storedResponse struct {
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body,omitempty"`
	Sealed bool            `json:"sealed,omitempty"`
}

func toRecordJSON(r domain.Record) recordJSON {
	out := recordJSON{Key: r.Key, Status: string(r.Status), Method: r.Method, Path: r.Path, CreatedAt: stamp(r.CreatedAt), ExpiresAt: stamp(r.ExpiresAt)}
	if r.ResponseStatus != 0 {
		out.Response = &storedResponse{Status: r.ResponseStatus, Sealed: r.Sealed}
		if json.Valid(r.ResponseBody) {
			out.Response.Body = r.ResponseBody
		}
	}
	return out
}
