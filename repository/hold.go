package repository

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// Holds (ADR 0060). A manual-capture order's pay only authorizes it
// (MarkAuthorized). Then one hold action at a time owns the hold: it
// claims the order with one guarded UPDATE of its hold_action column
// (ClaimHold), so of twenty captures and cancels of one hold exactly one
// matches and the others learn why from the order they read back. The
// order stays authorized while the provider is asked: that is where the
// money is, held. The owner ends the hold with the transition its kind
// names (EndHold: capture → paid, void → cancelled, lapse → expired),
// guarded on being the owner, or gives the hold back (Unclaim) when the
// provider refused and nothing happened to it.

// The hold's guards, rendered from domain's table.
var (
	orderAuthorize = guardOf(domain.OrderMachine, domain.EventAuthorize)
	orderCapture   = guardOf(domain.OrderMachine, domain.EventCapture)
	orderVoid      = guardOf(domain.OrderMachine, domain.EventVoid)
	orderLapse     = guardOf(domain.OrderMachine, domain.EventLapse)
)

var (
	// markAuthorized is MarkAuthorized's: markPaid, for a manual order.
	markAuthorized = `UPDATE orders
		SET status = ` + orderAuthorize.to + `, capture_before = ?, version = version + 1, updated_at = ?
		WHERE id = ? AND status IN ` + orderAuthorize.from + ` AND pay_request_id = ?`

	// claimHold is ClaimHold's: the hold is free, and the order still
	// held (a capture, a void and a lapse leave from the same statuses: a
	// domain test holds them to it).
	claimHold = `UPDATE orders SET hold_action = ?, version = version + 1, updated_at = ?
		WHERE id = ? AND status IN ` + orderCapture.from + ` AND hold_action IS NULL`

	// claimCapture is claimHold for a capture: before the hold lapses.
	claimCapture = claimHold + ` AND capture_before > ?`

	// captureOrder, voidOrder and lapseOrder end the hold its owner holds.
	captureOrder = `UPDATE orders
		SET status = ` + orderCapture.to + `, captured_minor = ?, paid_at = ?, hold_action = NULL, version = version + 1, updated_at = ?
		WHERE id = ? AND status IN ` + orderCapture.from + ` AND hold_action = ? AND ? <= amount_minor`
	voidOrder = `UPDATE orders SET status = ` + orderVoid.to + `, hold_action = NULL, version = version + 1, updated_at = ?
		WHERE id = ? AND status IN ` + orderVoid.from + ` AND hold_action = ?`
	lapseOrder = `UPDATE orders SET status = ` + orderLapse.to + `, hold_action = NULL, version = version + 1, updated_at = ?
		WHERE id = ? AND status IN ` + orderLapse.from + ` AND hold_action = ?`

	// unclaimHold gives the hold back: only its owner may.
	unclaimHold = `UPDATE orders SET hold_action = NULL, version = version + 1, updated_at = ?
		WHERE id = ? AND hold_action = ?`
)

// MarkAuthorized moves a processing manual-capture order to authorized,
// only for the request that claimed it, with the hold's deadline, and
// writes its order.authorized event, caused by c.
func (s *OrderStore) MarkAuthorized(ctx context.Context, id, requestID string, captureBefore time.Time, c domain.Cause, now time.Time) (bool, error) {
	return s.transition(ctx, act{"mark authorized order", id}, domain.NotifyOrderAuthorized, c, now,
		markAuthorized, ts(captureBefore), ts(now), id, requestID)
}

// ClaimHold makes action the owner of its order's hold: the order is
// authorized, no other action owns it and, for a capture, capture_before
// is after now. false: the order was not so (another action owns it, or
// it is not held, or a capture came too late); the caller reads it again
// to say which.
func (s *OrderStore) ClaimHold(ctx context.Context, a domain.HoldAction, now time.Time) (bool, error) {
	if a.Kind == domain.HoldCapture {
		return s.db.guarded(ctx, act{"claim hold of order", a.OrderID}, claimCapture, a.ID, ts(now), a.OrderID, ts(now))
	}
	return s.db.guarded(ctx, act{"claim hold of order", a.OrderID}, claimHold, a.ID, ts(now), a.OrderID)
}

