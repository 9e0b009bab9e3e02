package domain

import (
	"regexp"
	"time"
)

// RecordStatus is where an idempotent request stands.
type RecordStatus string

// The statuses of an idempotency record.
const (
	RecordProcessing RecordStatus = "processing" // someone holds the key; see LockedUntil
	RecordSucceeded  RecordStatus = "succeeded"  // the stored response is final and is replayed
	RecordFailed     RecordStatus = "failed"     // a definitive business failure: the key may run again
)

// RecordStatuses lists every record status.
var RecordStatuses = []RecordStatus{RecordProcessing, RecordSucceeded, RecordFailed}

// Valid reports whether s is a known record status.
func (s RecordStatus) Valid() bool { return RecordMachine.Valid(s) }

// RecordEvent is something that happens to an idempotency record.
type RecordEvent string

// The events of the record machine; the comment names the store
// transition that performs each.
const (
	RecordEventSucceed  RecordEvent = "succeed"   // Complete: the request's final answer, replayed from now on
	RecordEventFail     RecordEvent = "fail"      // Complete: a definitive business failure; the key may run again
	RecordEventRetry    RecordEvent = "retry"     // Retry: a new attempt under a failed record's key
	RecordEventTakeOver RecordEvent = "take_over" // TakeOver: a new lease on a record whose lease ran out
	RecordEventRelease  RecordEvent = "release"   // ReleaseLease: the holder ends its lease early
	RecordEventReplace  RecordEvent = "replace"   // replaceGone: a new request takes the key of a gone record (Record.Gone)
)

// RecordMachine is the whole idempotency record machine. Inserting a
// record, processing, is taking its key's lock; its holder completes it
// once, succeeded or failed. The repository builds each guarded statement
// from its entry; conditions the table does not hold (the lease, the
// expiry, the pay call's order) stay in the SQL. The two completions share
// one UPDATE, so they share their statuses (a domain test holds them to
// it). A processing record may also be deleted, by Delete, when its
// request never ran.
var RecordMachine = newMachine("record", RecordStatuses, []RecordStatus{RecordProcessing},
	step[RecordStatus, RecordEvent]{RecordEventSucceed, []RecordStatus{RecordProcessing}, RecordSucceeded},
	step[RecordStatus, RecordEvent]{RecordEventFail, []RecordStatus{RecordProcessing}, RecordFailed},
	step[RecordStatus, RecordEvent]{RecordEventRetry, []RecordStatus{RecordFailed}, RecordProcessing},
	step[RecordStatus, RecordEvent]{RecordEventTakeOver, []RecordStatus{RecordProcessing}, RecordProcessing},
	step[RecordStatus, RecordEvent]{RecordEventRelease, []RecordStatus{RecordProcessing}, RecordProcessing},
	step[RecordStatus, RecordEvent]{RecordEventReplace, []RecordStatus{RecordProcessing, RecordSucceeded, RecordFailed}, RecordProcessing},
)

// CompleteEvent returns the event that completes a record as to:
// succeeded or failed, and false for any other status.
func CompleteEvent(to RecordStatus) (RecordEvent, bool) {
	switch to {
	case RecordSucceeded:
		return RecordEventSucceed, true
	case RecordFailed:
		return RecordEventFail, true
	}
	return "", false
}

// Locking reports whether a record in status s holds its key's lock while
// its lease runs (processing): Record.Gone's exception.
func (s RecordStatus) Locking() bool { return s == RecordProcessing }

var keyPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,255}$`)

// Who stored a record's answer.
const (
	CompletedByRequest = "request" // the request itself answered
	// CompletedInBackground marks an answer given to every later request
	// with the key: a webhook or the recoverer settled the payment after
	// the request answered 202, or the request's failure is final for its
	// key (a refund's, ADR 0043).
	CompletedInBackground = "background"
)

// RecordCompleters lists who may store a record's answer (the CHECK on
// idempotency_records.completed_by holds to it).
var RecordCompleters = []string{CompletedByRequest, CompletedInBackground}

// ValidKey reports whether k is an acceptable idempotency key.
func ValidKey(k string) bool { return keyPattern.MatchString(k) }

// Scopes keep callers' keys apart: two customers may use the same key.
const (
	ScopePublic   = "public"   // unauthenticated routes (registration)
	ScopeAdmin    = "admin"    // operators
	ScopeMerchant = "merchant" // the merchant's server, whichever of its keys it used
	ScopeProvider = "provider" // the payment provider's webhooks
)

// OrderScope is the idempotency scope of the holder of one order's client
// secret: the keys a buyer's browser used with it (ADR 0059).
func OrderScope(orderID string) string { return "order:" + orderID }

// CustomerScope is the idempotency scope of one customer.
func CustomerScope(customerID string) string { return "customer:" + customerID }

// Record is the stored memory of one idempotent request: who asked, what
// they asked, and the response they got.
type Record struct {
	Scope          string
	Key            string
	Method         string
	Path           string
	Fingerprint    string // hex SHA-256 over method, path and canonical body
	Status         RecordStatus
	ResponseStatus int
	ResponseBody   []byte // sealed (encrypted) when Sealed is true, e.g. a registration that carries a token
	Sealed         bool
	OrderID        string // for pay requests: lets a background completion find the record
	CompletedBy    string // CompletedByRequest or CompletedInBackground; empty while processing
	LockedUntil    time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
	ExpiresAt      time.Time
}

// Gone reports whether the record no longer exists for callers at now: it
// expired, and it is not a processing record under a live lease (that one
// is someone's lock until the lease ends). A gone record is absent at once,
// not from the next purge: the purge job deletes exactly the gone records,
// so whether it has run changes nothing a caller sees.
func (r Record) Gone(now time.Time) bool {
	return r.ExpiresAt.Before(now) && (!r.Status.Locking() || r.LockedUntil.Before(now))
}
