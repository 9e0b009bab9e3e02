package repository_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// insertNotifyEvent writes an outbox row for order o at seq, as a change's
// transaction would: the order's snapshot as it stands.
func insertNotifyEvent(t *testing.T, db *repository.DB, o domain.Order, seq int64, typ domain.NotifyType, at time.Time) string {
	t.Helper()
	id := newID()
	force(t, db, `INSERT INTO notify_events (id, order_id, seq, type, cause, cause_ref, order_status, pay_request_id, paid_at,
		refunded_minor, order_updated_at, charged_minor, books_refunded_minor, disputed_minor, lost_minor, created_at)
		VALUES (?, ?, ?, ?, 'pay_request', 'key-1', 'paid', 'key-1', ?, 0, ?, 1200, 0, 0, 0, ?)`,
		id, o.ID, seq, string(typ), at.UTC().Format("2006-01-02 15:04:05.000000"), at.UTC().Format("2006-01-02 15:04:05.000000"),
		at.UTC().Format("2006-01-02 15:04:05.000000"))
	return id
}

func newSealer(t *testing.T) *idempotency.Sealer {
	t.Helper()
	s, err := idempotency.NewSealer("a test secret key of enough length")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newEndpoint(t *testing.T, es *repository.EndpointStore, types ...domain.NotifyType) domain.Endpoint {
	t.Helper()
	e, err := es.Create(t.Context(), domain.Endpoint{ID: newID(), URL: "https://shop.example/hooks", Events: types,
		Secret: "whsec_" + newID(), CreatedAt: t0, UpdatedAt: t0})
	if err != nil {
		t.Fatalf("Create(endpoint) = %v", err)
	}
	return e
}

// TestEndpointSecretSealed: an endpoint's secret rests sealed, and reads
// back as it was; a rotation keeps the old one beside the new.
func TestEndpointSecretSealed(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		es := repository.NewEndpointStore(db, newSealer(t))
		e := newEndpoint(t, es, domain.NotifyOrderPaid)
		var raw []byte
		if err := db.Gorm().Raw(`SELECT secret_sealed FROM notify_endpoints WHERE id = ?`, e.ID).Row().Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, []byte(e.Secret)) {
			t.Fatalf("secret_sealed holds the secret in plaintext")
		}
		got, err := es.FindByID(t.Context(), e.ID)
		if err != nil || got.Secret != e.Secret || !got.Wants(domain.NotifyOrderPaid) || got.Wants(domain.NotifyOrderRefunded) {
			t.Fatalf("FindByID = %+v, %v; want the secret back, wanting order.paid only", got, err)
		}
		until := t0.Add(domain.SecretOverlap)
		if err := es.Rotate(t.Context(), e.ID, "whsec_new", until, t0); err != nil {
			t.Fatal(err)
		}
		got, _ = es.FindByID(t.Context(), e.ID)
		if s := got.Secrets(t0.Add(time.Hour)); len(s) != 2 || s[0] != "whsec_new" || s[1] != e.Secret {
			t.Errorf("Secrets during the overlap = %q, want the new and the old", s)
		}
		if s := got.Secrets(until); len(s) != 1 {
			t.Errorf("Secrets after the overlap = %q, want the new alone", s)
		}
		if err := es.Rotate(t.Context(), newID(), "x", until, t0); !errors.Is(err, domain.ErrEndpointNotFound) {
			t.Errorf("Rotate(unknown) = %v, want ErrEndpointNotFound", err)
		}
	})
}

