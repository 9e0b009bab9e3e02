// Package notify tells the merchant's endpoints of their orders' changes
// (docs/adr/0053-telling-the-shop.md): it renders each outbox event's body
// once, fans it out to the endpoints that want it, and delivers it as a
// Standard Webhooks request under a lease, retrying with backoff. It
// imports domain, repository's stores through small ports, and service's
// job loop; never the HTTP layer nor the wiring.
package notify

import (
	"cmp"
	"encoding/json"
	"time"

	"github.com/payd/payd/domain"
)

// timeFormat is the admin API's: RFC 3339 in UTC with microseconds.
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

// Body is what a delivery sends: the event, what caused it, and the order
// as GET /v1/admin/orders/{id} shows it (the AdminOrder schema), as the
// change left it.
type Body struct {
	ID        string    `json:"id"` // also the webhook-id header
	Type      string    `json:"type"`
	CreatedAt string    `json:"created_at"`
	Cause     causeJSON `json:"cause"`
	Order     orderJSON `json:"order"`
	// Shipment is the parcel an order.shipped event tells of; absent from
	// every other event.
	Shipment *shipmentJSON `json:"shipment,omitempty"`
}

type causeJSON struct {
	Kind string `json:"kind"`
	Ref  string `json:"ref"`
}

// orderJSON is the admin API's AdminOrder: handler's adminOrderJSON, which
// handler's TestNotifyBodyIsAdminOrder holds it to.
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
	CreatedAt      string     `json:"created_at"`
	UpdatedAt      string     `json:"updated_at"`
	Fulfillment    string     `json:"fulfillment_status"`
	CaptureMethod  string     `json:"capture_method"`
	CapturedAmount string     `json:"captured_amount"`
	CaptureBefore  *string    `json:"capture_before"` // an authorized order's only
	Money          booksJSON  `json:"money"`
}

type itemJSON struct {
	SKU       string `json:"sku"`
	Name      string `json:"name"`
	Quantity  int64  `json:"quantity"`
	UnitPrice string `json:"unit_price"`
}

type booksJSON struct {
	Authorized string `json:"authorized"`
	Charged    string `json:"charged"`
	Refunded   string `json:"refunded"`
	Disputed   string `json:"disputed"`
	Lost       string `json:"lost"`
	Net        string `json:"net"`
}

// shipmentJSON is a shipment as the API shows it (the Shipment schema).
type shipmentJSON struct {
	ID             string         `json:"id"`
	OrderID        string         `json:"order_id"`
	Items          []shipLineJSON `json:"items"`
	Carrier        *string        `json:"carrier"`
	TrackingNumber *string        `json:"tracking_number"`
	CreatedAt      string         `json:"created_at"`
}

type shipLineJSON struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
}

// Render is ev's body, from its snapshot: the same bytes for the same
// event, whichever replica renders it.
func Render(ev domain.NotifyEvent) ([]byte, error) {
	o, c := ev.Order, ev.Order.Currency
	items := make([]itemJSON, len(o.Items))
	for i, it := range o.Items {
		items[i] = itemJSON{SKU: it.SKU, Name: it.Name, Quantity: it.Quantity, UnitPrice: domain.FormatAmount(it.UnitPrice, c)}
	}
	m := ev.Money
	var shipment *shipmentJSON
	if sh := ev.Shipment; sh != nil {
		lines := make([]shipLineJSON, len(sh.Items))
		for i, l := range sh.Items {
			lines[i] = shipLineJSON{SKU: l.SKU, Quantity: l.Quantity}
		}
		shipment = &shipmentJSON{ID: sh.ID, OrderID: sh.OrderID, Items: lines, Carrier: strPtr(sh.Carrier),
			TrackingNumber: strPtr(sh.TrackingNumber), CreatedAt: stamp(sh.CreatedAt)}
	}
	return json.Marshal(Body{Shipment: shipment, ID: ev.ID, Type: string(ev.Type), CreatedAt: stamp(ev.CreatedAt),
		Cause: causeJSON{Kind: string(ev.Cause.Kind), Ref: ev.Cause.Ref},
		Order: orderJSON{ID: o.ID, CustomerID: strPtr(o.CustomerID), Status: string(o.Status),
			Amount: domain.FormatAmount(o.Amount, c), Currency: string(c), Items: items,
			PayRequestID: strPtr(o.PayRequestID), PaidAt: stampPtr(o.PaidAt),
			RefundedAmount: domain.FormatAmount(o.RefundedAmount, c),
			CreatedAt:      stamp(o.CreatedAt), UpdatedAt: stamp(o.UpdatedAt), Fulfillment: string(o.Fulfillment),
			CaptureMethod: string(cmp.Or(o.CaptureMethod, domain.CaptureAutomatic)), CapturedAmount: domain.FormatAmount(o.Captured(), c),
			CaptureBefore: stampPtr(heldUntil(o)),
			Money: booksJSON{Authorized: domain.FormatAmount(m.Authorized, c), Charged: domain.FormatAmount(m.Charged, c), Refunded: domain.FormatAmount(m.Refunded, c),
				Disputed: domain.FormatAmount(m.Disputed, c), Lost: domain.FormatAmount(m.Lost, c), Net: domain.FormatAmount(m.Net, c)}}})
}

// heldUntil is when an authorized order's hold lapses; nil for any other.
func heldUntil(o domain.Order) *time.Time {
	if o.Status != domain.StatusAuthorized {
		return nil
	}
	return o.CaptureBefore
}
