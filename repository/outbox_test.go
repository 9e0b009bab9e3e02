package repository_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// testCause is the cause the store tests give the changes they make.
var testCause = domain.Cause{Kind: domain.CauseOperator, Ref: "test"}

// usd is d in minor units of USD, the fixtures' currency.
func usd(d decimal.Decimal) int64 { return domain.MinorUnits(d, "USD") }

// eventsOf returns order id's events, by seq.
func eventsOf(t *testing.T, db *repository.DB, id string) []domain.OutboxEvent {
	t.Helper()
	es, err := repository.NewOrderStore(db).EventsOf(t.Context(), id)
	if err != nil {
		t.Fatalf("EventsOf(%s) = %v", id, err)
	}
	return es
}

// wantOneEvent checks that order o has exactly one event more than it had
// (before events), of type typ and cause c, numbered by the order's
// version and carrying the order's snapshot and its ledger's sums; it
// returns the event.
func wantOneEvent(t *testing.T, db *repository.DB, id string, before int, typ domain.NotifyType, c domain.Cause) domain.OutboxEvent {
	t.Helper()
	es := eventsOf(t, db, id)
	if len(es) != before+1 {
		t.Fatalf("order %s has %d events, want %d: %+v", id, len(es), before+1, es)
	}
	e := es[len(es)-1]
	o := findOrder(t, db, id)
	books := domain.Summarize(o.Currency, ledgerOf(t, db, id))
	switch {
	case e.Type != typ || e.Cause != c:
		t.Errorf("event %s caused by %+v, want %s caused by %+v", e.Type, e.Cause, typ, c)
	case e.Seq != o.Version:
		t.Errorf("event seq %d, want the order's version %d", e.Seq, o.Version)
	case e.OrderStatus != o.Status || e.PayRequestID != o.PayRequestID || !e.Refunded.Equal(o.RefundedAmount) || !e.UpdatedAt.Equal(o.UpdatedAt) || e.Currency != o.Currency:
		t.Errorf("event snapshot %s %q refunded %s %s at %s, want the order's %s %q %s %s at %s",
			e.OrderStatus, e.PayRequestID, e.Refunded, e.Currency, e.UpdatedAt, o.Status, o.PayRequestID, o.RefundedAmount, o.Currency, o.UpdatedAt)
	case (e.PaidAt == nil) != (o.PaidAt == nil) || (e.PaidAt != nil && !e.PaidAt.Equal(*o.PaidAt)):
		t.Errorf("event paid_at %v, want the order's %v", e.PaidAt, o.PaidAt)
	case !e.Books.Charged.Equal(books.Charged) || !e.Books.Refunded.Equal(books.Refunded) || !e.Books.Disputed.Equal(books.Disputed) ||
		!e.Books.Lost.Equal(books.Lost) || !e.Books.Net.Equal(books.Net):
		t.Errorf("event books %+v, want the ledger's %+v", e.Books, books)
	case e.FannedOut || e.ID == "" || e.CreatedAt.IsZero():
		t.Errorf("event %+v: want an id, created_at, and not fanned out", e)
	}
	return e
}

