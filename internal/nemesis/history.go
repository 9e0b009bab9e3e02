package nemesis

import (
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// OpKind is what a client asked payd to do.
type OpKind string

// The operations clients record.
const (
	OpCreate  OpKind = "create"  // POST /v1/orders
	OpPay     OpKind = "pay"     // POST /v1/orders/{id}/pay
	OpCancel  OpKind = "cancel"  // POST /v1/orders/{id}/cancel
	OpRefund  OpKind = "refund"  // POST /v1/admin/orders/{id}/refund
	OpRequest OpKind = "request" // GET /v1/requests/{key}
	OpRead    OpKind = "read"    // GET /v1/orders/{id} (or the admin order view)
	OpShip    OpKind = "ship"    // POST /v1/orders/{id}/shipments, the merchant's
)

// opKinds is the order in which summaries list the kinds.
var opKinds = []OpKind{OpCreate, OpPay, OpCancel, OpRefund, OpShip, OpRequest, OpRead}

// Op is one request a client sent and what it heard back, with the times
// it was sent and answered: the unit of the history the checker reads.
type Op struct {
	ID      int // set by History.Add
	Client  int
	Kind    OpKind
	OrderID string // for OpCreate, the order a 201 created
	Key     string // Idempotency-Key sent (pay, cancel, refund, ship); for OpRequest the key looked up
	Amount  string // refund amount asked for, "" = full
	Method  string
	Path    string
	ReqBody []byte

	Status     int // 0 when there was no answer (transport error or client timeout)
	Body       []byte
	RetryAfter string // the Retry-After header
	Err        string // no answer: why

	Start, End time.Time
	// Settled marks a request sent after the world was quiet again (the
	// final sweep): its answer must be final.
	Settled bool
}

// History is the record of every operation of a run. Clients add to it
// concurrently.
type History struct {
	mu  sync.Mutex
	ops []Op
}

// Add records op, gives it the next ID and returns that ID.
func (h *History) Add(op Op) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.ID = len(h.ops) + 1
	h.ops = append(h.ops, op)
	return op.ID
}

// Ops returns a copy of the history ordered by start time (ties by ID).
func (h *History) Ops() []Op {
	h.mu.Lock()
	ops := slices.Clone(h.ops)
	h.mu.Unlock()
	sortOps(ops)
	return ops
}

func sortOps(ops []Op) {
	slices.SortStableFunc(ops, func(a, b Op) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		return a.ID - b.ID
	})
}

// Charge is what the provider's own records say of one charge, read at the
// end (the sandbox's books or the Stripe fake's).
type Charge struct {
	ID, OrderID, Key string // Key: the provider idempotency key payd used, if known
	Amount           decimal.Decimal
	Succeeded        bool
	Refunded         decimal.Decimal
	Created          time.Time // zero when the provider does not say
}

// kept reports a successful charge the customer has not had back in full.
func (c Charge) kept() bool { return c.Succeeded && c.Refunded.LessThan(c.Amount) }

// OrderState is payd's final view of an order (admin API or database, read
// at the end).
type OrderState struct {
	ID       string
	Status   domain.OrderStatus
	Amount   decimal.Decimal
	Refunded decimal.Decimal
	ChargeID string // the charge payd says paid it, if any
	// Told is the order's outbox events as payd's admin timeline shows
	// them, by seq; RefundsBooked how many refunds its ledger books
	// (payd's and outside ones); Attempts how many payment attempts it has.
	Told          []Told
	RefundsBooked int
	Attempts      int
	// Books is the order's ledger as payd's view of it adds it up: what
	// payd's money summary (World.Payd) counts of this order.
	Books Money
	// Fulfillment is the order's fulfillment_status, Lines its lines'
	// shipped counts and Shipments the shipments it holds, as payd's
	// database holds them (InvShipped); "" when the world did not read
	// them, and then the order is not judged on them.
	Fulfillment domain.FulfillmentStatus
	Lines       []Line
	Shipments   []Shipment
	// ReadAt is when payd's view of the order was asked for (zero: after
	// every arrival). payd goes on working while it is read: an event of
	// the order that reached the shop after then may be newer than Told.
	ReadAt time.Time
}

// Line is one line of an order: its SKU ("" for a custom line, never
// shipped), how many units it holds and how many its shipments shipped.
type Line struct {
	SKU               string
	Quantity, Shipped int64
}

// Shipment is one shipment an order holds: its ID, the idempotency key
// it was made under and the units it shipped, by SKU.
type Shipment struct {
	ID, Key string
	Units   map[string]int64
}

// Told is one outbox event of an order: its type, its number among the
// order's changes, the order status its snapshot shows and the money it
// tells.
type Told struct {
	ID      string
	Type    domain.NotifyType
	Seq     int64
	Status  domain.OrderStatus
	Amounts Amounts
}

// Money is a money summary: one currency is enough for the runs.
type Money struct{ Charged, Refunded decimal.Decimal }

// Amounts is the money an order event tells, as its transaction saw it
// (ADR 0053): the order's refunded_amount (what the provider confirmed
// given back of the order's payment, ADR 0055) and the order's ledger's
// sums (its body's money.charged and money.refunded).
type Amounts struct {
	Refunded decimal.Decimal
	Books    Money
}

