package repository_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// machineStep is the store's statement for one event of the order state
// machine, run on order id at now.
type machineStep func(ctx context.Context, s *repository.OrderStore, o domain.Order, now time.Time) (bool, error)

// machineSteps maps every event of domain's table to the guarded statement
// that performs it. The request ID is the one orderIn records, so a guard
// that refuses does so because of the status, not the request.
var machineSteps = map[domain.Event]machineStep{
	domain.EventClaim: func(ctx context.Context, s *repository.OrderStore, o domain.Order, now time.Time) (bool, error) {
		return s.Claim(ctx, o.ID, machineRequest, domain.AnyVersion, now)
	},
	domain.EventSucceed: func(ctx context.Context, s *repository.OrderStore, o domain.Order, now time.Time) (bool, error) {
		return s.MarkPaid(ctx, o.ID, machineRequest, testCause, now)
	},
	domain.EventRelease: func(ctx context.Context, s *repository.OrderStore, o domain.Order, now time.Time) (bool, error) {
		return s.Release(ctx, o.ID, machineRequest, testCause, now)
	},
	domain.EventCancel: func(ctx context.Context, s *repository.OrderStore, o domain.Order, now time.Time) (bool, error) {
		return s.Cancel(ctx, o.ID, testCause, now)
	},
	domain.EventExpire: func(ctx context.Context, s *repository.OrderStore, o domain.Order, _ time.Time) (bool, error) {
		ids, err := s.ExpireDue(ctx, testCause, o.ExpiresAt, 0) // due exactly now (earlier rows of the test may go too)
		return slices.Contains(ids, o.ID), err
	},
	domain.EventRefundPartial: func(ctx context.Context, s *repository.OrderStore, o domain.Order, now time.Time) (bool, error) {
		return s.MoveRefund(ctx, o.ID, domain.MoveCount, 1, now)
	},
	domain.EventRefundFull: func(ctx context.Context, s *repository.OrderStore, o domain.Order, now time.Time) (bool, error) {
		rest := domain.MinorUnits(o.Amount.Sub(o.RefundedAmount), o.Currency)
		return s.MoveRefund(ctx, o.ID, domain.MoveCount, max(rest, 1), now)
	},
	domain.EventRefundReversed: func(ctx context.Context, s *repository.OrderStore, o domain.Order, now time.Time) (bool, error) {
		return s.MoveRefund(ctx, o.ID, domain.MoveReverse, 1, now)
	},
	domain.EventAuthorize: func(ctx context.Context, s *repository.OrderStore, o domain.Order, now time.Time) (bool, error) {
		return s.MarkAuthorized(ctx, o.ID, machineRequest, now.Add(time.Hour), testCause, now)
	},
	domain.EventCapture: func(ctx context.Context, s *repository.OrderStore, o domain.Order, now time.Time) (bool, error) {
		return s.EndHold(ctx, machineHold(o, domain.HoldCapture), o.Amount, testCause, now)
	},
	domain.EventVoid: func(ctx context.Context, s *repository.OrderStore, o domain.Order, now time.Time) (bool, error) {
		return s.EndHold(ctx, machineHold(o, domain.HoldVoid), decimal.Zero, testCause, now)
	},
	domain.EventLapse: func(ctx context.Context, s *repository.OrderStore, o domain.Order, now time.Time) (bool, error) {
		return s.EndHold(ctx, machineHold(o, domain.HoldLapse), decimal.Zero, testCause, now)
	},
}

// machineHoldID owns the hold of every order orderIn stores, so a hold's
// end is refused for the order's status only.
const machineHoldID = "ha-machine"

// machineHold is the hold action of kind k that owns o's hold.
func machineHold(o domain.Order, k domain.HoldActionKind) domain.HoldAction {
	return domain.HoldAction{ID: machineHoldID, OrderID: o.ID, Kind: k, Currency: o.Currency}
}

const machineRequest = "req-machine"

// orderIn stores an order standing in status, claimed (where a claim
// belongs to its story) by machineRequest. One minor unit of it is
// refunded (all of it, for a refunded order), so a reversed refund has
// confirmed money to take back and a full refund something left: only the
// status decides.
func orderIn(t *testing.T, db *repository.DB, status domain.OrderStatus) domain.Order {
	t.Helper()
	o := newOrder(t, db)
	payRequest := any(nil)
	if status != domain.StatusPending && status != domain.StatusCancelled && status != domain.StatusExpired {
		payRequest = machineRequest
	}
	refunded := int64(1)
	if status == domain.StatusRefunded {
		refunded = domain.MinorUnits(o.Amount, o.Currency)
	}
	// A manual order that captured all of it, owned by machineHoldID: the
	// hold's events and the refunds are refused for the status alone.
	err := db.Gorm().Exec("UPDATE orders SET status = ?, pay_request_id = ?, refunded_minor = ?, capture_method = 'manual', captured_minor = amount_minor, hold_action = ? WHERE id = ?",
		string(status), payRequest, refunded, machineHoldID, o.ID).Error
	if err != nil {
		t.Fatal(err)
	}
	return findOrder(t, db, o.ID)
}

// TestOrderMachineMatchesTable runs every event of the order state machine
// from every status, on both databases, and checks the store's guarded
// statements against domain's table: an event applies exactly where the
// table has an entry, and leads to the status the table names; anywhere
// else the statement matches nothing and the row is left as it was.
func TestOrderMachineMatchesTable(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		for _, ev := range domain.Events {
			step, ok := machineSteps[ev]
			if !ok {
				t.Fatalf("event %s has no store statement in this test", ev)
			}
			for _, from := range domain.Statuses {
				o := orderIn(t, db, from)
				applied, err := step(t.Context(), s, o, t0.Add(time.Minute))
				if err != nil {
					t.Fatalf("%s from %s: %v", ev, from, err)
				}
				want, werr := domain.Next(from, ev)
				got := findOrder(t, db, o.ID)
				switch {
				case werr == nil && !applied:
					t.Errorf("%s from %s did not apply; the table says it leads to %s", ev, from, want)
				case werr != nil && applied:
					t.Errorf("%s from %s applied (now %s); the table has no such transition", ev, from, got.Status)
				case werr == nil && got.Status != want:
					t.Errorf("%s from %s led to %s, the table says %s", ev, from, got.Status, want)
				case werr != nil && (got.Status != from || got.Version != o.Version):
					t.Errorf("%s from %s refused but moved the row to %s (version %d → %d)", ev, from, got.Status, o.Version, got.Version)
				}
			}
		}
	})
}