// TestOutboxEventPerChange: each change a merchant is told of writes
// exactly one event, in its transaction, with its type and cause, numbered
// by the version it left and carrying the order as it left it; a guard
// that matches nothing writes none, and the changes no one is told of
// (a claim, a refund's reservation) write none.
func TestOutboxEventPerChange(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		b := repository.NewPayBatch(db)
		ledger := repository.NewLedgerStore(db)
		tx := repository.NewTransactor(db)
		ctx := t.Context()
		later := t0.Add(time.Second)
		pay := domain.Cause{Kind: domain.CausePayRequest, Ref: "req-1"}

		// The pay path's batch: order.paid with the charge in its books.
		o, a := claimedOrder(t, db, b, "req-1")
		if n := len(eventsOf(t, db, o.ID)); n != 0 {
			t.Fatalf("a claim wrote %d events, want none", n)
		}
		if settled, paid, err := b.SucceedAndPay(ctx, a, "ch_1", entryOf(a, "ch_1", later), findOrder(t, db, o.ID).Version, pay, later); err != nil || !settled || !paid {
			t.Fatalf("SucceedAndPay = %v, %v, %v", settled, paid, err)
		}
		e := wantOneEvent(t, db, o.ID, 0, domain.NotifyOrderPaid, pay)
		if usd(e.Books.Charged) != 1200 || e.PaidAt == nil || e.OrderStatus != domain.StatusPaid {
			t.Errorf("order.paid = %+v, want paid with 12.00 charged", e)
		}
		// A second success of the attempt settles nothing: no event.
		if settled, paid, err := b.SucceedAndPay(ctx, a, "ch_1b", entryOf(a, "ch_1b", later), domain.AnyVersion, pay, later); err != nil || settled || paid {
			t.Fatalf("SucceedAndPay(again) = %v, %v, %v, want nothing", settled, paid, err)
		}
		if n := len(eventsOf(t, db, o.ID)); n != 1 {
			t.Errorf("a settlement that matched nothing left %d events, want 1", n)
		}

		// A refund: reserving tells nothing; its money moving (its entry
		// and Tell in one transaction) is order.refunded.
		if ok, err := s.MoveRefund(ctx, o.ID, domain.MoveReserve, 500, later); !ok || err != nil {
			t.Fatalf("MoveRefund = %v, %v", ok, err)
		}
		if n := len(eventsOf(t, db, o.ID)); n != 1 {
			t.Errorf("a reservation wrote an event: %d events, want 1", n)
		}
		op := domain.Cause{Kind: domain.CauseOperator, Ref: "ada"}
		err := tx.InTx(ctx, func(ctx context.Context) error {
			if _, err := ledger.Append(ctx, domain.LedgerEntry{ID: newID(), OrderID: o.ID, Kind: domain.LedgerRefund, Reference: "refund:re_1",
				ChargeID: "ch_1", Amount: dec("5.00"), Currency: "USD", Source: domain.SourcePayReply, CreatedAt: later}); err != nil {
				return err
			}
			if ok, err := s.MoveRefund(ctx, o.ID, domain.MoveSettle, 500, later); err != nil || !ok {
				return fmt.Errorf("settle = %v, %v", ok, err)
			}
			return s.Tell(ctx, o.ID, domain.NotifyOrderRefunded, op, later)
		})
		if err != nil {
			t.Fatal(err)
		}
		e = wantOneEvent(t, db, o.ID, 1, domain.NotifyOrderRefunded, op)
		if usd(e.Refunded) != 500 || usd(e.Books.Refunded) != 500 || usd(e.Books.Charged) != 1200 {
			t.Errorf("order.refunded = %+v, want 5.00 refunded of 12.00", e)
		}
		// A dispute's step, outside a caller's transaction.
		hook := domain.Cause{Kind: domain.CauseWebhook, Ref: "evt_1"}
		appendEntry(t, ledger, domain.LedgerEntry{ID: newID(), OrderID: o.ID, Kind: domain.LedgerDisputeOpened, Reference: "dispute:dp_1:dispute_opened",
			ChargeID: "ch_1", Amount: dec("7.00"), Currency: "USD", Source: domain.SourceWebhook, CreatedAt: later})
		if err := s.Tell(ctx, o.ID, domain.NotifyOrderDisputed, hook, later); err != nil {
			t.Fatal(err)
		}
		if e = wantOneEvent(t, db, o.ID, 2, domain.NotifyOrderDisputed, hook); usd(e.Books.Disputed) != 700 {
			t.Errorf("order.disputed books %+v, want 7.00 disputed", e.Books)
		}
		appendEntry(t, ledger, domain.LedgerEntry{ID: newID(), OrderID: o.ID, Kind: domain.LedgerDisputeLost, Reference: "dispute:dp_1:dispute_lost",
			ChargeID: "ch_1", Amount: dec("7.00"), Currency: "USD", Source: domain.SourceWebhook, CreatedAt: later})
		if err := s.Tell(ctx, o.ID, domain.NotifyOrderDisputeClosed, hook, later); err != nil {
			t.Fatal(err)
		}
		if e = wantOneEvent(t, db, o.ID, 3, domain.NotifyOrderDisputeClosed, hook); usd(e.Books.Disputed) != 0 || usd(e.Books.Lost) != 700 {
			t.Errorf("order.dispute_closed books %+v, want 7.00 lost, none disputed", e.Books)
		}
		// Every kind the sums weigh, each way, and an entry in another
		// currency, which no sum counts (domain.Summarize's rules).
		for _, en := range []struct {
			kind             domain.LedgerKind
			ref, amount, cur string
		}{
			{domain.LedgerRefundReversed, "refund:re_1:reversed", "2.00", "USD"},
			{domain.LedgerOutsideRefund, "outside:re_2", "1.00", "USD"},
			{domain.LedgerDisputeOpened, "dispute:dp_2:dispute_opened", "3.00", "USD"},
			{domain.LedgerDisputeWon, "dispute:dp_2:dispute_won", "3.00", "USD"},
			{domain.LedgerCharge, "charge:ch_eur", "9.00", "EUR"},
		} {
			appendEntry(t, ledger, domain.LedgerEntry{ID: newID(), OrderID: o.ID, Kind: en.kind, Reference: en.ref,
				ChargeID: "ch_1", Amount: dec(en.amount), Currency: domain.Currency(en.cur), Source: domain.SourceWebhook, CreatedAt: later})
		}
		if err := s.Tell(ctx, o.ID, domain.NotifyOrderRefunded, hook, later); err != nil {
			t.Fatal(err)
		}
		if e = wantOneEvent(t, db, o.ID, 4, domain.NotifyOrderRefunded, hook); usd(e.Books.Charged) != 1200 || usd(e.Books.Refunded) != 400 ||
			usd(e.Books.Disputed) != 0 || usd(e.Books.Lost) != 700 {
			t.Errorf("books %+v, want 12.00 charged, 4.00 refunded (5.00 + 1.00 - 2.00), none disputed, 7.00 lost", e.Books)
		}
		if err := s.Tell(ctx, "no-such-order", domain.NotifyOrderRefunded, op, later); !errors.Is(err, domain.ErrOrderNotFound) {
			t.Errorf("Tell(unknown order) = %v, want ErrOrderNotFound", err)
		}

		// Release, Cancel and expiry, each outside a caller's
		// transaction, and MarkPaid in one.
		for _, tc := range []struct {
			typ   domain.NotifyType
			setup []step
			do    func(id string) (bool, error)
		}{
			{domain.NotifyOrderPaymentFailed, []step{claim("req-1")}, func(id string) (bool, error) { return s.Release(ctx, id, "req-1", pay, later) }},
			{domain.NotifyOrderCancelled, nil, func(id string) (bool, error) { return s.Cancel(ctx, id, pay, later) }},
			{domain.NotifyOrderExpired, nil, func(id string) (bool, error) {
				ids, err := s.ExpireDue(ctx, pay, t0.Add(2*time.Hour), 0)
				return len(ids) > 0 && ids[len(ids)-1] == id, err
			}},
			{domain.NotifyOrderPaid, []step{claim("req-1")}, func(id string) (bool, error) {
				var ok bool
				err := tx.InTx(ctx, func(ctx context.Context) error {
					var err error
					ok, err = s.MarkPaid(ctx, id, "req-1", pay, later)
					return err
				})
				return ok, err
			}},
		} {
			o := orderAfter(t, db, tc.setup...)
			if ok, err := tc.do(o.ID); !ok || err != nil {
				t.Fatalf("%s: change = %v, %v", tc.typ, ok, err)
			}
			wantOneEvent(t, db, o.ID, 0, tc.typ, pay)
			if ok, err := tc.do(o.ID); ok || err != nil {
				t.Fatalf("%s: change again = %v, %v, want no match", tc.typ, ok, err)
			}
			if n := len(eventsOf(t, db, o.ID)); n != 1 {
				t.Errorf("%s: a guard that matched nothing wrote an event (%d events)", tc.typ, n)
			}
		}

		// Unknown types and causes are refused before anything is written.
		o2 := orderAfter(t, db)
		if _, err := s.Cancel(ctx, o2.ID, domain.Cause{Kind: "mystery"}, later); err == nil {
			t.Error("Cancel with an unknown cause = nil, want an error")
		}
		if err := s.Tell(ctx, o2.ID, "order.vanished", op, later); err == nil {
			t.Error("Tell of an unknown type = nil, want an error")
		}
		if got := findOrder(t, db, o2.ID); got.Status != domain.StatusPending || got.Version != o2.Version {
			t.Errorf("refused changes moved the order to %s at %d", got.Status, got.Version)
		}
	})
}