// TestFanOutOncePerEndpoint: an event becomes one delivery per enabled
// endpoint that wants its type, whoever fans it out and however often, and
// its body is stored.
func TestFanOutOncePerEndpoint(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		es, ns := repository.NewEndpointStore(db, newSealer(t)), repository.NewNotifyStore(db)
		paid := newEndpoint(t, es, domain.NotifyOrderPaid)
		refunds := newEndpoint(t, es, domain.NotifyOrderRefunded)
		o := newOrder(t, db)
		ev := insertNotifyEvent(t, db, o, 3, domain.NotifyOrderPaid, t0)
		events, err := ns.Unfanned(t.Context(), 10)
		if err != nil || len(events) != 1 || events[0].ID != ev {
			t.Fatalf("Unfanned = %v, %v; want the event", events, err)
		}
		got := events[0]
		if got.Order.ID != o.ID || got.Order.Status != domain.StatusPaid || len(got.Order.Items) != 2 || !got.Money.Charged.Equal(dec("12")) ||
			!got.Order.Amount.Equal(o.Amount) || got.Order.PayRequestID != "key-1" || got.Cause.Kind != domain.CausePayRequest {
			t.Fatalf("Unfanned()[0] = %+v; want the order's snapshot", got)
		}
		all := []domain.Endpoint{paid, refunds}
		var wg sync.WaitGroup
		var total atomic.Int64
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := ns.FanOut(t.Context(), got, []byte(`{"x":1}`), all, newID, t0)
				if err != nil {
					t.Errorf("FanOut = %v", err)
				}
				total.Add(int64(n))
			}()
		}
		wg.Wait()
		if total.Load() != 1 {
			t.Errorf("4 fan-outs wrote %d deliveries, want 1", total.Load())
		}
		if events, _ := ns.Unfanned(t.Context(), 10); len(events) != 0 {
			t.Errorf("Unfanned after the fan-out = %d events, want 0", len(events))
		}
		stored, err := ns.FindEvent(t.Context(), ev)
		if err != nil || string(stored.Body) != `{"x":1}` || !stored.FannedOut {
			t.Errorf("FindEvent = %q %v, %v; want the body stored, fanned out", stored.Body, stored.FannedOut, err)
		}
		if ids, _ := ns.Due(t.Context(), refunds.ID, t0, 10); len(ids) != 0 {
			t.Errorf("the refunds endpoint has %d due, want 0", len(ids))
		}
		if ids, _ := ns.Due(t.Context(), paid.ID, t0, 10); len(ids) != 1 {
			t.Errorf("the paid endpoint has %d due, want 1", len(ids))
		}
	})
}

