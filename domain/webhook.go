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

// WebhookOutcome is how a provider event was handled: stored on its inbox
// row (webhook_events.outcome, whose CHECK holds to WebhookOutcomes),
// reported to the provider and counted (payd_webhooks_total's outcome label).
type WebhookOutcome string

// Webhook outcomes.
const (
	OutcomeApplied     WebhookOutcome = "applied"
	OutcomeDuplicate   WebhookOutcome = "duplicate"
	OutcomeIgnored     WebhookOutcome = "ignored"
	OutcomeDiscrepancy WebhookOutcome = "discrepancy"
)

// WebhookOutcomes lists every webhook outcome.
var WebhookOutcomes = []WebhookOutcome{OutcomeApplied, OutcomeDuplicate, OutcomeIgnored, OutcomeDiscrepancy}
