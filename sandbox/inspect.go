package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/payd/payd/domain"
)

// Charges returns every charge the sandbox holds, oldest first, so tests can
// count what was really charged.
func (s *Server) Charges(ctx context.Context) ([]domain.Charge, error) {
	rows, err := chargesCreated(ctx, s.db, dbTime{}, dbTime{})
	if err != nil {
		return nil, err
	}
	out := make([]domain.Charge, len(rows))
	for i, r := range rows {
		out[i] = r.toCharge()
	}
	return out, nil
}

// Refunds returns every refund the sandbox holds, oldest first, whoever
// asked for it.
func (s *Server) Refunds(ctx context.Context) ([]domain.ProviderRefund, error) {
	rows, err := refundsCreated(ctx, s.db, dbTime{}, dbTime{})
	if err != nil {
		return nil, err
	}
	out := make([]domain.ProviderRefund, len(rows))
	for i, r := range rows {
		out[i] = r.toRefund()
	}
	return out, nil
}

// Disputes returns every dispute the sandbox holds, oldest first.
func (s *Server) Disputes(ctx context.Context) ([]domain.ProviderDispute, error) {
	rows, err := disputesCreated(ctx, s.db, dbTime{}, dbTime{})
	if err != nil {
		return nil, err
	}
	out := make([]domain.ProviderDispute, len(rows))
	for i, d := range rows {
		out[i] = d.toDispute()
	}
	return out, nil
}

// Delivery is the state of one copy of one webhook event in the outbox.
type Delivery struct {
	EventID       string
	Type          string
	Copy          int // 0 .. Duplicates-1; all copies share EventID
	Payload       []byte
	Attempts      int
	NextAttemptAt time.Time
	DeliveredAt   time.Time // zero while pending
	LastStatus    int       // HTTP status of the last attempt, 0 if none came back
	LastError     string
}

// Delivered reports whether the receiver acknowledged this copy.
func (d Delivery) Delivered() bool { return !d.DeliveredAt.IsZero() }

// Deliveries returns the whole outbox, oldest first, so tests can see what
// is owed, what was delivered and how many attempts it took.
func (s *Server) Deliveries(ctx context.Context) ([]Delivery, error) {
	var rows []deliveryRow
	if err := s.db.WithContext(ctx).Order("created_at, event_id, copy_no").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("sandbox: list deliveries: %w", err)
	}
	out := make([]Delivery, len(rows))
	for i, r := range rows {
		out[i] = Delivery{
			EventID: r.EventID, Type: r.EventType, Copy: r.CopyNo, Payload: []byte(r.Payload),
			Attempts: r.Attempts, NextAttemptAt: r.NextAttemptAt.Time, DeliveredAt: r.DeliveredAt.Time,
			LastStatus: r.LastStatus, LastError: r.LastError,
		}
	}
	return out, nil
}
