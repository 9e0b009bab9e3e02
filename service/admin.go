package service

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/payd/payd/domain"
)

// Admin answers operators' questions about orders: search, and the whole
// story of one order in time order.
type Admin struct {
	Orders        OrderStore
	Attempts      AttemptStore
	Inbox         InboxStore
	Audit         AuditStore
	Refunds       RefundStore
	Discrepancies DiscrepancyStore
	RunList       RunLister      // reconciliation runs, for ListRuns
	CustomerList  CustomerLister // customers, for ListCustomers and a search by email
	Ledger        LedgerStore    // the order's movements of money
	Disputes      DisputeStore   // the order's disputes
	StatsReader   StatsReader    // the overview, for Stats
	Now           func() time.Time
}

// Timeline is everything payd knows about one order, each list oldest first.
type Timeline struct {
	Order         domain.Order
	Attempts      []domain.Attempt
	Events        []domain.WebhookEvent
	Refunds       []domain.Refund
	Discrepancies []domain.Discrepancy
	Audit         []domain.AuditEntry
	// Ledger is every movement of the order's money, and Money what it
	// adds up to (domain.Summarize).
	Ledger   []domain.LedgerEntry
	Money    domain.Books
	Disputes []domain.Dispute
	// Notified is every event the order's changes wrote for the merchant's
	// endpoints, by seq (ADR 0053).
	Notified []domain.OutboxEvent
}

// Search lists orders of any customer. f.CustomerID may be a customer's
// ID or the email they registered with (see customerRef).
func (s *Admin) Search(ctx context.Context, f domain.OrderFilter) (domain.OrderPage, error) {
	if f.Status != "" && !f.Status.Valid() {
		return domain.OrderPage{}, &domain.ValidationError{Field: "status", Reason: domain.StatusReason(f.Status)}
	}
	if f.Attempt != "" && !slices.Contains(domain.AttemptStatuses, f.Attempt) {
		return domain.OrderPage{}, &domain.ValidationError{Field: "attempt", Reason: fmt.Sprintf("%q is not an attempt status (one of %s)", f.Attempt, attemptNames())}
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return domain.OrderPage{}, &domain.ValidationError{Field: "to", Reason: "must be after from"}
	}
	if s.CustomerList != nil {
		id, known, err := s.customerRef(ctx, f.CustomerID)
		if err != nil {
			return domain.OrderPage{}, err
		}
		if !known {
			return domain.OrderPage{Orders: []domain.Order{}}, nil
		}
		f.CustomerID = id
	}
	page, err := s.Orders.List(ctx, f)
	if err != nil {
		return page, err
	}
	ids := make([]string, len(page.Orders))
	for i, o := range page.Orders {
		ids[i] = o.ID
	}
	page.LastAttempts, err = s.Attempts.LastOfOrders(ctx, ids)
	return page, err
}

// DisputePage is one page of the operators' list of disputes.
type DisputePage struct {
	Disputes   []domain.Dispute
	NextCursor string
}

// ListDisputes lists every order's disputes, newest first, in status
// unless it is empty (open: the ones to answer at the provider).
func (s *Admin) ListDisputes(ctx context.Context, status domain.DisputeStatus, cursor string, limit int) (DisputePage, error) {
	if status != "" && !status.Valid() {
		names := make([]string, len(domain.DisputeStatuses))
		for i, st := range domain.DisputeStatuses {
			names[i] = string(st)
		}
		return DisputePage{}, &domain.ValidationError{Field: "status", Reason: fmt.Sprintf("%q is not a dispute status (one of %s)", status, strings.Join(names, ", "))}
	}
	limit = min(max(limit, 1), domain.MaxPageSize)
	ds, err := s.Disputes.List(ctx, status, cursor, limit)
	if err != nil {
		return DisputePage{}, err
	}
	page := DisputePage{Disputes: ds}
	if len(ds) > limit {
		page.Disputes = ds[:limit]
		page.NextCursor = ds[limit-1].ID
	}
	return page, nil
}

func attemptNames() string {
	names := make([]string, len(domain.AttemptStatuses))
	for i, st := range domain.AttemptStatuses {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

// Timeline gathers the story of one order.
func (s *Admin) Timeline(ctx context.Context, id string) (Timeline, error) {
	o, err := s.Orders.FindByID(ctx, id)
	if err != nil {
		return Timeline{}, err
	}
	t := Timeline{Order: o}
	if o.Fulfillment != domain.FulfillmentUnfulfilled { // else it has no shipment: no read
		if t.Order.Shipments, err = s.Orders.ShipmentsOf(ctx, id); err != nil {
			return Timeline{}, err
		}
	}
	if t.Attempts, err = s.Attempts.ListByOrder(ctx, id); err != nil {
		return Timeline{}, err
	}
	if t.Events, err = s.Inbox.ListByOrder(ctx, id); err != nil {
		return Timeline{}, err
	}
	if t.Refunds, err = s.Refunds.ListByOrder(ctx, id); err != nil {
		return Timeline{}, err
	}
	if t.Discrepancies, err = s.Discrepancies.ListByOrder(ctx, id); err != nil {
		return Timeline{}, err
	}
	if t.Audit, err = s.Audit.ListByOrder(ctx, id); err != nil {
		return Timeline{}, err
	}
	// The disputes first, then the ledger: a dispute's step and its entry
	// commit together, so money read after the disputes is never older
	// than the statuses shown beside it.
	if s.Disputes != nil {
		if t.Disputes, err = s.Disputes.ListByOrder(ctx, id); err != nil {
			return Timeline{}, err
		}
	}
	if s.Ledger != nil {
		if t.Ledger, err = s.Ledger.ListByOrder(ctx, id); err != nil {
			return Timeline{}, err
		}
	}
	t.Money = domain.Summarize(o.Currency, t.Ledger)
	if t.Notified, err = s.Orders.EventsOf(ctx, id); err != nil {
		return Timeline{}, err
	}
	return t, nil
}

// Record appends one entry to the audit trail.
func (s *Admin) Record(ctx context.Context, e domain.AuditEntry) error {
	e.ID, e.CreatedAt = newID(), s.Now().UTC()
	return s.Audit.Append(ctx, e)
}

// Discrepancy returns one discrepancy, or domain.ErrDiscrepancyNotFound.
func (s *Admin) Discrepancy(ctx context.Context, id string) (domain.Discrepancy, error) {
	return s.Discrepancies.FindByID(ctx, id)
}
