package domain

import (
	"errors"
	"math/rand/v2"
	"slices"
	"time"
)

// Errors of the endpoints and their deliveries.
var (
	ErrEndpointNotFound    = errors.New("endpoint not found")
	ErrNotifyEventNotFound = errors.New("event not found")
)

// NotifyType is the type of an event payd tells a merchant's endpoints
// (docs/adr/0053-telling-the-shop.md). The zero value is invalid.
type NotifyType string

// The event types. Each is written by the transaction of the change it
// tells, so one committed change has exactly one event.
const (
	NotifyOrderPaid          NotifyType = "order.paid"           // a charge paid the order
	NotifyOrderPaymentFailed NotifyType = "order.payment_failed" // an attempt was declined: the order is pending again
	NotifyOrderCancelled     NotifyType = "order.cancelled"
	NotifyOrderExpired       NotifyType = "order.expired"
	NotifyOrderRefunded      NotifyType = "order.refunded"       // money went back, by payd or outside it, in part or in full
	NotifyOrderDisputed      NotifyType = "order.disputed"       // a dispute opened: the bank took the money back
	NotifyOrderDisputeClosed NotifyType = "order.dispute_closed" // the dispute was decided, won or lost
	// NotifyOrderRefundReversed: the provider took back a refund it had
	// confirmed; the order's refunded_amount is lower again.
	NotifyOrderRefundReversed NotifyType = "order.refund_reversed"
	// NotifyOrderShipped: the merchant shipped some or all of the paid
	// order; the event carries the shipment.
	NotifyOrderShipped NotifyType = "order.shipped"
	// NotifyOrderAuthorized: a manual-capture order's pay succeeded and
	// its money is held until the merchant captures it.
	NotifyOrderAuthorized NotifyType = "order.authorized"
)

// NotifyTypes lists every event type, in the order documentation shows them.
var NotifyTypes = []NotifyType{NotifyOrderPaid, NotifyOrderPaymentFailed, NotifyOrderCancelled, NotifyOrderExpired,
	NotifyOrderRefunded, NotifyOrderDisputed, NotifyOrderDisputeClosed, NotifyOrderRefundReversed, NotifyOrderShipped, NotifyOrderAuthorized}

// Valid reports whether t is a known event type.
func (t NotifyType) Valid() bool { return slices.Contains(NotifyTypes, t) }

// CauseKind says what made a change an event tells of.
type CauseKind string

// The causes of a change.
const (
	CausePayRequest     CauseKind = "pay_request"    // a pay call; the ref is its Idempotency-Key
	CauseWebhook        CauseKind = "webhook"        // a provider webhook; the ref is its event id
	CauseOperator       CauseKind = "operator"       // an operator through the admin API; the ref is the operator
	CauseRecoverer      CauseKind = "recoverer"      // payd's recoverer settled an unknown outcome; the ref is the attempt
	CauseExpiry         CauseKind = "expiry"         // the expiry job
	CauseReconciliation CauseKind = "reconciliation" // a reconciliation run; the ref is the run
	CauseCustomer       CauseKind = "customer"       // a customer's own call (a cancel, a refund request); the ref is its request key, else the customer's ID
	CauseMerchant       CauseKind = "merchant"       // the merchant's server, with its key (a cancel); the ref is its request key
)

// CauseKinds lists every cause.
var CauseKinds = []CauseKind{CausePayRequest, CauseWebhook, CauseOperator, CauseRecoverer, CauseExpiry,
	CauseReconciliation, CauseCustomer, CauseMerchant}

// Valid reports whether k is a known cause.
func (k CauseKind) Valid() bool { return slices.Contains(CauseKinds, k) }

// Cause is what made a change: its kind, and a reference within that kind.
type Cause struct {
	Kind CauseKind
	Ref  string
}

// NotifyEvent is one change of an order as the outbox holds it. Seq is the
// order's version that the change left: events of one order are totally
// ordered by it, and (OrderID, Seq) is unique.
type NotifyEvent struct {
	ID        string
	OrderID   string
	Seq       int64
	Type      NotifyType
	Cause     Cause
	Body      []byte // rendered once, at fan-out; nil before
	FannedOut bool
	CreatedAt time.Time

	// Order and Money are the order as the change left it, and its
	// ledger's sums: the snapshot the change's transaction took, with the
	// order's immutable columns and items. The body is rendered from them.
	Order Order
	Money Books
	// Shipment is the shipment an order.shipped event tells of; nil for
	// every other event.
	Shipment *Shipment
}

