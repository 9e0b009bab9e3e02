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

var keyPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,255}$`)

// Who stored a record's answer.
const (
	CompletedByRequest    = "request"    // the request itself answered
	CompletedInBackground = "background" // a webhook or the recoverer settled the payment after the request answered 202
)

// ValidKey reports whether k is an acceptable idempotency key.
func ValidKey(k string) bool { return keyPattern.MatchString(k) }

// Scopes keep callers' keys apart: two customers may use the same key.
const (
	ScopePublic   = "public"   // unauthenticated routes (registration)
	ScopeAdmin    = "admin"    // operators
	ScopeProvider = "provider" // the payment provider's webhooks
)

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
	return r.ExpiresAt.Before(now) && (r.Status != RecordProcessing || r.LockedUntil.Before(now))
}
