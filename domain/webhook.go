package domain

import "time"

// WebhookEvent is one provider event in the inbox. Its ID is the
// provider's webhook-id, stored once: a redelivery finds it and changes nothing.
type WebhookEvent struct {
	ID          string
	Type        string
	OrderID     string // as the provider says; may name no order of ours
	AttemptID   string // the charge's idempotency key, i.e. our attempt ID
	ChargeID    string
	Payload     []byte // the verified body, as received
	Outcome     string // applied, duplicate, ignored, discrepancy, ...
	ReceivedAt  time.Time
	ProcessedAt *time.Time // nil until applied: a redelivery of an unprocessed event applies it
}