// TestOutboxRestamp: a transaction that pays the order and then counts a
// refund into it tells one change, the order as both left it.
func TestOutboxRestamp(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		ctx := t.Context()
		later := t0.Add(time.Second)
		o := orderAfter(t, db, claim("req-1"))
		err := repository.NewTransactor(db).InTx(ctx, func(ctx context.Context) error {
			if ok, err := s.MarkPaid(ctx, o.ID, "req-1", testCause, later); err != nil || !ok {
				return fmt.Errorf("MarkPaid = %v, %v", ok, err)
			}
			if ok, err := s.MoveRefund(ctx, o.ID, domain.MoveCount, 1200, later); err != nil || !ok {
				return fmt.Errorf("MoveRefund = %v, %v", ok, err)
			}
			return s.Restamp(ctx, o.ID)
		})
		if err != nil {
			t.Fatal(err)
		}
		if e := wantOneEvent(t, db, o.ID, 0, domain.NotifyOrderPaid, testCause); e.OrderStatus != domain.StatusRefunded || usd(e.Refunded) != 1200 {
			t.Errorf("restamped event %s refunded %d, want refunded 1200", e.OrderStatus, e.Refunded)
		}
		if err := s.Restamp(ctx, o.ID); err == nil {
			t.Error("Restamp outside a transaction = nil, want an error")
		}
		err = repository.NewTransactor(db).InTx(ctx, func(ctx context.Context) error { return s.Restamp(ctx, o.ID) })
		if err == nil {
			t.Error("Restamp with no event of this transaction's = nil, want an error")
		}
	})
}

