// Package service holds payd's use cases: registering customers, creating
// and cancelling orders, paying them exactly once, refunds, webhooks,
// reconciliation and the background jobs. It speaks only payd's domain
// terms (no HTTP), and tells the rest of payd what happened through one
// port, Observer, which only watches; pay answers settled outside their
// request are stored through SettledAnswers. It owns transactions and the
// order of steps; the stores and the provider it needs are declared here, as
// small interfaces, and implemented elsewhere (repository, provider).
package service

import (
	"context"
	"time"

	"github.com/payd/payd/domain"
)

// Transactor runs fn in one database transaction. Store calls made with the
// context fn receives take part in it; the transaction commits when fn
// returns nil and rolls back otherwise.
type Transactor interface {
	InTx(ctx context.Context, fn func(ctx context.Context) error) error
}

// CustomerStore keeps customers.
type CustomerStore interface {
	// Create stores c; a second customer with the same email is domain.ErrEmailTaken.
	Create(ctx context.Context, c domain.Customer) error
	// FindByTokenHash returns the customer whose token hashes to hash, or domain.ErrCustomerNotFound.
	FindByTokenHash(ctx context.Context, hash string) (domain.Customer, error)
	// FindByEmail returns the customer with that (normalized) email, or domain.ErrCustomerNotFound.
	FindByEmail(ctx context.Context, email string) (domain.Customer, error)
}

// OrderStore keeps orders. Each transition is one guarded UPDATE that
// reports whether it changed a row; when it did not, the caller re-reads the
// order and decides from its status and stored request ID.
type OrderStore interface {
	// Create stores o with its items and takes the stock its lines take
	// (all or none: a *domain.OutOfStockError); a second order of one
	// creator with the same CreateRequestID is domain.ErrOrderExists.
	Create(ctx context.Context, o domain.Order) error
	// FindByID returns the order with its items, or domain.ErrOrderNotFound.
	FindByID(ctx context.Context, id string) (domain.Order, error)
	// FindByIDs returns those of the orders ids that exist, with their
	// items, by ID.
	FindByIDs(ctx context.Context, ids []string) (map[string]domain.Order, error)
	// Lock takes the order's row for the caller's transaction (a write:
	// it raises the version) and returns the order as it is now, so that
	// no transaction that changes the order commits between that read and
	// the caller's end (ADR 0030's outside refunds).
	Lock(ctx context.Context, id string) (domain.Order, error)
	// ShipmentsOf returns the order's shipments, oldest first.
	ShipmentsOf(ctx context.Context, id string) ([]domain.Shipment, error)
	// FindByCreateRequest returns the order creator (its idempotency
	// scope) created under requestID, or domain.ErrOrderNotFound.
	FindByCreateRequest(ctx context.Context, creator, requestID string) (domain.Order, error)
	// List returns one page of orders matching f, newest first.
	List(ctx context.Context, f domain.OrderFilter) (domain.OrderPage, error)

	// TakeCreated returns, once, the order id as this process created it,
	// if it still remembers it: a hint that spares the pay path its read.
	// It may have changed since; Claim's version guard refuses it then.
	TakeCreated(id string) (domain.Order, bool)

	// Claim: pending → processing, recording requestID as pay_request_id,
	// only while the order is at version (any, for domain.AnyVersion).
	Claim(ctx context.Context, id, requestID string, version int64, now time.Time) (bool, error)
	// MarkPaid: processing → paid, only for the request that claimed it;
	// it writes the order.paid event, caused by c, with the change.
	MarkPaid(ctx context.Context, id, requestID string, c domain.Cause, now time.Time) (bool, error)
	// MarkAuthorized: processing → authorized for a manual-capture order,
	// only for the request that claimed it, with the hold's deadline; it
	// writes order.authorized.
	MarkAuthorized(ctx context.Context, id, requestID string, captureBefore time.Time, c domain.Cause, now time.Time) (bool, error)
	// Release: processing → pending, clearing pay_request_id, only for the
	// request that claimed it; it writes order.payment_failed.
	Release(ctx context.Context, id, requestID string, c domain.Cause, now time.Time) (bool, error)
	// Cancel: pending → cancelled; it writes order.cancelled.
	Cancel(ctx context.Context, id string, c domain.Cause, now time.Time) (bool, error)
	// ExpireDue: pending orders whose expires_at is at or before now → expired,
	// at most limit of them, each with its order.expired event; it returns
	// the IDs of the orders it changed.
	ExpireDue(ctx context.Context, c domain.Cause, now time.Time, limit int) ([]string, error)
	// Tell writes the event of type t, caused by c, of a change that booked
	// money without moving the order's status (a refund, a dispute's
	// step), taking the order's lock (which raises its version) first.
	Tell(ctx context.Context, id string, t domain.NotifyType, c domain.Cause, now time.Time) error
	// Restamp brings the event the caller's transaction wrote for the
	// order one change ago up to the order as it now stands.
	Restamp(ctx context.Context, id string) error
	// EventsOf returns the order's events with their snapshots, by seq.
	EventsOf(ctx context.Context, id string) ([]domain.OutboxEvent, error)
	// MoveRefund makes one move of domain.RefundBook's table on the
	// order's refund money (reserve, settle, count, release, reverse) by
	// one guarded UPDATE, and reports whether the move's guard let it.
	// It writes no event: the caller tells confirmed money with its
	// ledger entry.
	MoveRefund(ctx context.Context, id string, m domain.RefundMove, minor int64, now time.Time) (bool, error)
	// RepairBooks sets the order's confirmed refunds (and the status they
	// give) to book's, only while the order is at version and paid or
	// refunded: the ledger's repair of the order (ADR 0055).
	RepairBooks(ctx context.Context, id string, version int64, book domain.RefundBook, now time.Time) (bool, error)
	// ListPaidBetween returns orders paid (or since refunded) with paid_at
	// in [from, to), ordered by paid_at then ID, after the ID cursor, at
	// most limit, without their items.
	ListPaidBetween(ctx context.Context, from, to time.Time, after string, limit int) ([]domain.Order, error)
	// ListStuck returns orders processing since before olderThan (by
	// updated_at), at most limit.
	ListStuck(ctx context.Context, olderThan time.Time, limit int) ([]domain.Order, error)
}

