package repository_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// webhookEvent builds (without storing) an event about orderID, received at t0.
func webhookEvent(id, orderID string) domain.WebhookEvent {
	return domain.WebhookEvent{
		ID: id, Type: string(domain.EventPaymentSucceeded), OrderID: orderID, AttemptID: newID(), ChargeID: "ch_" + id,
		Payload: []byte(`{"type":"payment.succeeded","amount":"12.00"}`), ReceivedAt: t0,
	}
}

func TestInboxReceive(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewInboxStore(dbtest.Open(t, d))
		e := webhookEvent("msg_1", newID())
		got, isNew, err := s.Receive(t.Context(), e)
		if err != nil || !isNew || fmt.Sprint(got) != fmt.Sprint(e) {
			t.Fatalf("Receive(new) = %+v, %v, %v, want %+v, true", got, isNew, err, e)
		}

		// A redelivery, even with another body, finds the stored event.
		again := e
		again.Payload, again.ReceivedAt = []byte(`{"other":true}`), t0.Add(time.Minute)
		got, isNew, err = s.Receive(t.Context(), again)
		if err != nil || isNew || fmt.Sprint(got) != fmt.Sprint(e) {
			t.Errorf("Receive(redelivery) = %+v, %v, %v, want %+v, false", got, isNew, err, e)
		}

		processed := t0.Add(time.Second)
		if err := s.MarkProcessed(t.Context(), e.ID, "applied", processed); err != nil {
			t.Fatalf("MarkProcessed = %v", err)
		}
		// The first outcome stays: a concurrent second application does not overwrite it.
		if err := s.MarkProcessed(t.Context(), e.ID, "no_change", processed.Add(time.Second)); err != nil {
			t.Errorf("MarkProcessed(again) = %v", err)
		}
		got, isNew, err = s.Receive(t.Context(), again)
		if err != nil || isNew || got.Outcome != "applied" || got.ProcessedAt == nil || !got.ProcessedAt.Equal(processed) {
			t.Errorf("Receive(after processing) = outcome %q, processed %v, new %v, %v; want applied, %v, false",
				got.Outcome, got.ProcessedAt, isNew, err, processed)
		}
		if err := s.MarkProcessed(t.Context(), "msg_unknown", "applied", processed); err != nil {
			t.Errorf("MarkProcessed(unknown) = %v, want nil", err)
		}
	})
}

// TestInboxReceiveSparse: an event naming nothing of ours, with an empty
// body, round-trips with empty fields.
func TestInboxReceiveSparse(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewInboxStore(dbtest.Open(t, d))
		e := domain.WebhookEvent{ID: "msg_sparse", Type: "charge.dispute.created", ReceivedAt: t0}
		if _, isNew, err := s.Receive(t.Context(), e); !isNew || err != nil {
			t.Fatalf("Receive(sparse) = %v, %v, want true", isNew, err)
		}
		got, isNew, err := s.Receive(t.Context(), e)
		if err != nil || isNew || got.OrderID != "" || got.AttemptID != "" || got.ChargeID != "" ||
			len(got.Payload) != 0 || got.Outcome != "" || got.ProcessedAt != nil {
			t.Errorf("Receive(sparse again) = %+v, %v, %v, want empty fields, false", got, isNew, err)
		}
	})
}

// TestInboxReceiveConcurrent: 20 deliveries of one event at once; exactly
// one is new and every other one gets the stored event.
func TestInboxReceiveConcurrent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewInboxStore(dbtest.Open(t, d))
		e := webhookEvent("msg_race", newID())
		var fresh atomic.Int64
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				got, isNew, err := s.Receive(t.Context(), e)
				if err != nil || got.ID != e.ID || string(got.Payload) != string(e.Payload) {
					t.Errorf("Receive #%d = %+v, %v", i, got, err)
				}
				if isNew {
					fresh.Add(1)
				}
			})
		}
		wg.Wait()
		if fresh.Load() != 1 {
			t.Errorf("%d of 20 concurrent Receives were new, want 1", fresh.Load())
		}
	})
}

func TestInboxListByOrder(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewInboxStore(dbtest.Open(t, d))
		orderID := newID()
		later, earlier := webhookEvent("msg_b", orderID), webhookEvent("msg_a", orderID)
		later.ReceivedAt = t0.Add(time.Second)
		for _, e := range []domain.WebhookEvent{later, earlier, webhookEvent("msg_c", newID())} {
			if _, _, err := s.Receive(t.Context(), e); err != nil {
				t.Fatalf("Receive(%s) = %v", e.ID, err)
			}
		}
		got, err := s.ListByOrder(t.Context(), orderID)
		if err != nil || len(got) != 2 || got[0].ID != "msg_a" || got[1].ID != "msg_b" {
			t.Errorf("ListByOrder = %+v, %v, want [msg_a msg_b]", got, err)
		}
	})
}
