package repository_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// attemptFor builds a started attempt of request requestID on o.
func attemptFor(o domain.Order, requestID string) domain.Attempt {
	inFlight := t0.Add(40 * time.Second)
	return domain.Attempt{ID: newID(), OrderID: o.ID, RequestID: requestID, Status: domain.AttemptStarted,
		PaymentMethod: "pm_ok", Amount: o.Amount, Currency: o.Currency, CreatedAt: t0, UpdatedAt: t0,
		LeasedUntil: inFlight, InFlightUntil: inFlight}
}

// claimedOrder is a new order claimed by requestID through b, and the
// claim's attempt.
func claimedOrder(t *testing.T, db *repository.DB, b *repository.PayBatch, requestID string) (domain.Order, domain.Attempt) {
	t.Helper()
	o := newOrder(t, db)
	a := attemptFor(o, requestID)
	if ok, err := b.Claim(t.Context(), a, o.Version, t0); err != nil || !ok {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
	return o, a
}

// entryOf builds (without storing) the ledger entry of a's charge
// chargeID, told by the pay reply at now, as Checkout builds it.
func entryOf(a domain.Attempt, chargeID string, now time.Time) domain.LedgerEntry {
	return domain.LedgerEntry{
		ID: newID(), OrderID: a.OrderID, Kind: domain.LedgerCharge, Reference: domain.ChargeReference(chargeID),
		ChargeID: chargeID, Amount: a.Amount, Currency: a.Currency, Source: domain.SourcePayReply, CreatedAt: now,
	}
}

func attemptsOf(t *testing.T, db *repository.DB, orderID string) []domain.Attempt {
	t.Helper()
	as, err := repository.NewAttemptStore(db).ListByOrder(t.Context(), orderID)
	if err != nil {
		t.Fatalf("ListByOrder = %v", err)
	}
	return as
}

func TestPayBatchClaim(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		b := repository.NewPayBatch(db)
		ctx := t.Context()

		o := newOrder(t, db)
		first := attemptFor(o, "req-1")
		if ok, err := b.Claim(ctx, first, o.Version, t0); err != nil || !ok {
			t.Fatalf("Claim(pending) = %v, %v, want true", ok, err)
		}
		got := findOrder(t, db, o.ID)
		if got.Status != domain.StatusProcessing || got.PayRequestID != "req-1" || got.Version != o.Version+1 {
			t.Errorf("after the claim: order %s, request %q, version %d", got.Status, got.PayRequestID, got.Version)
		}
		if as := attemptsOf(t, db, o.ID); len(as) != 1 || as[0].ID != first.ID || as[0].Status != domain.AttemptStarted {
			t.Errorf("after the claim: attempts %+v, want %s started", as, first.ID)
		}

		// A second claim matches no row: its attempt is rolled back with it.
		if ok, err := b.Claim(ctx, attemptFor(o, "req-2"), domain.AnyVersion, t0); err != nil || ok {
			t.Fatalf("Claim(processing) = %v, %v, want false", ok, err)
		}
		if as := attemptsOf(t, db, o.ID); len(as) != 1 {
			t.Errorf("an unclaimed order got %d attempts, want the first alone", len(as))
		}
		if again := findOrder(t, db, o.ID); again.Version != got.Version || again.PayRequestID != "req-1" {
			t.Errorf("a refused claim changed the order: version %d, request %q", again.Version, again.PayRequestID)
		}

		// Past expires_at the guard refuses, and nothing is written.
		late := newOrder(t, db)
		if ok, err := b.Claim(ctx, attemptFor(late, "req-3"), late.Version, late.ExpiresAt); err != nil || ok {
			t.Fatalf("Claim(expired) = %v, %v, want false", ok, err)
		}
		if as := attemptsOf(t, db, late.ID); len(as) != 0 {
			t.Errorf("an expired order got %d attempts", len(as))
		}
		if o := findOrder(t, db, late.ID); o.Status != domain.StatusPending {
			t.Errorf("an expired claim left the order %s", o.Status)
		}
	})
}

