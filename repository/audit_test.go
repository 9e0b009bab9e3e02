package repository_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

func TestAuditAppendAndList(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewAuditStore(dbtest.Open(t, d))
		orderID := newID()
		refund := domain.AuditEntry{
			ID: newID(), Actor: "admin", Action: "refund", OrderID: orderID, Target: newID(),
			RequestID: "admin-req-1", Result: 200, Detail: `{"amount":"5.00","reason":"customer asked"}`,
			CreatedAt: t0.Add(time.Second),
		}
		// A system entry with nothing optional set comes back with empty fields.
		system := domain.AuditEntry{ID: newID(), Actor: "system", Action: "auto_refund", OrderID: orderID, Result: 202, CreatedAt: t0}
		other := domain.AuditEntry{ID: newID(), Actor: "admin", Action: "reconcile", Target: newID(), Result: 201, CreatedAt: t0}
		for _, e := range []domain.AuditEntry{refund, system, other} {
			if err := s.Append(t.Context(), e); err != nil {
				t.Fatalf("Append(%s) = %v", e.Action, err)
			}
		}
		got, err := s.ListByOrder(t.Context(), orderID)
		want := []domain.AuditEntry{system, refund}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("ListByOrder = %+v, %v\nwant %+v", got, err, want)
		}
		if err := s.Append(t.Context(), refund); err == nil {
			t.Errorf("Append(same ID twice) = nil error, want an error")
		}
	})
}