// AttemptStore keeps payment attempts.
type AttemptStore interface {
	// Create stores a new attempt (normally in status started).
	Create(ctx context.Context, a domain.Attempt) error
	// FindByID returns one attempt, or domain.ErrAttemptNotFound.
	FindByID(ctx context.Context, id string) (domain.Attempt, error)
	// FindByIDs returns those of the attempts ids that exist, by ID.
	FindByIDs(ctx context.Context, ids []string) (map[string]domain.Attempt, error)
	// ListByOrders returns the attempts of the orders ids, oldest first,
	// by order ID.
	ListByOrders(ctx context.Context, ids []string) (map[string][]domain.Attempt, error)
	// ListByOrder returns an order's attempts, oldest first.
	ListByOrder(ctx context.Context, orderID string) ([]domain.Attempt, error)
	// Latest returns the newest attempt an order has for requestID, or domain.ErrAttemptNotFound.
	Latest(ctx context.Context, orderID, requestID string) (domain.Attempt, error)
	// LastOfOrders returns each order's newest attempt, by order ID (an
	// order without one is absent).
	LastOfOrders(ctx context.Context, orderIDs []string) (map[string]domain.Attempt, error)

	// The settlements below are each one guarded UPDATE built from
	// domain's attempt table; each reports whether it changed a row. A
	// non-empty chargeID is recorded (an empty one keeps the stored
	// charge ID); the failure code is always overwritten.

	// MarkUnknown: started → unknown; the provider's reply was lost.
	MarkUnknown(ctx context.Context, id, chargeID string, now time.Time) (bool, error)
	// RecordChargeID stores chargeID on a started or unknown attempt that
	// has none yet (learned after its reply was lost); false when the
	// attempt has one, or is settled.
	RecordChargeID(ctx context.Context, id, chargeID string) (bool, error)
	// Succeed: started|unknown → succeeded; the provider charged the attempt's money.
	Succeed(ctx context.Context, id, chargeID string, now time.Time) (bool, error)
	// Fail: started|unknown → failed with failureCode; the provider charged nothing.
	Fail(ctx context.Context, id, chargeID, failureCode string, now time.Time) (bool, error)
	// Hold: started|unknown → held, failure code amount_mismatch; the
	// provider charged other money than the attempt's (ADR 0010).
	Hold(ctx context.Context, id, chargeID string, now time.Time) (bool, error)
	// Adopt: failed|held → succeeded; the provider charged after all. from
	// is the status the caller read: the attempt moves only from that one.
	Adopt(ctx context.Context, id string, from domain.AttemptStatus, chargeID string, now time.Time) (bool, error)
	// Apply: started|unknown|failed → succeeded; an operator applies a
	// charge the provider stands by (a missing local payment).
	Apply(ctx context.Context, id, chargeID string, now time.Time) (bool, error)
	// Reject: held → failed, failure code amount_mismatch; an operator
	// refunded the held charge.
	Reject(ctx context.Context, id string, now time.Time) (bool, error)

	// ListUnsettled returns attempts in status started or unknown last
	// updated before olderThan, oldest first, at most limit.
	ListUnsettled(ctx context.Context, olderThan time.Time, limit int) ([]domain.Attempt, error)
	// Lease claims an unsettled attempt until until for one worker (a
	// replica's recoverer, or a request retrying its key), guarded by any
	// unexpired lease, so exactly one works on it at a time; it reports
	// whether this caller won.
	Lease(ctx context.Context, id string, now, until time.Time) (bool, error)
	// Resend records, for the holder of the lease ending at held, that a
	// charge request is about to be sent again and may reach the provider
	// until until; the lease now ends then too. False means it may not be sent.
	Resend(ctx context.Context, id string, held, until time.Time) (bool, error)
	// Unlease ends the lease ending at held, if it is still that one.
	Unlease(ctx context.Context, id string, held time.Time) (bool, error)
}