// TestOutboxRollback: a change whose transaction rolls back — at COMMIT,
// in a batch of its own or in its caller's transaction, on MySQL's
// one-packet batch too — leaves neither the change nor its event.
func TestOutboxRollback(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		db.SetRetry(1, time.Millisecond, time.Millisecond)
		s := repository.NewOrderStore(db)
		b := repository.NewPayBatch(db)
		ctx := t.Context()
		later := t0.Add(time.Second)
		failed := errors.New("injected commit failure")
		failCommit := func(on bool) {
			if !on {
				db.FailAt(nil)
				return
			}
			db.FailAt(func(point string) error {
				if point == "commit" {
					return failed
				}
				return nil
			})
		}
		inTx := func(fn func(ctx context.Context) error) error { return repository.NewTransactor(db).InTx(ctx, fn) }

		o, a := claimedOrder(t, db, b, "req-1")
		for _, tc := range []struct {
			name string
			do   func() error
		}{
			{"SucceedAndPay", func() error {
				_, _, err := b.SucceedAndPay(ctx, a, "ch_1", entryOf(a, "ch_1", later), domain.AnyVersion, testCause, later)
				return err
			}},
			{"MarkPaid in a transaction", func() error {
				return inTx(func(ctx context.Context) error {
					_, err := s.MarkPaid(ctx, o.ID, "req-1", testCause, later)
					return err
				})
			}},
			{"Release", func() error { _, err := s.Release(ctx, o.ID, "req-1", testCause, later); return err }},
			{"Tell", func() error { return s.Tell(ctx, o.ID, domain.NotifyOrderRefunded, testCause, later) }},
			{"Tell in a transaction", func() error {
				return inTx(func(ctx context.Context) error {
					return s.Tell(ctx, o.ID, domain.NotifyOrderDisputed, testCause, later)
				})
			}},
		} {
			before := findOrder(t, db, o.ID)
			failCommit(true)
			err := tc.do()
			failCommit(false)
			if !errors.Is(err, failed) {
				t.Errorf("%s = %v, want the commit's failure", tc.name, err)
			}
			if n := len(eventsOf(t, db, o.ID)); n != 0 {
				t.Errorf("%s rolled back, yet left %d events", tc.name, n)
			}
			if got := findOrder(t, db, o.ID); got.Version != before.Version || got.Status != before.Status {
				t.Errorf("%s rolled back, yet the order is %s at %d (was %s at %d)", tc.name, got.Status, got.Version, before.Status, before.Version)
			}
		}
		for _, tc := range []struct {
			name string
			do   func(id string) error
		}{
			{"Cancel", func(id string) error { _, err := s.Cancel(ctx, id, testCause, later); return err }},
			{"ExpireDue", func(id string) error { _, err := s.ExpireDue(ctx, testCause, t0.Add(2*time.Hour), 0); return err }},
		} {
			p := orderAfter(t, db)
			failCommit(true)
			err := tc.do(p.ID)
			failCommit(false)
			if !errors.Is(err, failed) {
				t.Errorf("%s = %v, want the commit's failure", tc.name, err)
			}
			if n := len(eventsOf(t, db, p.ID)); n != 0 {
				t.Errorf("%s rolled back, yet left %d events", tc.name, n)
			}
			if got := findOrder(t, db, p.ID); got.Status != domain.StatusPending {
				t.Errorf("%s rolled back, yet the order is %s", tc.name, got.Status)
			}
		}
		// And once the failure is gone, the same change writes its one event.
		if _, _, err := b.SucceedAndPay(ctx, a, "ch_1", entryOf(a, "ch_1", later), domain.AnyVersion, testCause, later); err != nil {
			t.Fatal(err)
		}
		wantOneEvent(t, db, o.ID, 0, domain.NotifyOrderPaid, testCause)
	})
}