// TestDeliveryInOrderUnderLease: one order's later event waits while an
// earlier one is pending (or not fanned out); a claim leases a delivery
// to one caller; an outcome recorded under a lease that is no longer the
// caller's changes nothing.
func TestDeliveryInOrderUnderLease(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		es, ns := repository.NewEndpointStore(db, newSealer(t)), repository.NewNotifyStore(db)
		ep := newEndpoint(t, es, domain.NotifyTypes...)
		o := newOrder(t, db)
		insertNotifyEvent(t, db, o, 3, domain.NotifyOrderPaid, t0)
		insertNotifyEvent(t, db, o, 4, domain.NotifyOrderRefunded, t0.Add(time.Millisecond))
		events, err := ns.Unfanned(t.Context(), 10)
		if err != nil || len(events) != 2 {
			t.Fatalf("Unfanned = %d, %v", len(events), err)
		}
		// the later event fanned out first: it waits for the earlier one
		if _, err := ns.FanOut(t.Context(), events[1], []byte("b"), []domain.Endpoint{ep}, newID, t0); err != nil {
			t.Fatal(err)
		}
		if ids, _ := ns.Due(t.Context(), ep.ID, t0, 10); len(ids) != 0 {
			t.Fatalf("due before the earlier event is fanned out: %v", ids)
		}
		if _, err := ns.FanOut(t.Context(), events[0], []byte("a"), []domain.Endpoint{ep}, newID, t0); err != nil {
			t.Fatal(err)
		}
		now := t0.Add(time.Second)
		ids, _ := ns.Due(t.Context(), ep.ID, now, 10)
		if len(ids) != 1 {
			t.Fatalf("Due = %v, want the earlier delivery alone", ids)
		}
		first := ids[0]
		var wins atomic.Int64
		var wg sync.WaitGroup
		var held domain.Delivery
		var mu sync.Mutex
		for range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				dl, ok, err := ns.Claim(t.Context(), first, now, now.Add(time.Minute))
				if err != nil {
					t.Errorf("Claim = %v", err)
				}
				if ok {
					wins.Add(1)
					mu.Lock()
					held = dl
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 || held.Attempts != 1 || held.EventID != events[0].ID {
			t.Fatalf("5 claims: %d won, attempts %d; want one, its first attempt of the first event", wins.Load(), held.Attempts)
		}
		if ids, _ := ns.Due(t.Context(), ep.ID, now, 10); len(ids) != 0 {
			t.Errorf("Due while leased = %v, want none", ids)
		}
		att := domain.DeliveryAttempt{ID: newID(), DeliveryID: first, N: 1, StartedAt: now, Status: 500, Error: "answered 500"}
		if ok, err := ns.Record(t.Context(), att, now.Add(time.Hour), repository.Outcome{Event: domain.DeliveryEventRetry, Next: now, Status: 500}, now); ok || err != nil {
			t.Fatalf("Record under another lease = %v, %v; want false", ok, err)
		}
		next := now.Add(5 * time.Second)
		if ok, err := ns.Record(t.Context(), att, *held.LeasedUntil, repository.Outcome{Event: domain.DeliveryEventRetry, Next: next, Status: 500, Error: "answered 500"}, now); !ok || err != nil {
			t.Fatalf("Record(retry) = %v, %v; want true", ok, err)
		}
		if ids, _ := ns.Due(t.Context(), ep.ID, now, 10); len(ids) != 0 {
			t.Errorf("Due during the backoff = %v, want none (the later one waits too)", ids)
		}
		dl, ok, err := ns.Claim(t.Context(), first, next, next.Add(time.Minute))
		if !ok || err != nil || dl.Attempts != 2 {
			t.Fatalf("Claim after the backoff = %+v %v %v", dl, ok, err)
		}
		att2 := domain.DeliveryAttempt{ID: newID(), DeliveryID: first, N: 2, StartedAt: next, Status: 200}
		if ok, err := ns.Record(t.Context(), att2, *dl.LeasedUntil, repository.Outcome{Event: domain.DeliveryEventDeliver, Status: 200}, next); !ok || err != nil {
			t.Fatalf("Record(deliver) = %v, %v", ok, err)
		}
		ids, _ = ns.Due(t.Context(), ep.ID, next, 10)
		if len(ids) != 1 || ids[0] == first {
			t.Fatalf("Due after the first was delivered = %v, want the second", ids)
		}
		logs, err := ns.ListDeliveries(t.Context(), ep.ID, domain.DeliveryDelivered, 10)
		if err != nil || len(logs) != 1 || len(logs[0].Attempts) != 2 || logs[0].Attempts[0].Status != 500 || logs[0].Type != domain.NotifyOrderPaid {
			t.Fatalf("ListDeliveries(delivered) = %+v, %v; want one with its two attempts", logs, err)
		}
		// redeliver: the delivered one is pending again, the same event
		if n, err := ns.Redeliver(t.Context(), events[0].ID, next); n != 1 || err != nil {
			t.Fatalf("Redeliver = %d, %v", n, err)
		}
		if _, err := ns.Redeliver(t.Context(), newID(), next); !errors.Is(err, domain.ErrNotifyEventNotFound) {
			t.Errorf("Redeliver(unknown) = %v, want ErrNotifyEventNotFound", err)
		}
		ids, _ = ns.Due(t.Context(), ep.ID, next, 10)
		if len(ids) != 1 || ids[0] != first {
			t.Fatalf("Due after the redelivery = %v, want the first again (the second waits)", ids)
		}
		// 410: the endpoint is disabled and its pending deliveries failed
		n, err := es.Gone(t.Context(), ep.ID, "answered 410 Gone", next)
		if n != 2 || err != nil {
			t.Fatalf("Gone = %d, %v; want both pending failed", n, err)
		}
		got, _ := es.FindByID(t.Context(), ep.ID)
		if got.Status != domain.EndpointDisabled || got.DisabledReason == "" {
			t.Errorf("after Gone the endpoint is %s (%q)", got.Status, got.DisabledReason)
		}
		if failed, _ := ns.ListDeliveries(t.Context(), ep.ID, domain.DeliveryFailed, 10); len(failed) != 2 {
			t.Errorf("failed deliveries = %d, want 2", len(failed))
		}
	})
}