// RecordPurger deletes expired idempotency records (the purge job); the
// idempotency package keeps them otherwise.
type RecordPurger interface {
	// PurgeExpired deletes up to limit records that expired before now and
	// are not processing under a live lease; it returns how many went.
	PurgeExpired(ctx context.Context, now time.Time, limit int) (int64, error)
}

// InboxStore keeps the provider's webhook events, each id once.
type InboxStore interface {
	// Receive stores e if its ID is new and reports whether it was; for an
	// ID seen before it returns the stored event (with ProcessedAt) instead.
	Receive(ctx context.Context, e domain.WebhookEvent) (stored domain.WebhookEvent, isNew bool, err error)
	// MarkProcessed records how the event was applied.
	MarkProcessed(ctx context.Context, id, outcome string, now time.Time) error
	// ListByOrder returns an order's events, oldest first.
	ListByOrder(ctx context.Context, orderID string) ([]domain.WebhookEvent, error)
}

// DiscrepancyStore keeps disagreements between payd and the provider.
type DiscrepancyStore interface {
	// Record stores d unless one of the same (Type, Reference) exists; it
	// returns the stored discrepancy and whether it is new.
	Record(ctx context.Context, d domain.Discrepancy) (domain.Discrepancy, bool, error)
	// FindByID returns one discrepancy, or domain.ErrDiscrepancyNotFound.
	FindByID(ctx context.Context, id string) (domain.Discrepancy, error)
	// Resolve: open → resolved with the resolution and note; it reports whether a row changed.
	Resolve(ctx context.Context, id, resolution, note string, now time.Time) (bool, error)
	// Claim: open → resolving for one resolution; it reports whether this caller won.
	Claim(ctx context.Context, id, resolution string, now time.Time) (bool, error)
	// Settle: resolving → resolved, only for the resolution that claimed it.
	Settle(ctx context.Context, id, resolution, note string, now time.Time) (bool, error)
	// Unclaim: resolving → open, when the claimed resolution could not be carried out.
	Unclaim(ctx context.Context, id, resolution string) (bool, error)
	// ListByOrder returns an order's discrepancies, oldest first.
	ListByOrder(ctx context.Context, orderID string) ([]domain.Discrepancy, error)
	// ListOpen returns open discrepancies of a type (all types when empty), oldest first, at most limit.
	ListOpen(ctx context.Context, t domain.DiscrepancyType, limit int) ([]domain.Discrepancy, error)
	// List returns one page of discrepancies of every source, newest first.
	List(ctx context.Context, f domain.DiscrepancyFilter) (domain.DiscrepancyPage, error)
}