// TestOutboxConcurrentChanges races every change on the same orders from
// many goroutines, on the real database: each call that reports a change
// committed wrote exactly one event, no call failed (the unique key on
// (order_id, seq) is never hit in normal operation), and each order's
// events are numbered by versions, in the order of its changes.
func TestOutboxConcurrentChanges(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		tx := repository.NewTransactor(db)
		ctx := t.Context()
		const orders, workers, rounds = 6, 8, 12
		ids := make([]string, orders)
		told := make([]atomic.Int64, orders)
		for i := range ids {
			ids[i] = newOrder(t, db).ID
		}
		index := map[string]int{}
		for i, id := range ids {
			index[id] = i
		}
		var wg sync.WaitGroup
		errs := make(chan error, workers*rounds)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(w), 7))
				req := fmt.Sprintf("req-%d", w)
				now := t0.Add(time.Duration(w) * time.Millisecond)
				for range rounds {
					i := r.IntN(orders)
					id := ids[i]
					var ok bool
					var err error
					switch r.IntN(7) {
					case 0, 1:
						_, err = s.Claim(ctx, id, req, domain.AnyVersion, now)
					case 2:
						ok, err = s.MarkPaid(ctx, id, req, testCause, now)
					case 3:
						ok, err = s.Release(ctx, id, req, testCause, now)
					case 4:
						ok, err = s.Cancel(ctx, id, testCause, now)
					case 5:
						err = tx.InTx(ctx, func(ctx context.Context) error {
							ok = false
							if err := s.Tell(ctx, id, domain.NotifyOrderRefunded, testCause, now); err != nil {
								return err
							}
							ok = true
							return nil
						})
					case 6:
						var expired []string
						expired, err = s.ExpireDue(ctx, testCause, t0.Add(2*time.Hour), 2)
						for _, x := range expired {
							told[index[x]].Add(1)
						}
					}
					if err != nil {
						errs <- err
					}
					if ok {
						told[i].Add(1)
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("a change failed: %v", err)
		}
		for i, id := range ids {
			es := eventsOf(t, db, id)
			if int64(len(es)) != told[i].Load() {
				t.Errorf("order %s: %d events for %d committed changes", id, len(es), told[i].Load())
			}
			o := findOrder(t, db, id)
			for j, e := range es {
				if j > 0 && e.Seq <= es[j-1].Seq {
					t.Errorf("order %s: event seqs %d then %d", id, es[j-1].Seq, e.Seq)
				}
				if e.Seq > o.Version {
					t.Errorf("order %s: event seq %d beyond its version %d", id, e.Seq, o.Version)
				}
			}
		}
	})
}