// TestPayBatchClaimRace: many requests claim one order at once; one wins,
// and the order has exactly one attempt.
func TestPayBatchClaimRace(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		b := repository.NewPayBatch(db)
		for range 5 {
			o := newOrder(t, db)
			const n = 16
			var wg sync.WaitGroup
			won := make(chan string, n)
			start := make(chan struct{})
			for i := range n {
				wg.Go(func() {
					a := attemptFor(o, "req-"+string(rune('a'+i)))
					<-start
					ok, err := b.Claim(context.Background(), a, o.Version, t0)
					if err != nil {
						t.Errorf("Claim = %v", err)
					}
					if ok {
						won <- a.RequestID
					}
				})
			}
			close(start)
			wg.Wait()
			close(won)
			var winners []string
			for r := range won {
				winners = append(winners, r)
			}
			if len(winners) != 1 {
				t.Fatalf("%d claims won, want 1: %v", len(winners), winners)
			}
			as := attemptsOf(t, db, o.ID)
			if len(as) != 1 || as[0].RequestID != winners[0] {
				t.Errorf("attempts %+v, want one of %s", as, winners[0])
			}
			if got := findOrder(t, db, o.ID); got.PayRequestID != winners[0] || got.Version != o.Version+1 {
				t.Errorf("order claimed by %q at version %d, want %s at %d", got.PayRequestID, got.Version, winners[0], o.Version+1)
			}
		}
	})
}