// TestNotifyBacklog counts what is not told yet, and its oldest event.
func TestNotifyBacklog(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		es, ns := repository.NewEndpointStore(db, newSealer(t)), repository.NewNotifyStore(db)
		ep := newEndpoint(t, es, domain.NotifyTypes...)
		if b, err := repository.ReadNotifyBacklog(t.Context(), db); err != nil || b.Pending != 0 || !b.OldestPending.IsZero() {
			t.Fatalf("empty backlog = %+v, %v", b, err)
		}
		o := newOrder(t, db)
		insertNotifyEvent(t, db, o, 3, domain.NotifyOrderPaid, t0)
		insertNotifyEvent(t, db, o, 4, domain.NotifyOrderRefunded, t0.Add(time.Minute))
		events, _ := ns.Unfanned(t.Context(), 10)
		if _, err := ns.FanOut(t.Context(), events[0], []byte("a"), []domain.Endpoint{ep}, newID, t0); err != nil {
			t.Fatal(err)
		}
		b, err := repository.ReadNotifyBacklog(t.Context(), db)
		if err != nil || b.Pending != 2 || !b.OldestPending.Equal(t0) || b.Held != 0 {
			t.Fatalf("backlog = %+v, %v; want 2 pending, the oldest at %v, none held", b, err, t0)
		}
	})
}

// TestNotifyBacklogHeld: an endpoint an operator disabled keeps its
// pending deliveries (they go when it is enabled again). They are out of
// the pending count and its age, which say whether delivery keeps up (an
// alert fires on them), and counted apart as held, so that what waits on
// a disabled endpoint stays in sight.
func TestNotifyBacklogHeld(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		es, ns := repository.NewEndpointStore(db, newSealer(t)), repository.NewNotifyStore(db)
		on, off := newEndpoint(t, es, domain.NotifyTypes...), newEndpoint(t, es, domain.NotifyTypes...)
		o := newOrder(t, db)
		insertNotifyEvent(t, db, o, 3, domain.NotifyOrderPaid, t0)
		insertNotifyEvent(t, db, o, 4, domain.NotifyOrderRefunded, t0.Add(time.Minute))
		events, _ := ns.Unfanned(t.Context(), 10)
		for _, ev := range events {
			if _, err := ns.FanOut(t.Context(), ev, []byte("a"), []domain.Endpoint{on, off}, newID, t0); err != nil {
				t.Fatal(err)
			}
		}
		off.Status, off.DisabledReason = domain.EndpointDisabled, "paused by an operator"
		if ok, err := es.Update(t.Context(), off, t0.Add(time.Hour)); err != nil || !ok {
			t.Fatalf("Update(disabled) = %v, %v", ok, err)
		}
		b, err := repository.ReadNotifyBacklog(t.Context(), db)
		if err != nil || b.Pending != 2 || !b.OldestPending.Equal(t0) || b.Held != 2 {
			t.Fatalf("backlog = %+v, %v; want 2 pending to the enabled endpoint (the oldest at %v) and 2 held by the disabled one", b, err, t0)
		}
	})
}