// EndpointStatus says whether an endpoint receives events.
type EndpointStatus string

// The statuses of an endpoint.
const (
	EndpointEnabled  EndpointStatus = "enabled"
	EndpointDisabled EndpointStatus = "disabled" // by an operator, or by the endpoint's own 410
)

// EndpointStatuses lists every status.
var EndpointStatuses = []EndpointStatus{EndpointEnabled, EndpointDisabled}

// Valid reports whether s is a known status.
func (s EndpointStatus) Valid() bool { return slices.Contains(EndpointStatuses, s) }

// Endpoint is a merchant's URL that receives events of the types it lists.
// Secret signs every delivery; PreviousSecret signs beside it until
// PreviousUntil, after a rotation, and so does each of Older (secrets
// rotated away before it, less than SecretOverlap ago) until its own end.
type Endpoint struct {
	ID             string
	URL            string
	Description    string
	Events         []NotifyType
	Status         EndpointStatus
	DisabledReason string
	Secret         string
	PreviousSecret string
	PreviousUntil  *time.Time
	Older          []RetiredSecret
	FromEnv        bool // configured by PAYD_NOTIFY_URL, not through the API
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// EndpointChange is what an operator changes of an endpoint; nil leaves a
// field as it is.
type EndpointChange struct {
	URL         *string
	Description *string
	Events      []NotifyType // nil: unchanged
	Enabled     *bool
}

// Wants reports whether the endpoint receives events of type t.
func (e Endpoint) Wants(t NotifyType) bool {
	return e.Status == EndpointEnabled && slices.Contains(e.Events, t)
}

// RetiredSecret is a secret rotated away, signing until Until.
type RetiredSecret struct {
	Secret string
	Until  time.Time
}

// Retired returns every secret rotated away, newest first, still signing
// at now.
func (e Endpoint) Retired(now time.Time) []RetiredSecret {
	var out []RetiredSecret
	if e.PreviousSecret != "" && e.PreviousUntil != nil && now.Before(*e.PreviousUntil) {
		out = append(out, RetiredSecret{Secret: e.PreviousSecret, Until: *e.PreviousUntil})
	}
	for _, r := range e.Older {
		if now.Before(r.Until) {
			out = append(out, r)
		}
	}
	return out
}

// Secrets returns the secrets that sign a delivery sent at now: the
// current one, and every one rotated away during its overlap.
func (e Endpoint) Secrets(now time.Time) []string {
	out := []string{e.Secret}
	for _, r := range e.Retired(now) {
		out = append(out, r.Secret)
	}
	return out
}

// SecretOverlap is how long a rotated endpoint's old secret keeps signing.
const SecretOverlap = 24 * time.Hour

// DeliveryStatus is where one event's delivery to one endpoint stands.
type DeliveryStatus string

// The statuses of a delivery.
const (
	DeliveryPending   DeliveryStatus = "pending"   // to be sent, now or after its backoff
	DeliveryDelivered DeliveryStatus = "delivered" // the endpoint answered 2xx
	DeliveryFailed    DeliveryStatus = "failed"    // given up (3 days of retries, or the endpoint is gone): shown to operators
)

// DeliveryStatuses lists every status.
var DeliveryStatuses = []DeliveryStatus{DeliveryPending, DeliveryDelivered, DeliveryFailed}

// Valid reports whether s is a known status.
func (s DeliveryStatus) Valid() bool { return DeliveryMachine.Valid(s) }

// DeliveryEvent is something that happens to a delivery.
type DeliveryEvent string

// The events of the delivery machine.
const (
	DeliveryEventDeliver   DeliveryEvent = "deliver"   // the endpoint answered 2xx
	DeliveryEventRetry     DeliveryEvent = "retry"     // any other answer, or none: try again after the backoff
	DeliveryEventGiveUp    DeliveryEvent = "give_up"   // retried for DeliveryGiveUpAfter, or the endpoint answered 410
	DeliveryEventRedeliver DeliveryEvent = "redeliver" // an operator asked for the event again
)

// DeliveryMachine is the whole delivery machine. A delivery is created
// pending, one per event and endpoint; a pending delivery is sent under a
// lease (the lease is a column, not a status: a replica that died while
// sending leaves it pending, and its lease runs out).
var DeliveryMachine = newMachine("delivery", DeliveryStatuses, []DeliveryStatus{DeliveryPending},
	step[DeliveryStatus, DeliveryEvent]{DeliveryEventDeliver, []DeliveryStatus{DeliveryPending}, DeliveryDelivered},
	step[DeliveryStatus, DeliveryEvent]{DeliveryEventRetry, []DeliveryStatus{DeliveryPending}, DeliveryPending},
	step[DeliveryStatus, DeliveryEvent]{DeliveryEventGiveUp, []DeliveryStatus{DeliveryPending}, DeliveryFailed},
	step[DeliveryStatus, DeliveryEvent]{DeliveryEventRedeliver, []DeliveryStatus{DeliveryDelivered, DeliveryFailed}, DeliveryPending},
)

// From returns the statuses e may leave from.
func (e DeliveryEvent) From() []DeliveryStatus { return DeliveryMachine.From(e) }

// To returns the status e leads to.
func (e DeliveryEvent) To() DeliveryStatus { return DeliveryMachine.To(e) }

// Delivery is one event's delivery to one endpoint.
type Delivery struct {
	ID            string
	EndpointID    string
	EventID       string
	OrderID       string
	Seq           int64
	Status        DeliveryStatus
	Attempts      int
	NextAttemptAt time.Time
	LeasedUntil   *time.Time
	LastStatus    int    // the endpoint's last HTTP status; 0 when it gave none
	LastError     string // why the last attempt failed, without secrets
	DeliveredAt   *time.Time
	FailedAt      *time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// DeliveryAttempt is one request payd sent for a delivery, kept for the
// operators' delivery log.
type DeliveryAttempt struct {
	ID          string
	DeliveryID  string
	N           int
	StartedAt   time.Time
	Duration    time.Duration
	Status      int    // 0: no answer
	Error       string // the transport's error, or why the answer did not end the delivery
	RequestHead string // the request line and headers sent, signature included (it is no secret)
	Response    string // the answer's status line, headers and first bytes of its body
}

// DeliveryLog is one delivery with its event's type and every attempt
// made, as operators read it.
type DeliveryLog struct {
	Delivery
	Type     NotifyType
	Attempts []DeliveryAttempt
}

// ErrEndpointURLRefused is an endpoint URL naming an address payd refuses
// to reach (loopback, private, link-local: payd's own network), in
// production unless PAYD_NOTIFY_ALLOW_PRIVATE lists it.
var ErrEndpointURLRefused = errors.New("endpoint url refused")

// The delivery schedule: retries back off exponentially from
// DeliveryFirstRetry, at most DeliveryMaxBackoff apart, with full jitter,
// until DeliveryGiveUpAfter has passed since the event.
const (
	DeliveryFirstRetry  = 5 * time.Second
	DeliveryMaxBackoff  = 6 * time.Hour
	DeliveryGiveUpAfter = 72 * time.Hour
)

// NextDeliveryAttempt returns when a delivery whose attempt number attempts
// (1 for the first) just failed should be tried again, for an event created
// at created, and whether to try at all: false once DeliveryGiveUpAfter
// has passed. The wait is drawn from [b/2, b), b = DeliveryFirstRetry ·
// 2^(attempts-1) capped at DeliveryMaxBackoff, so replicas that failed
// together do not retry together. r is the jitter source (nil: math/rand).
func NextDeliveryAttempt(created, now time.Time, attempts int, r *rand.Rand) (time.Time, bool) {
	b := DeliveryFirstRetry
	for i := 1; i < attempts && b < DeliveryMaxBackoff; i++ {
		b *= 2
	}
	b = min(b, DeliveryMaxBackoff)
	half := int64(b / 2)
	var j int64
	if r != nil {
		j = r.Int64N(half)
	} else {
		j = rand.Int64N(half)
	}
	next := now.Add(time.Duration(half + j))
	deadline := created.Add(DeliveryGiveUpAfter)
	if !now.Before(deadline) {
		return time.Time{}, false
	}
	if next.After(deadline) {
		next = deadline
	}
	return next, true
}

// EndpointHealth is how deliveries to one endpoint go, as the operators'
// list of endpoints shows it.
type EndpointHealth struct {
	Pending       int64      // deliveries not yet made
	OldestPending *time.Time // when payd wrote the oldest event not yet delivered; nil when none
	Failed        int64      // deliveries given up
	// The last attempt: when it started, the endpoint's status (0: none)
	// and, when it failed, why, in words. Nil and zero before any.
	LastAttemptAt *time.Time
	LastStatus    int
	LastError     string
}

// Failing reports whether the endpoint's last attempt failed.
func (h EndpointHealth) Failing() bool {
	return h.LastAttemptAt != nil && (h.LastError != "" || h.LastStatus < 200 || h.LastStatus > 299)
}