// World is everything the checker judges: the history and, read once the
// world settled, the provider's records and payd's.
type World struct {
	Setup    string // the TestNemesis subtest ("sqlite", "mysql", "galera", "stripe"), for the replay command
	Seed     int64
	MySQLDSN string // the MariaDB the mysql setup ran on, for the replay command (which hides its password)
	Ops      []Op
	Charges  []Charge
	Orders   map[string]OrderState
	Payd     Money // payd's money summary (the admin books)
	Provider Money // the provider's books
	// Merchant is what the shop heard of payd's order events, and what
	// payd shows operators of those it has not delivered
	// (InvDelivered); nil when the setup has no merchant.
	Merchant *Merchant
	// Stock is each product with counted stock the clients bought from,
	// as payd holds it once the world settled (InvStock).
	Stock []Stock
}

// Stock is one product with counted stock, read once the world settled:
// what the merchant put in, what is left, and what each order's lines
// took of it.
type Stock struct {
	SKU string
	// Received is every unit the merchant put in: the stock the product
	// was created with and every adjustment since.
	Received int64
	// Left is the product's stock in the database (products.stock);
	// Shown what the storefront shows of it (GET /v1/products/{sku}), nil
	// when it showed no count.
	Left  int64
	Shown *int64
	// Taken is, by order, how many units the order's lines took of the
	// product (order_items.stock_taken), for every order that took some;
	// Closed marks those of them that are cancelled or expired, which
	// gave their units back.
	Taken  map[string]int64
	Closed map[string]bool
}

// Merchant is the shop's side of the order events: the types its endpoint
// subscribes to, every request that arrived at it, and the deliveries
// payd's admin list shows pending or failed, by event.
type Merchant struct {
	Subscribed []domain.NotifyType
	Arrivals   []Arrival
	// Shown is each event's delivery status as GET
	// /v1/admin/endpoints/{id}/deliveries?status=pending|failed lists it.
	Shown map[string]domain.DeliveryStatus
}

// Arrival is one request the merchant's receiver read in full: the
// webhook-id it carried, the event its body names, a hash of the body,
// whether its signature verified, when it arrived and through which
// replica's link.
type Arrival struct {
	WebhookID string
	EventID   string // the body's "id"; "" when the body is no event
	OrderID   string // the body's order
	BodyHash  string
	Verified  bool
	At        time.Time
	Via       string // the replica whose link carried it
	// Amounts is the money the body tells (InvConfirmedMoney); nil
	// when the body carries no amounts that could be read.
	Amounts *Amounts
}

// answerClass sorts an answer by what it promises about the key it was sent
// under.
type answerClass int

const (
	// ansNone: nothing came back (transport error, client timeout). It
	// proves nothing either way and may happen at any time.
	ansNone answerClass = iota
	// ansTransient: refused before any work, to be retried after Retry-After
	// (503 service_unavailable, 429 rate_limited). Allowed at any time.
	ansTransient
	// ansPending: the key's request is still running (202 processing, 409
	// idempotency_key_in_use with Retry-After). Allowed only before the
	// key's final answer.
	ansPending
	// ansRetryable: a final answer that leaves the key free to run again (a
	// decline, a conflict, a refusal payd made itself): the next request
	// under the key is a new execution, whose answer may differ.
	ansRetryable
	// ansBinding: a final answer stored for good (a success, or a refund's
	// provider decision): every later answer under the key is this one,
	// byte for byte.
	ansBinding
)

func (c answerClass) String() string {
	return [...]string{"no answer", "transient", "pending", "retryable final", "final"}[c]
}

// final reports whether an answer of class c is a final answer.
func (c answerClass) final() bool { return c >= ansRetryable }

// classOf classifies op's answer as payd documents its answers
// (docs/guarantees.md#idempotency-rules, #pay-answers).
func classOf(op Op) answerClass {
	switch st := op.Status; {
	case st == 0:
		return ansNone
	case codeOf(op.Body) == "payment_outcome_unknown":
		// A 503 with Retry-After (ADR 0047), yet no refusal before any
		// work: the request ran and may have moved money; the key stays
		// free and its retry learns the outcome.
		return ansRetryable
	case (st == http.StatusServiceUnavailable || st == http.StatusTooManyRequests) && op.RetryAfter != "":
		return ansTransient
	case st == http.StatusAccepted, st == http.StatusConflict && op.RetryAfter != "":
		return ansPending
	case st >= 200 && st < 300:
		return ansBinding
	case op.Kind == OpRefund && st == http.StatusBadGateway &&
		(codeOf(op.Body) == "refund_refused" || codeOf(op.Body) == "payment_amount_mismatch"):
		return ansBinding // the provider's decision is the key's one answer
	}
	return ansRetryable
}

// keyed reports whether op is an idempotent request whose answers the
// per-key invariants judge.
func keyed(op Op) bool {
	return op.Key != "" && (op.Kind == OpPay || op.Kind == OpCancel || op.Kind == OpRefund || op.Kind == OpShip)
}

// orderJSON is the part of payd's order rendering the checker reads.
type orderJSON struct {
	ID           string  `json:"id"`
	Status       string  `json:"status"`
	Amount       string  `json:"amount"`
	PayRequestID *string `json:"pay_request_id"`
}

// orderOf reads the order an answer describes: the body itself (pay,
// cancel, GET /v1/orders/{id}) or its "order" member (a refund's answer,
// the admin order view).
func orderOf(body []byte) (orderJSON, bool) {
	var b struct {
		orderJSON
		Order *orderJSON `json:"order"`
	}
	if json.Unmarshal(body, &b) != nil {
		return orderJSON{}, false
	}
	if b.Order != nil && b.Order.Status != "" {
		return *b.Order, true
	}
	return b.orderJSON, b.Status != ""
}

// codeOf is the problem code of a problem answer, "" otherwise.
func codeOf(body []byte) string {
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(body, &p)
	return p.Code
}