// TestRecordKeepsBadBytes: an answer whose headers or body are not UTF-8
// (a hostile endpoint's) is recorded all the same, cleaned, and ends the
// delivery; on MariaDB a raw invalid byte would fail the INSERT.
func TestRecordKeepsBadBytes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		es, ns := repository.NewEndpointStore(db, newSealer(t)), repository.NewNotifyStore(db)
		ep := newEndpoint(t, es, domain.NotifyOrderPaid)
		o := newOrder(t, db)
		insertNotifyEvent(t, db, o, 3, domain.NotifyOrderPaid, t0)
		events, _ := ns.Unfanned(t.Context(), 10)
		if _, err := ns.FanOut(t.Context(), events[0], []byte("a"), []domain.Endpoint{ep}, newID, t0); err != nil {
			t.Fatal(err)
		}
		now := t0.Add(time.Second)
		ids, _ := ns.Due(t.Context(), ep.ID, now, 10)
		if len(ids) != 1 {
			t.Fatalf("Due = %v", ids)
		}
		dl, ok, err := ns.Claim(t.Context(), ids[0], now, now.Add(time.Minute))
		if !ok || err != nil {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		bad := "HTTP/1.1 200 OK\r\nX-Bad: caf\xe9 \xff\r\n\r\nok\xc3"
		att := domain.DeliveryAttempt{ID: newID(), DeliveryID: dl.ID, N: 1, StartedAt: now, Status: 200,
			Error: "x\xff" + string(bytes.Repeat([]byte("é"), 400)), RequestHead: "POST / HTTP/1.1\r\nX: \xfe\r\n", Response: bad + string(bytes.Repeat([]byte("x"), 70000))}
		if ok, err := ns.Record(t.Context(), att, *dl.LeasedUntil, repository.Outcome{Event: domain.DeliveryEventDeliver, Status: 200}, now); !ok || err != nil {
			t.Fatalf("Record(a 200 with bad bytes) = %v, %v; want recorded", ok, err)
		}
		logs, err := ns.ListDeliveries(t.Context(), ep.ID, domain.DeliveryDelivered, 10)
		if err != nil || len(logs) != 1 || len(logs[0].Attempts) != 1 {
			t.Fatalf("ListDeliveries(delivered) = %+v, %v; want the delivery and its attempt", logs, err)
		}
		a := logs[0].Attempts[0]
		if !utf8.ValidString(a.Response) || !utf8.ValidString(a.Error) || !utf8.ValidString(a.RequestHead) || !strings.Contains(a.Response, "X-Bad: caf") {
			t.Errorf("recorded attempt not cleaned: %q", a.Response[:40])
		}
	})
}

// TestRotateTwiceKeepsBothOld: a second rotation within the overlap keeps
// the first old secret signing too, each until its own 24 h end.
func TestRotateTwiceKeepsBothOld(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		es := repository.NewEndpointStore(db, newSealer(t))
		e := newEndpoint(t, es, domain.NotifyOrderPaid)
		if err := es.Rotate(t.Context(), e.ID, "whsec_second", t0.Add(domain.SecretOverlap), t0); err != nil {
			t.Fatal(err)
		}
		t1 := t0.Add(time.Hour)
		if err := es.Rotate(t.Context(), e.ID, "whsec_third", t1.Add(domain.SecretOverlap), t1); err != nil {
			t.Fatal(err)
		}
		got, err := es.FindByID(t.Context(), e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s := got.Secrets(t1.Add(time.Minute)); !slices.Equal(s, []string{"whsec_third", "whsec_second", e.Secret}) {
			t.Errorf("Secrets after two rotations = %q, want the new one and both old", s)
		}
		if s := got.Secrets(t0.Add(domain.SecretOverlap)); !slices.Equal(s, []string{"whsec_third", "whsec_second"}) {
			t.Errorf("Secrets after the first overlap = %q, want the first old one gone", s)
		}
		if err := es.Rotate(t.Context(), e.ID, "whsec_fourth", t0.Add(30*time.Hour+domain.SecretOverlap), t0.Add(6*time.Hour+domain.SecretOverlap)); err != nil {
			t.Fatal(err)
		}
		got, _ = es.FindByID(t.Context(), e.ID)
		if s := got.Secrets(t0.Add(domain.SecretOverlap + 7*time.Hour)); !slices.Equal(s, []string{"whsec_fourth", "whsec_third"}) {
			t.Errorf("Secrets after a later rotation = %q, want the expired ones dropped", s)
		}
	})
}

