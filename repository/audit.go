package repository

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/payd/payd/domain"
)

// auditRow is a row of audit_log.
type auditRow struct {
	ID        string         `gorm:"column:id"`
	Actor     string         `gorm:"column:actor"`
	Action    string         `gorm:"column:action"`
	OrderID   sql.NullString `gorm:"column:order_id"`
	Target    sql.NullString `gorm:"column:target"`
	RequestID sql.NullString `gorm:"column:request_id"`
	Result    int            `gorm:"column:result"`
	Detail    sql.NullString `gorm:"column:detail"`
	CreatedAt utcTime        `gorm:"column:created_at"`
}

// TableName tells GORM the table.
func (auditRow) TableName() string { return "audit_log" }

func auditFromDomain(e domain.AuditEntry) auditRow {
	return auditRow{
		ID: e.ID, Actor: e.Actor, Action: e.Action, OrderID: nullString(e.OrderID), Target: nullString(e.Target),
		RequestID: nullString(e.RequestID), Result: e.Result, Detail: nullString(e.Detail), CreatedAt: ts(e.CreatedAt),
	}
}

func (r auditRow) toDomain() domain.AuditEntry {
	return domain.AuditEntry{
		ID: r.ID, Actor: r.Actor, Action: r.Action, OrderID: r.OrderID.String, Target: r.Target.String,
		RequestID: r.RequestID.String, Result: r.Result, Detail: r.Detail.String, CreatedAt: r.CreatedAt.time(),
	}
}

// AuditStore keeps the audit trail of operator actions. It only appends:
// there is no method to change or remove an entry.
type AuditStore struct{ db *DB }

// NewAuditStore returns an AuditStore on db.
func NewAuditStore(db *DB) *AuditStore { return &AuditStore{db: db} }

// Append stores e. Called inside the transaction of the action it records,
// the entry exists exactly when the action does.
func (s *AuditStore) Append(ctx context.Context, e domain.AuditEntry) error {
	row := auditFromDomain(e)
	if err := s.db.create(ctx, &row); err != nil {
		return fmt.Errorf("append audit entry %s: %w", e.ID, err)
	}
	return nil
}

// ListByOrder returns the entries about orderID, oldest first.
func (s *AuditStore) ListByOrder(ctx context.Context, orderID string) ([]domain.AuditEntry, error) {
	var rows []auditRow
	err := s.db.conn(ctx).Where("order_id = ?", orderID).Order("created_at, id").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list audit entries of order %s: %w", orderID, err)
	}
	out := make([]domain.AuditEntry, len(rows))
	for i, r := range rows {
		out[i] = r.toDomain()
	}
	return out, nil
}