// TestOutboxPayBatchPacket holds SucceedAndPay's fourth statement to the
// one before it, on MySQL's one-packet batch (ROW_COUNT() in an INSERT ...
// SELECT FROM orders) as on SQLite's statements: settled but not paid (the
// order moved since its caller read it) writes no event; paid writes one;
// a charge booked already rolls everything back, the event too.
func TestOutboxPayBatchPacket(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		b := repository.NewPayBatch(db)
		ctx := t.Context()
		later := t0.Add(time.Second)

		o, a := claimedOrder(t, db, b, "req-1")
		read := findOrder(t, db, o.ID)
		if _, err := repository.NewOrderStore(db).Lock(ctx, o.ID); err != nil {
			t.Fatal(err)
		}
		if settled, paid, err := b.SucceedAndPay(ctx, a, "ch_1", entryOf(a, "ch_1", later), read.Version, testCause, later); err != nil || !settled || paid {
			t.Fatalf("SucceedAndPay(older version) = %v, %v, %v, want settled, not paid", settled, paid, err)
		}
		if n := len(eventsOf(t, db, o.ID)); n != 0 {
			t.Errorf("settled but not paid: %d events, want none", n)
		}

		o2, a2 := claimedOrder(t, db, b, "req-2")
		if v := findOrder(t, db, o2.ID).Version; v != domain.CreatedVersion+1 {
			t.Fatalf("a new order claimed: version %d, want %d", v, domain.CreatedVersion+1)
		}
		if settled, paid, err := b.SucceedAndPay(ctx, a2, "ch_2", entryOf(a2, "ch_2", later), findOrder(t, db, o2.ID).Version, testCause, later); err != nil || !settled || !paid {
			t.Fatalf("SucceedAndPay = %v, %v, %v, want settled and paid", settled, paid, err)
		}
		wantOneEvent(t, db, o2.ID, 0, domain.NotifyOrderPaid, testCause)

		// Paid at the version its first claim left (the pay of a new
		// order): the event is written from what the packet knows, and
		// must say what a read of the order and its ledger says.
		// Changed once before its claim: it is read, as every other
		// event is.
		o4 := newOrder(t, db)
		if _, err := repository.NewOrderStore(db).Lock(ctx, o4.ID); err != nil {
			t.Fatal(err)
		}
		a4 := attemptFor(o4, "req-4")
		if ok, err := b.Claim(ctx, a4, domain.CreatedVersion+1, t0); err != nil || !ok {
			t.Fatalf("Claim(changed order) = %v, %v", ok, err)
		}
		if v := findOrder(t, db, o4.ID).Version; v != domain.CreatedVersion+2 {
			t.Fatalf("claimed after a change: version %d, want %d", v, domain.CreatedVersion+2)
		}
		if settled, paid, err := b.SucceedAndPay(ctx, a4, "ch_4", entryOf(a4, "ch_4", later), domain.CreatedVersion+2, testCause, later); err != nil || !settled || !paid {
			t.Fatalf("SucceedAndPay(changed order) = %v, %v, %v, want settled and paid", settled, paid, err)
		}
		wantOneEvent(t, db, o4.ID, 0, domain.NotifyOrderPaid, testCause)

		o3, a3 := claimedOrder(t, db, b, "req-3")
		if settled, paid, err := b.SucceedAndPay(ctx, a3, "ch_2", entryOf(a3, "ch_2", later), domain.AnyVersion, testCause, later); err != nil || settled || paid {
			t.Fatalf("SucceedAndPay(charge booked already) = %v, %v, %v, want nothing written", settled, paid, err)
		}
		if n := len(eventsOf(t, db, o3.ID)); n != 0 {
			t.Errorf("a rolled-back settlement left %d events", n)
		}
	})
}