// EndHold moves the order whose hold action a owns by a's kind: a capture
// to paid with captured taken (at most the order's amount), a void to
// cancelled and a lapse to expired, each giving back the stock the order
// took. It writes the change's event, caused by c (order.paid,
// order.cancelled, order.expired). false: a does not own the hold (it
// ended already).
func (s *OrderStore) EndHold(ctx context.Context, a domain.HoldAction, captured decimal.Decimal, c domain.Cause, now time.Time) (bool, error) {
	what := act{"end hold of order", a.OrderID}
	switch a.Kind {
	case domain.HoldCapture:
		minor, err := toMinor(captured, a.Currency, "captured amount")
		if err != nil {
			return false, fmt.Errorf("%s: %w", what, err)
		}
		return s.transition(ctx, what, domain.NotifyOrderPaid, c, now, captureOrder, minor, ts(now), ts(now), a.OrderID, a.ID, minor)
	case domain.HoldVoid:
		return s.closeUnpaid(ctx, a.OrderID, func(ctx context.Context) (bool, error) {
			return s.transition(ctx, what, domain.NotifyOrderCancelled, c, now, voidOrder, ts(now), a.OrderID, a.ID)
		})
	case domain.HoldLapse:
		return s.closeUnpaid(ctx, a.OrderID, func(ctx context.Context) (bool, error) {
			return s.transition(ctx, what, domain.NotifyOrderExpired, c, now, lapseOrder, ts(now), a.OrderID, a.ID)
		})
	}
	return false, fmt.Errorf("%s: hold action kind %q", what, a.Kind)
}

// Unclaim gives the hold a owns back, the order still authorized: the
// provider refused a and nothing happened to the hold. false: a does not
// own it.
func (s *OrderStore) Unclaim(ctx context.Context, a domain.HoldAction, now time.Time) (bool, error) {
	return s.db.guarded(ctx, act{"unclaim hold of order", a.OrderID}, unclaimHold, ts(now), a.OrderID, a.ID)
}

// DueHolds returns authorized orders whose hold lapsed at or before now
// and that no action owns, the oldest first, at most limit of them: the
// lapse job's work.
func (s *OrderStore) DueHolds(ctx context.Context, now time.Time, limit int) ([]string, error) {
	var due []string
	err := s.db.conn(ctx).Model(&orderRow{}).
		Where("status IN ? AND capture_before <= ? AND hold_action IS NULL", names(domain.EventLapse.From()), ts(now)).
		Order("capture_before, id").Limit(batchSize(limit)).Pluck("id", &due).Error
	if err != nil {
		return nil, fmt.Errorf("due holds: %w", err)
	}
	return due, nil
}

// holdActionRow is a row of hold_actions.
type holdActionRow struct {
	ID          string         `gorm:"column:id"`
	OrderID     string         `gorm:"column:order_id"`
	Kind        string         `gorm:"column:kind"`
	Status      string         `gorm:"column:status"`
	AmountMinor int64          `gorm:"column:amount_minor"`
	Currency    string         `gorm:"column:currency"`
	RequestID   sql.NullString `gorm:"column:request_id"`
	FailureCode sql.NullString `gorm:"column:failure_code"`
	LeasedUntil *utcTime       `gorm:"column:leased_until"`
	CreatedAt   utcTime        `gorm:"column:created_at"`
	UpdatedAt   utcTime        `gorm:"column:updated_at"`
}

// TableName tells GORM the table.
func (holdActionRow) TableName() string { return "hold_actions" }

func (r holdActionRow) toDomain() domain.HoldAction {
	c := domain.Currency(r.Currency)
	return domain.HoldAction{
		ID: r.ID, OrderID: r.OrderID, Kind: domain.HoldActionKind(r.Kind), Status: domain.HoldActionStatus(r.Status),
		Amount: domain.FromMinorUnits(r.AmountMinor, c), Currency: c, RequestID: r.RequestID.String,
		FailureCode: r.FailureCode.String, LeasedUntil: zeroIfNil(r.LeasedUntil),
		CreatedAt: r.CreatedAt.time(), UpdatedAt: r.UpdatedAt.time(),
	}
}

// HoldActionStore keeps the hold actions: each capture, void or lapse of
// an order's hold, and how far it got with the provider.
type HoldActionStore struct{ db *DB }

// NewHoldActionStore returns a HoldActionStore on db.
func NewHoldActionStore(db *DB) *HoldActionStore { return &HoldActionStore{db: db} }

// Create records a, in the caller's transaction (the one that claims the
// hold for it) or its own.
func (s *HoldActionStore) Create(ctx context.Context, a domain.HoldAction) error {
	if !a.Status.Valid() {
		return fmt.Errorf("hold action %s: status %q is not valid", a.ID, a.Status)
	}
	amount, err := toMinor(a.Amount, a.Currency, "amount")
	if err != nil {
		return fmt.Errorf("hold action %s: %w", a.ID, err)
	}
	row := holdActionRow{
		ID: a.ID, OrderID: a.OrderID, Kind: string(a.Kind), Status: string(a.Status), AmountMinor: amount,
		Currency: string(a.Currency), RequestID: nullString(a.RequestID), FailureCode: nullString(a.FailureCode),
		LeasedUntil: tsPtr(nonZero(a.LeasedUntil)), CreatedAt: ts(a.CreatedAt), UpdatedAt: ts(a.UpdatedAt),
	}
	if err := s.db.create(ctx, &row); err != nil {
		return fmt.Errorf("create hold action %s: %w", a.ID, err)
	}
	return nil
}