// RefundStore keeps refunds.
type RefundStore interface {
	// Create stores a pending refund; an existing ProviderKey is domain.ErrRefundExists.
	Create(ctx context.Context, r domain.Refund) error
	// FindByProviderKey returns a refund by its provider idempotency key, or domain.ErrRefundNotFound.
	FindByProviderKey(ctx context.Context, key string) (domain.Refund, error)
	// Finish: pending → succeeded or failed, recording the provider's refund
	// ID; it reports whether a row changed.
	Finish(ctx context.Context, id string, to domain.RefundStatus, providerRefundID string, now time.Time) (bool, error)
	// Reverse: succeeded → failed, for a refund the provider took back
	// after confirming it; it reports whether a row changed.
	Reverse(ctx context.Context, id string, now time.Time) (bool, error)
	// ListByOrder returns an order's refunds, oldest first.
	ListByOrder(ctx context.Context, orderID string) ([]domain.Refund, error)
	// ListPending returns pending refunds last updated before olderThan, at most limit.
	ListPending(ctx context.Context, olderThan time.Time, limit int) ([]domain.Refund, error)
	// RecordProviderID stores the provider's ID on a pending refund that
	// has none; false when it has one or is settled.
	RecordProviderID(ctx context.Context, id, providerRefundID string) (bool, error)
	// ListSucceededBetween returns succeeded refunds created in [from,
	// to), ordered by ID, after the ID cursor, at most limit.
	ListSucceededBetween(ctx context.Context, from, to time.Time, after string, limit int) ([]domain.Refund, error)
}

// AuditStore keeps the audit trail of operator actions.
type AuditStore interface {
	Append(ctx context.Context, e domain.AuditEntry) error
	// ListByOrder returns the entries about an order, oldest first.
	ListByOrder(ctx context.Context, orderID string) ([]domain.AuditEntry, error)
}

// RunStore keeps reconciliation runs and which discrepancies each found.
type RunStore interface {
	Create(ctx context.Context, r domain.ReconciliationRun) error
	// Finish stores the run's counts and finish time.
	Finish(ctx context.Context, r domain.ReconciliationRun) error
	// AddFinding links a discrepancy to a run that saw it (idempotent).
	AddFinding(ctx context.Context, runID, discrepancyID string) error
	// FindByID returns a run with the discrepancies it found, or domain.ErrRunNotFound.
	FindByID(ctx context.Context, id string) (domain.ReconciliationRun, error)
}

// CheckpointStore keeps the checkpoints of reconciliation runs in
// progress, so that a run payd did not finish resumes from its last page
// (ADR 0068). One process owns a checkpoint at a time.
type CheckpointStore interface {
	// Take returns key's checkpoint with its pages, now owned by owner
	// (whoever owned it loses it), or a new one of run runID created at
	// createdAt when there is none.
	Take(ctx context.Context, key, owner, runID string, createdAt, now time.Time) (domain.RunCheckpoint, error)
	// Save records a page of key's run if owner still owns it;
	// domain.ErrRunTakenOver if not. Hold only checks that it does.
	Save(ctx context.Context, key, owner string, p domain.CheckpointPage, now time.Time) error
	Hold(ctx context.Context, key, owner string, now time.Time) error
	// Record marks key's run recorded if owner still owns it
	// (domain.ErrRunTakenOver if not); it joins the caller's transaction,
	// the one that records the run.
	Record(ctx context.Context, key, owner string, now time.Time) error
	// Drop deletes key's checkpoint if owner owns it, and reports whether
	// it did.
	Drop(ctx context.Context, key, owner string) (bool, error)
}