func TestPayBatchSucceedAndPay(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		b := repository.NewPayBatch(db)
		ctx := t.Context()
		later := t0.Add(time.Second)

		o, a := claimedOrder(t, db, b, "req-1")
		if settled, paid, err := b.SucceedAndPay(ctx, a, "ch_1", entryOf(a, "ch_1", later), domain.AnyVersion, testCause, later); err != nil || !settled || !paid {
			t.Fatalf("SucceedAndPay = %v, %v, %v, want settled and paid", settled, paid, err)
		}
		got := findOrder(t, db, o.ID)
		if got.Status != domain.StatusPaid || got.PaidAt == nil || !got.PaidAt.Equal(later) {
			t.Errorf("order %s paid at %v, want paid at %v", got.Status, got.PaidAt, later)
		}
		if as := attemptsOf(t, db, o.ID); as[0].Status != domain.AttemptSucceeded || as[0].ProviderChargeID != "ch_1" {
			t.Errorf("attempt %s charge %q, want succeeded ch_1", as[0].Status, as[0].ProviderChargeID)
		}
		if es := ledgerOf(t, db, o.ID); len(es) != 1 || es[0].Reference != domain.ChargeReference("ch_1") ||
			es[0].ChargeID != "ch_1" || !es[0].Amount.Equal(o.Amount) || es[0].Kind != domain.LedgerCharge {
			t.Errorf("ledger %+v, want the charge ch_1 of %s", es, o.Amount)
		}
		// Settled already: the attempt's guard refuses, nothing changes.
		if settled, paid, err := b.SucceedAndPay(ctx, a, "ch_2", entryOf(a, "ch_2", later.Add(time.Second)), domain.AnyVersion, testCause, later.Add(time.Second)); err != nil || settled || paid {
			t.Fatalf("SucceedAndPay(settled) = %v, %v, %v, want neither", settled, paid, err)
		}
		if findOrder(t, db, o.ID).Version != got.Version {
			t.Errorf("a refused settlement changed the order")
		}
		if as := attemptsOf(t, db, o.ID); as[0].ProviderChargeID != "ch_1" {
			t.Errorf("a refused settlement changed the attempt's charge to %q", as[0].ProviderChargeID)
		}
		if es := ledgerOf(t, db, o.ID); len(es) != 1 {
			t.Errorf("a refused settlement recorded a charge: %+v", es)
		}

		// The order is settled already but the attempt is not (a webhook
		// paid it; here, the order was moved by hand): the attempt's guard
		// holds, the order's does not. The attempt's success is committed
		// alone, as Checkout.succeed's transaction commits it.
		o3, a3 := claimedOrder(t, db, b, "req-3")
		if ok, err := repository.NewOrderStore(db).MarkPaid(ctx, o3.ID, "req-3", testCause, t0); err != nil || !ok {
			t.Fatalf("MarkPaid = %v, %v", ok, err)
		}
		if settled, paid, err := b.SucceedAndPay(ctx, a3, "ch_3", entryOf(a3, "ch_3", later), domain.AnyVersion, testCause, later); err != nil || !settled || paid {
			t.Fatalf("SucceedAndPay(order paid already) = %v, %v, %v, want settled, not paid", settled, paid, err)
		}
		if as := attemptsOf(t, db, o3.ID); as[0].Status != domain.AttemptSucceeded || as[0].ProviderChargeID != "ch_3" {
			t.Errorf("attempt %s charge %q, want succeeded ch_3", as[0].Status, as[0].ProviderChargeID)
		}
		if got := findOrder(t, db, o3.ID); got.Version != o3.Version+2 {
			t.Errorf("order version %d, want %d: the settlement moved it again", got.Version, o3.Version+2)
		}
		// The money moved though the order could not take it: the charge
		// is booked with the attempt's success, for the orphan path to
		// give back beside it.
		if es := ledgerOf(t, db, o3.ID); len(es) != 1 || es[0].Reference != domain.ChargeReference("ch_3") {
			t.Errorf("a settlement that did not pay the order booked %+v, want its charge ch_3", es)
		}

		// The attempt was settled otherwise meanwhile (held for other
		// money) while the order is still processing for its request: the
		// attempt's guard refuses, and the order's UPDATE, whose own guard
		// would hold, must not run.
		o4, a4 := claimedOrder(t, db, b, "req-4")
		if ok, err := repository.NewAttemptStore(db).Hold(ctx, a4.ID, "ch_held", t0); err != nil || !ok {
			t.Fatalf("Hold = %v, %v", ok, err)
		}
		before := findOrder(t, db, o4.ID)
		if settled, paid, err := b.SucceedAndPay(ctx, a4, "ch_held", entryOf(a4, "ch_held", later), domain.AnyVersion, testCause, later); err != nil || settled || paid {
			t.Fatalf("SucceedAndPay(held attempt) = %v, %v, %v, want neither", settled, paid, err)
		}
		if got := findOrder(t, db, o4.ID); got.Status != domain.StatusProcessing || got.Version != before.Version {
			t.Errorf("a held attempt's settlement paid the order: %s, version %d (was %d)", got.Status, got.Version, before.Version)
		}

		// The attempt's guard holds but the order's does not (another
		// request holds the claim): the attempt's success is committed
		// alone, and the order is left to the request that holds it.
		o2 := newOrder(t, db)
		mine, theirs := attemptFor(o2, "req-mine"), attemptFor(o2, "req-theirs")
		if ok, err := b.Claim(ctx, theirs, o2.Version, t0); err != nil || !ok {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		if err := repository.NewAttemptStore(db).Create(ctx, mine); err != nil {
			t.Fatal(err)
		}
		if settled, paid, err := b.SucceedAndPay(ctx, mine, "ch_4", entryOf(mine, "ch_4", later), domain.AnyVersion, testCause, later); err != nil || !settled || paid {
			t.Fatalf("SucceedAndPay(order claimed by another) = %v, %v, %v, want settled, not paid", settled, paid, err)
		}
		mineNow, err := repository.NewAttemptStore(db).FindByID(ctx, mine.ID)
		if err != nil {
			t.Fatal(err)
		}
		if mineNow.Status != domain.AttemptSucceeded || mineNow.ProviderChargeID != "ch_4" {
			t.Errorf("the attempt is %s with charge %q, want succeeded ch_4", mineNow.Status, mineNow.ProviderChargeID)
		}
		if got := findOrder(t, db, o2.ID); got.Status != domain.StatusProcessing || got.PayRequestID != "req-theirs" {
			t.Errorf("order %s for %q, want processing for req-theirs", got.Status, got.PayRequestID)
		}
		if es := ledgerOf(t, db, o2.ID); len(es) != 1 || es[0].Reference != domain.ChargeReference("ch_4") {
			t.Errorf("ledger %+v, want the charge ch_4 booked with its attempt", es)
		}
	})
}