// Find returns hold action id, or domain.ErrHoldActionNotFound.
func (s *HoldActionStore) Find(ctx context.Context, id string) (domain.HoldAction, error) {
	return s.first(ctx, "id = ?", id)
}

// FindByRequest returns the action of kind k the request requestID made
// on order orderID, or domain.ErrHoldActionNotFound: a request that runs
// again finds its own action, and asks about it before anything else.
func (s *HoldActionStore) FindByRequest(ctx context.Context, orderID string, k domain.HoldActionKind, requestID string) (domain.HoldAction, error) {
	return s.first(ctx, "order_id = ? AND kind = ? AND request_id = ?", orderID, string(k), requestID)
}

func (s *HoldActionStore) first(ctx context.Context, where string, args ...any) (domain.HoldAction, error) {
	var rows []holdActionRow
	if err := s.db.conn(ctx).Where(where, args...).Order("created_at, id").Limit(1).Find(&rows).Error; err != nil {
		return domain.HoldAction{}, fmt.Errorf("find hold action: %w", err)
	}
	if len(rows) == 0 {
		return domain.HoldAction{}, domain.ErrHoldActionNotFound
	}
	return rows[0].toDomain(), nil
}

// Unsettled returns actions still to be settled (started or unknown)
// whose lease ended at or before now, the oldest first, at most limit of
// them: the work of the job that takes abandoned actions over.
func (s *HoldActionStore) Unsettled(ctx context.Context, now time.Time, limit int) ([]domain.HoldAction, error) {
	var rows []holdActionRow
	err := s.db.conn(ctx).Where("status IN ? AND (leased_until IS NULL OR leased_until <= ?)",
		names(domain.HoldActionMachine.From(domain.HoldDone)), ts(now)).
		Order("created_at, id").Limit(batchSize(limit)).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("unsettled hold actions: %w", err)
	}
	out := make([]domain.HoldAction, len(rows))
	for i, r := range rows {
		out[i] = r.toDomain()
	}
	return out, nil
}

// Lease takes action id for whoever works on it until until, if its lease
// ended at or before now (or it had none) and it is still unsettled:
// false means someone else holds it, or it is settled.
func (s *HoldActionStore) Lease(ctx context.Context, id string, now, until time.Time) (bool, error) {
	return s.db.guarded(ctx, act{"lease hold action", id}, `UPDATE hold_actions SET leased_until = ?, updated_at = ?
		WHERE id = ? AND status IN `+holdUnsettled+` AND (leased_until IS NULL OR leased_until <= ?)`,
		ts(until), ts(now), id, ts(now))
}

// The hold action machine's guards.
var (
	holdUnsettled = sqlStatuses(domain.HoldActionMachine.From(domain.HoldDone)...)
	holdReplyLost = guardOf(domain.HoldActionMachine, domain.HoldReplyLost)
	holdDone      = guardOf(domain.HoldActionMachine, domain.HoldDone)
	holdRefused   = guardOf(domain.HoldActionMachine, domain.HoldRefused)
)

// Settle moves action id by event e of the hold action machine (failure
// code only for a refusal), giving up its lease once it is settled (a lost
// reply keeps it: the call may still reach the provider). false: the guard matched
// nothing (settled before, by another).
func (s *HoldActionStore) Settle(ctx context.Context, id string, e domain.HoldActionEvent, failureCode string, now time.Time) (bool, error) {
	var g statusGuard
	switch e {
	case domain.HoldReplyLost:
		g = holdReplyLost
	case domain.HoldDone:
		g = holdDone
	case domain.HoldRefused:
		g = holdRefused
	default:
		return false, fmt.Errorf("settle hold action %s: event %q", id, e)
	}
	lease := "leased_until = NULL, "
	if e == domain.HoldReplyLost {
		lease = "" // the call may still be on its way: nobody asks again before the lease ends
	}
	return s.db.guarded(ctx, act{"settle hold action", id}, `UPDATE hold_actions SET status = `+g.to+`, failure_code = ?,
		`+lease+`updated_at = ? WHERE id = ? AND status IN `+g.from, nullString(failureCode), ts(now), id)
}