// TestDeleteEndpointKeepsLog: deleting an endpoint fails its pending
// deliveries ("endpoint deleted") and keeps them with their attempts, so
// each event stays delivered, pending or visibly failed; a redelivery
// does not bring them back to pending for an endpoint that is gone.
func TestDeleteEndpointKeepsLog(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		es, ns := repository.NewEndpointStore(db, newSealer(t)), repository.NewNotifyStore(db)
		ep := newEndpoint(t, es, domain.NotifyOrderPaid)
		o := newOrder(t, db)
		ev := insertNotifyEvent(t, db, o, 3, domain.NotifyOrderPaid, t0)
		events, _ := ns.Unfanned(t.Context(), 10)
		if _, err := ns.FanOut(t.Context(), events[0], []byte("a"), []domain.Endpoint{ep}, newID, t0); err != nil {
			t.Fatal(err)
		}
		now := t0.Add(time.Second)
		ids, _ := ns.Due(t.Context(), ep.ID, now, 10)
		dl, ok, err := ns.Claim(t.Context(), ids[0], now, now.Add(time.Minute))
		if !ok || err != nil {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		att := domain.DeliveryAttempt{ID: newID(), DeliveryID: dl.ID, N: 1, StartedAt: now, Status: 500, Error: "answered 500"}
		if ok, err := ns.Record(t.Context(), att, *dl.LeasedUntil, repository.Outcome{Event: domain.DeliveryEventRetry, Next: now, Status: 500, Error: "answered 500"}, now); !ok || err != nil {
			t.Fatalf("Record = %v, %v", ok, err)
		}
		if err := es.Delete(t.Context(), ep.ID, now); err != nil {
			t.Fatal(err)
		}
		if _, err := es.FindByID(t.Context(), ep.ID); !errors.Is(err, domain.ErrEndpointNotFound) {
			t.Fatalf("FindByID after Delete = %v", err)
		}
		logs, err := ns.ListDeliveries(t.Context(), ep.ID, "", 10)
		if err != nil || len(logs) != 1 || logs[0].Status != domain.DeliveryFailed || logs[0].LastError != "endpoint deleted" || len(logs[0].Attempts) != 1 {
			t.Fatalf("deliveries after Delete = %+v, %v; want one failed (endpoint deleted) with its attempt", logs, err)
		}
		if n, err := ns.Redeliver(t.Context(), ev, now); n != 0 || err != nil {
			t.Errorf("Redeliver after Delete = %d, %v; want nothing back to pending", n, err)
		}
	})
}

