package repository

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/payd/payd/domain"
)

// webhookRow is a row of webhook_events. The references to orders, attempts
// and charges are what the provider said, not foreign keys: an event may
// name something payd never saw, and it is still kept.
type webhookRow struct {
	ID          string         `gorm:"column:id"`
	Type        string         `gorm:"column:type"`
	OrderID     sql.NullString `gorm:"column:order_id"`
	AttemptID   sql.NullString `gorm:"column:attempt_id"`
	ChargeID    sql.NullString `gorm:"column:charge_id"`
	Payload     []byte         `gorm:"column:payload"`
	Outcome     sql.NullString `gorm:"column:outcome"`
	ReceivedAt  utcTime        `gorm:"column:received_at"`
	ProcessedAt *utcTime       `gorm:"column:processed_at"`
}

// TableName tells GORM the table.
func (webhookRow) TableName() string { return "webhook_events" }

func webhookFromDomain(e domain.WebhookEvent) webhookRow {
	payload := e.Payload
	if payload == nil {
		payload = []byte{} // the column is NOT NULL; an empty body is still a body
	}
	return webhookRow{
		ID: e.ID, Type: e.Type, OrderID: nullString(e.OrderID), AttemptID: nullString(e.AttemptID),
		ChargeID: nullString(e.ChargeID), Payload: payload, Outcome: nullString(e.Outcome),
		ReceivedAt: ts(e.ReceivedAt), ProcessedAt: tsPtr(e.ProcessedAt),
	}
}

func (r webhookRow) toDomain() domain.WebhookEvent {
	return domain.WebhookEvent{
		ID: r.ID, Type: r.Type, OrderID: r.OrderID.String, AttemptID: r.AttemptID.String,
		ChargeID: r.ChargeID.String, Payload: r.Payload, Outcome: r.Outcome.String,
		ReceivedAt: r.ReceivedAt.time(), ProcessedAt: timePtr(r.ProcessedAt),
	}
}

// InboxStore keeps the provider's webhook events. The primary key on the
// event ID is what makes a redelivery harmless: it is stored once, and
// every later delivery finds the stored event instead.
type InboxStore struct{ db *DB }

// NewInboxStore returns an InboxStore on db.
func NewInboxStore(db *DB) *InboxStore { return &InboxStore{db: db} }

// Receive stores e and reports isNew=true, or, when an event with its ID is
// stored already, returns that one (with its outcome and ProcessedAt) and
// isNew=false. The INSERT decides, not a prior read, so of concurrent
// deliveries of one event exactly one is new. A duplicate is recognised by
// any unique violation: the primary key is the table's only unique index
// (and MySQL names it PRIMARY, not after the table).
func (s *InboxStore) Receive(ctx context.Context, e domain.WebhookEvent) (domain.WebhookEvent, bool, error) {
	row := webhookFromDomain(e)
	err := s.db.create(ctx, &row)
	if err == nil {
		return row.toDomain(), true, nil
	}
	if !isUniqueViolation(err) {
		return domain.WebhookEvent{}, false, fmt.Errorf("receive webhook event %s: %w", e.ID, err)
	}
	var stored webhookRow
	if err := s.db.conn(ctx).Where("id = ?", e.ID).Take(&stored).Error; err != nil {
		return domain.WebhookEvent{}, false, fmt.Errorf("receive webhook event %s: read stored: %w", e.ID, err)
	}
	return stored.toDomain(), false, nil
}

// MarkProcessed records the outcome of applying event id. Only the first
// call counts (processed_at IS NULL guards it): when two deliveries of an
// unprocessed event both apply it, the first outcome (say "applied") is the
// truth and the second ("no change") must not overwrite it. Marking an
// event that is already marked, or unknown, changes nothing and is no error.
func (s *InboxStore) MarkProcessed(ctx context.Context, id, outcome string, now time.Time) error {
	_, err := s.db.exec(ctx, markProcessed, nullString(outcome), ts(now), id)
	if err != nil {
		return fmt.Errorf("mark webhook event %s processed: %w", id, err)
	}
	return nil
}

const markProcessed = `UPDATE webhook_events SET outcome = ?, processed_at = ?
		WHERE id = ? AND processed_at IS NULL`

// ListByOrder returns the events that name orderID, oldest first.
func (s *InboxStore) ListByOrder(ctx context.Context, orderID string) ([]domain.WebhookEvent, error) {
	var rows []webhookRow
	err := s.db.conn(ctx).Where("order_id = ?", orderID).Order("received_at, id").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list webhook events of order %s: %w", orderID, err)
	}
	out := make([]domain.WebhookEvent, len(rows))
	for i, r := range rows {
		out[i] = r.toDomain()
	}
	return out, nil
}