// TestPayBatchChargeRecorded: the charge's entry is in the ledger already
// (another path recorded it first). The ledger's INSERT, the last of the
// transaction, fails on its reference: on MySQL inside the one packet,
// after the attempt's and the order's UPDATEs matched. Nothing is written
// — the attempt is not settled, the order not paid, no second entry — the
// call reports not settled and no error, so the caller settles step by
// step, and the connection is not left inside the transaction.
func TestPayBatchChargeRecorded(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		if d == migrations.MySQL {
			for _, p := range db.Pools() {
				p.SetMaxOpenConns(1) // the next statement runs on the batch's connection
			}
		}
		b := repository.NewPayBatch(db)
		ctx := t.Context()
		later := t0.Add(time.Second)
		o, a := claimedOrder(t, db, b, "req-1")
		before := findOrder(t, db, o.ID)
		recorded := entryOf(a, "ch_1", t0)
		appendEntry(t, repository.NewLedgerStore(db), recorded)

		settled, paid, err := b.SucceedAndPay(ctx, a, "ch_1", entryOf(a, "ch_1", later), domain.AnyVersion, testCause, later)
		if err != nil || settled || paid {
			t.Fatalf("SucceedAndPay(charge recorded) = %v, %v, %v, want neither and no error", settled, paid, err)
		}
		if as := attemptsOf(t, db, o.ID); len(as) != 1 || as[0].Status != domain.AttemptStarted || as[0].ProviderChargeID != "" {
			t.Errorf("attempt %s with charge %q, want started without one: the settlement was not rolled back", as[0].Status, as[0].ProviderChargeID)
		}
		if got := findOrder(t, db, o.ID); got.Status != domain.StatusProcessing || got.Version != before.Version || got.PaidAt != nil {
			t.Errorf("order %s at version %d (was %d), want processing and unmoved: the payment was not rolled back", got.Status, got.Version, before.Version)
		}
		if es := ledgerOf(t, db, o.ID); len(es) != 1 || es[0].ID != recorded.ID {
			t.Errorf("ledger %+v, want the recorded entry alone", es)
		}
		if d == migrations.MySQL {
			var in int
			if err := db.Gorm().Raw("SELECT @@in_transaction").Row().Scan(&in); err != nil {
				t.Logf("@@in_transaction not known here (%v): not checked", err)
			} else if in != 0 {
				t.Errorf("the connection went back to the pool inside a transaction")
			}
		}

		// Step by step, as the caller then settles, the repeat is harmless.
		err = repository.NewTransactor(db).InTx(ctx, func(ctx context.Context) error {
			if ok, err := repository.NewAttemptStore(db).Succeed(ctx, a.ID, "ch_1", later); err != nil || !ok {
				return errors.Join(err, errors.New("the attempt did not settle"))
			}
			if ok, err := repository.NewOrderStore(db).MarkPaid(ctx, o.ID, "req-1", testCause, later); err != nil || !ok {
				return errors.Join(err, errors.New("the order was not paid"))
			}
			isNew, err := repository.NewLedgerStore(db).Append(ctx, entryOf(a, "ch_1", later))
			if isNew {
				return errors.New("the repeat was stored")
			}
			return err
		})
		if err != nil {
			t.Fatalf("the step-by-step settlement = %v", err)
		}
		if got := findOrder(t, db, o.ID); got.Status != domain.StatusPaid {
			t.Errorf("order %s after the step-by-step settlement, want paid", got.Status)
		}
	})
}