// LedgerStore keeps each order's ledger: every movement of money, appended
// once and never changed (ADR 0030).
type LedgerStore interface {
	// Append stores e unless an entry with its Reference exists; it
	// reports whether e is new. A repeat is never an error. An entry is
	// booked in a transaction that raises its order's version (it pays the
	// order, or calls OrderStore.Lock or Tell), unless the order can no
	// longer be paid by its claim (a held attempt's charge, an orphan of a
	// paid or closed order): a new order's first payment knows its books
	// from that (ADR 0067).
	Append(ctx context.Context, e domain.LedgerEntry) (bool, error)
	// ListByOrder returns an order's entries, oldest first.
	ListByOrder(ctx context.Context, orderID string) ([]domain.LedgerEntry, error)
	// ListByOrders returns the entries of the orders ids, oldest first, by
	// order ID.
	ListByOrders(ctx context.Context, ids []string) (map[string][]domain.LedgerEntry, error)
	// Booked reports which of references have an entry.
	Booked(ctx context.Context, references []string) (map[string]bool, error)
}

// DisputeStore keeps customers' disputes. Each close is one guarded
// UPDATE built from domain's dispute table.
type DisputeStore interface {
	// Open stores d, open, unless one with its ProviderDisputeID exists;
	// it returns the stored dispute and whether it is new.
	Open(ctx context.Context, d domain.Dispute) (domain.Dispute, bool, error)
	// FindByProviderID returns the dispute the provider calls id, or
	// domain.ErrDisputeNotFound.
	FindByProviderID(ctx context.Context, providerDisputeID string) (domain.Dispute, error)
	// Close moves dispute id by e (open → won or lost); it reports whether
	// a row changed.
	Close(ctx context.Context, id string, e domain.DisputeEvent, now time.Time) (bool, error)
	// SetEvidenceDue records when the provider wants dispute id's
	// evidence; it reports whether that changed the row.
	SetEvidenceDue(ctx context.Context, id string, due, now time.Time) (bool, error)
	// ListByOrder returns an order's disputes, oldest first.
	ListByOrder(ctx context.Context, orderID string) ([]domain.Dispute, error)
	// OpenForCharge reports whether the provider's charge chargeID has a
	// dispute still open.
	OpenForCharge(ctx context.Context, chargeID string) (bool, error)
	// CountOpen counts the disputes still open (payd_disputes_open).
	CountOpen(ctx context.Context) (int64, error)
	// List returns disputes newest first, in status unless it is empty,
	// after the ID cursor unless it is empty: at most limit and one more.
	List(ctx context.Context, status domain.DisputeStatus, cursor string, limit int) ([]domain.Dispute, error)
}

// ChargeFinder is what payd asks the provider before it moves money on an
// operator's word or believes a file's: the provider's own record of a
// charge, by the provider's charge ID, with the order it pays and its
// refunded and disputed amounts. An unknown charge is
// domain.ErrChargeNotFound.
type ChargeFinder interface {
	FindCharge(ctx context.Context, chargeID string) (domain.Charge, error)
}

// RefundLister lists the provider's refunds created in [from, to), for
// reconciliation.
type RefundLister interface {
	ListRefunds(ctx context.Context, from, to time.Time) ([]domain.ProviderRefund, error)
}

// DisputeLister lists the provider's disputes opened in [from, to), for
// reconciliation.
type DisputeLister interface {
	ListDisputes(ctx context.Context, from, to time.Time) ([]domain.ProviderDispute, error)
}

// DisputeFinder is the provider's own record of one dispute, by its ID:
// what a dispute event is confirmed against before payd books it. An
// unknown dispute is domain.ErrDisputeNotFound.
type DisputeFinder interface {
	FindDispute(ctx context.Context, id string) (domain.ProviderDispute, error)
}
