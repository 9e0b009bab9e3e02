package repository_test

import (
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// TestRecordCompletedBy: a record completed by its request and one
// completed in the background say so; a retry clears it; a completed record
// is not completed again by the other path.
func TestRecordCompletedBy(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRecordStore(dbtest.Open(t, d))
		fg, bg := newRecord("k-request"), newRecord("k-background")
		insertRecord(t, s, fg)
		insertRecord(t, s, bg)
		if ok, err := s.Complete(t.Context(), fg.Scope, fg.Key, domain.RecordFailed, 402, []byte(`{}`), false, t0); !ok || err != nil {
			t.Fatalf("Complete = %v, %v", ok, err)
		}
		if ok, err := s.CompleteInBackground(t.Context(), bg.Scope, bg.Key, domain.RecordFailed, 402, []byte(`{"a":1}`), t0); !ok || err != nil {
			t.Fatalf("CompleteInBackground = %v, %v", ok, err)
		}
		if ok, err := s.CompleteInBackground(t.Context(), fg.Scope, fg.Key, domain.RecordSucceeded, 200, nil, t0); ok || err != nil {
			t.Errorf("CompleteInBackground of a completed record = %v, %v; want false", ok, err)
		}
		for key, want := range map[string]string{fg.Key: domain.CompletedByRequest, bg.Key: domain.CompletedInBackground} {
			got, err := s.Find(t.Context(), fg.Scope, key)
			if err != nil || got.CompletedBy != want || got.Status != domain.RecordFailed {
				t.Errorf("Find(%s) = %s by %q, %v; want failed by %q", key, got.Status, got.CompletedBy, err, want)
			}
		}
		if ok, err := s.Retry(t.Context(), bg.Scope, bg.Key, t0, t0.Add(time.Minute)); !ok || err != nil {
			t.Fatalf("Retry = %v, %v", ok, err)
		}
		if got, _ := s.Find(t.Context(), bg.Scope, bg.Key); got.CompletedBy != "" || got.Status != domain.RecordProcessing {
			t.Errorf("after Retry: %s by %q, want processing by nobody", got.Status, got.CompletedBy)
		}
	})
}