// TestPayBatchFailedCommit: a COMMIT that fails leaves nothing written and
// the connection usable, out of any transaction.
func TestPayBatchFailedCommit(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		b := repository.NewPayBatch(db)
		ctx := t.Context()
		if d == migrations.MySQL {
			for _, p := range db.Pools() {
				p.SetMaxOpenConns(1) // the next statement runs on the batch's connection
			}
		}
		o := newOrder(t, db)
		boom := errors.New("commit refused")
		db.FailAt(func(point string) error {
			if point == "commit" {
				return boom
			}
			return nil
		})
		ok, err := b.Claim(ctx, attemptFor(o, "req-1"), o.Version, t0)
		db.FailAt(nil)
		if !errors.Is(err, boom) || ok {
			t.Fatalf("Claim with a failing commit = %v, %v, want %v", ok, err, boom)
		}
		if got := findOrder(t, db, o.ID); got.Status != domain.StatusPending || got.Version != o.Version {
			t.Errorf("a claim whose commit failed left the order %s at version %d", got.Status, got.Version)
		}
		if as := attemptsOf(t, db, o.ID); len(as) != 0 {
			t.Errorf("a claim whose commit failed left %d attempts", len(as))
		}
		if d == migrations.MySQL {
			var in int
			if err := db.Gorm().Raw("SELECT @@in_transaction").Row().Scan(&in); err != nil {
				t.Logf("@@in_transaction not known here (%v): not checked", err)
			} else if in != 0 {
				t.Errorf("the connection went back to the pool inside a transaction")
			}
		}
		// And the pool works on: the claim goes through.
		if ok, err := b.Claim(ctx, attemptFor(o, "req-2"), o.Version, t0); err != nil || !ok {
			t.Fatalf("Claim after the failed commit = %v, %v", ok, err)
		}
	})
}

// TestPayBatchRerunLoses: the claim's first run matched the order but was
// undone at COMMIT (a deadlock's victim, a Galera node whose COMMIT lost
// certification), and another request claimed the order before it ran
// again. The rerun matches nothing: false, and no attempt is left.
func TestPayBatchRerunLoses(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		url := dbtest.NewURL(t, d)
		db, other := dbtest.OpenURL(t, url), dbtest.OpenURL(t, url)
		b := repository.NewPayBatch(db)
		o := newOrder(t, db)
		var commits, reruns int
		db.FailAt(func(point string) error {
			if point != "commit" {
				return nil
			}
			if commits++; commits == 1 {
				return &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock"}
			}
			return nil
		})
		db.OnRetry(func(ctx context.Context, reason domain.RetryReason, attempt int, err error) {
			reruns++
			if won, err := repository.NewOrderStore(other).Claim(ctx, o.ID, "winner", domain.AnyVersion, t0); err != nil || !won {
				t.Errorf("winner's Claim = %v, %v; want true", won, err)
			}
		})
		ok, err := b.Claim(t.Context(), attemptFor(o, "loser"), domain.AnyVersion, t0)
		if err != nil || ok {
			t.Fatalf("Claim after losing the rerun = %v, %v, want false", ok, err)
		}
		if reruns != 1 {
			t.Errorf("reruns = %d, want 1", reruns)
		}
		if as := attemptsOf(t, db, o.ID); len(as) != 0 {
			t.Errorf("attempts = %d, want none (the loser's was rolled back)", len(as))
		}
		if got := findOrder(t, db, o.ID); got.PayRequestID != "winner" {
			t.Errorf("order claimed by %q, want winner", got.PayRequestID)
		}
	})
}

// TestPayBatchRefusesOuterTransaction: inside a caller's transaction a
// batch could not roll back alone what it wrote; it refuses instead.
func TestPayBatchRefusesOuterTransaction(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		o := newOrder(t, db)
		err := repository.NewTransactor(db).InTx(t.Context(), func(ctx context.Context) error {
			_, err := repository.NewPayBatch(db).Claim(ctx, attemptFor(o, "req-1"), o.Version, t0)
			return err
		})
		if err == nil {
			t.Fatal("Claim inside InTx = nil error, want a refusal")
		}
		if as := attemptsOf(t, db, o.ID); len(as) != 0 || findOrder(t, db, o.ID).Status != domain.StatusPending {
			t.Errorf("a refused batch wrote: %d attempts", len(as))
		}
	})
}