// TestEndpointHealth: each endpoint's health says what its deliveries
// do: the pending ones and the oldest event among them, those given up,
// and the last attempt (when, the answer, why it failed); an endpoint
// never tried says nothing.
func TestEndpointHealth(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		es, ns := repository.NewEndpointStore(db, newSealer(t)), repository.NewNotifyStore(db)
		down, up, quiet := newEndpoint(t, es, domain.NotifyTypes...), newEndpoint(t, es, domain.NotifyTypes...), newEndpoint(t, es, domain.NotifyTypes...)
		o := newOrder(t, db)
		insertNotifyEvent(t, db, o, 3, domain.NotifyOrderPaid, t0)
		insertNotifyEvent(t, db, o, 4, domain.NotifyOrderRefunded, t0.Add(time.Minute))
		events, _ := ns.Unfanned(t.Context(), 10)
		for _, ev := range events {
			if _, err := ns.FanOut(t.Context(), ev, []byte("a"), []domain.Endpoint{down, up}, newID, t0); err != nil {
				t.Fatal(err)
			}
		}
		// one attempt of each endpoint's first delivery: down refuses, up answers 204
		try := func(ep domain.Endpoint, at time.Time, status int, why string, o repository.Outcome) {
			t.Helper()
			ids, _ := ns.Due(t.Context(), ep.ID, at, 10)
			if len(ids) == 0 {
				t.Fatalf("nothing due for %s at %v", ep.ID, at)
			}
			dl, ok, err := ns.Claim(t.Context(), ids[0], at, at.Add(time.Minute))
			if !ok || err != nil {
				t.Fatalf("Claim = %v, %v", ok, err)
			}
			att := domain.DeliveryAttempt{ID: newID(), DeliveryID: dl.ID, N: dl.Attempts, StartedAt: at, Status: status, Error: why}
			o.Status, o.Error = status, why
			if ok, err := ns.Record(t.Context(), att, *dl.LeasedUntil, o, at); !ok || err != nil {
				t.Fatalf("Record = %v, %v", ok, err)
			}
		}
		t1, t2 := t0.Add(time.Second), t0.Add(2*time.Second)
		try(down, t1, 500, "answered 500", repository.Outcome{Event: domain.DeliveryEventRetry, Next: t1})
		try(down, t2, 0, "connection refused: nothing listens at shop.example:443", repository.Outcome{Event: domain.DeliveryEventRetry, Next: t2})
		try(up, t1, 204, "", repository.Outcome{Event: domain.DeliveryEventDeliver})

		// up's next delivery claimed, its first request in flight: nothing
		// recorded yet, so its last attempt is still the one answered 204
		t3 := t0.Add(3 * time.Second)
		if ids, _ := ns.Due(t.Context(), up.ID, t3, 10); len(ids) == 0 {
			t.Fatal("nothing due for up")
		} else if _, ok, err := ns.Claim(t.Context(), ids[0], t3, t3.Add(time.Minute)); !ok || err != nil {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		h, err := ns.EndpointHealth(t.Context(), []string{down.ID, up.ID, quiet.ID})
		if err != nil {
			t.Fatal(err)
		}
		dh := h[down.ID]
		if dh.Pending != 2 || dh.OldestPending == nil || !dh.OldestPending.Equal(t0) || dh.LastAttemptAt == nil || !dh.LastAttemptAt.Equal(t2) ||
			dh.LastStatus != 0 || !strings.HasPrefix(dh.LastError, "connection refused") || !dh.Failing() {
			t.Errorf("down's health = %+v, want 2 pending since %v, failing since its attempt at %v (connection refused)", dh, t0, t2)
		}
		uh := h[up.ID]
		if uh.Pending != 1 || uh.LastAttemptAt == nil || !uh.LastAttemptAt.Equal(t1) || uh.LastStatus != 204 || uh.LastError != "" || uh.Failing() {
			t.Errorf("up's health = %+v, want 1 pending and its last attempt answered 204", uh)
		}
		if qh := h[quiet.ID]; qh != (domain.EndpointHealth{}) || qh.Failing() {
			t.Errorf("quiet's health = %+v, want nothing", qh)
		}
		// 410: the endpoint's pending deliveries are given up
		if _, err := es.Gone(t.Context(), down.ID, "answered 410 Gone", t2); err != nil {
			t.Fatal(err)
		}
		h, _ = ns.EndpointHealth(t.Context(), []string{down.ID})
		if dh := h[down.ID]; dh.Pending != 0 || dh.OldestPending != nil || dh.Failed != 2 {
			t.Errorf("down's health after a 410 = %+v, want none pending and 2 given up", dh)
		}
	})
}
