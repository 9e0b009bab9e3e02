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
		if ok, err := s.CompleteInBackground(t.Context(), bg.Scope, bg.Key, bg.OrderID, domain.RecordFailed, 402, []byte(`{"a":1}`), domain.CompletedInBackground, t0); !ok || err != nil {
			t.Fatalf("CompleteInBackground = %v, %v", ok, err)
		}
		if ok, err := s.CompleteInBackground(t.Context(), fg.Scope, fg.Key, fg.OrderID, domain.RecordSucceeded, 200, nil, domain.CompletedInBackground, t0); ok || err != nil {
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

// TestRecordBackgroundCompletionGuards: a late outcome completes only the
// pay record of its own order (a key whose record has gone may now guard a
// request about another order); and when a request answers what a webhook
// already stored for it, the record says the request answered, so a retry
// with the key is a new attempt rather than a replay of what the caller saw.
func TestRecordBackgroundCompletionGuards(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRecordStore(dbtest.Open(t, d))
		other := newRecord("k-other-order")
		insertRecord(t, s, other)
		if ok, err := s.CompleteInBackground(t.Context(), other.Scope, other.Key, "o-old", domain.RecordFailed, 402, []byte(`{}`), domain.CompletedInBackground, t0); ok || err != nil {
			t.Errorf("CompleteInBackground(another order) = %v, %v; want false", ok, err)
		}
		if got, _ := s.Find(t.Context(), other.Scope, other.Key); got.Status != domain.RecordProcessing {
			t.Errorf("record of another order after a late outcome = %s, want processing", got.Status)
		}

		both := newRecord("k-both")
		insertRecord(t, s, both)
		if ok, err := s.CompleteInBackground(t.Context(), both.Scope, both.Key, both.OrderID, domain.RecordFailed, 402, []byte(`{"code":"card_declined"}`), domain.CompletedInBackground, t0); !ok || err != nil {
			t.Fatalf("CompleteInBackground = %v, %v", ok, err)
		}
		if ok, err := s.Complete(t.Context(), both.Scope, both.Key, domain.RecordFailed, 402, []byte(`{"code":"card_declined"}`), false, t0); ok || err != nil {
			t.Errorf("Complete after the same answer was stored = %v, %v; want false, nil", ok, err)
		}
		if got, _ := s.Find(t.Context(), both.Scope, both.Key); got.CompletedBy != domain.CompletedByRequest {
			t.Errorf("completed by %q after the request answered the same, want %q", got.CompletedBy, domain.CompletedByRequest)
		}

		differ := newRecord("k-differ")
		insertRecord(t, s, differ)
		s.CompleteInBackground(t.Context(), differ.Scope, differ.Key, differ.OrderID, domain.RecordSucceeded, 200, []byte(`{}`), domain.CompletedInBackground, t0)
		s.Complete(t.Context(), differ.Scope, differ.Key, domain.RecordFailed, 402, []byte(`{}`), false, t0)
		if got, _ := s.Find(t.Context(), differ.Scope, differ.Key); got.CompletedBy != domain.CompletedInBackground || got.ResponseStatus != 200 {
			t.Errorf("after a different answer: %d by %q, want the stored 200 by %q", got.ResponseStatus, got.CompletedBy, domain.CompletedInBackground)
		}
	})
}

// TestRecordCompleteFinal: a request's failure stored as final is failed,
// marked as an answer for every later request with the key (as a failure
// learnt in the background is), with the answer kept; a record already
// completed is not completed again.
func TestRecordCompleteFinal(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRecordStore(dbtest.Open(t, d))
		r := newRecord("k-final")
		insertRecord(t, s, r)
		body := []byte(`{"code":"refund_refused"}`)
		if ok, err := s.CompleteFinal(t.Context(), r.Scope, r.Key, 502, body, t0); !ok || err != nil {
			t.Fatalf("CompleteFinal = %v, %v; want true", ok, err)
		}
		got := findRecord(t, s, r.Scope, r.Key)
		if got.Status != domain.RecordFailed || got.CompletedBy != domain.CompletedInBackground || got.ResponseStatus != 502 || string(got.ResponseBody) != string(body) || got.Sealed {
			t.Errorf("after CompleteFinal: %s by %q, %d %s (sealed %v); want failed by %q, 502 %s", got.Status, got.CompletedBy,
				got.ResponseStatus, got.ResponseBody, got.Sealed, domain.CompletedInBackground, body)
		}
		if ok, err := s.CompleteFinal(t.Context(), r.Scope, r.Key, 200, []byte(`{}`), t0); ok || err != nil {
			t.Errorf("CompleteFinal of a completed record = %v, %v; want false", ok, err)
		}
		if got := findRecord(t, s, r.Scope, r.Key); got.ResponseStatus != 502 {
			t.Errorf("a second CompleteFinal changed the answer to %d", got.ResponseStatus)
		}
	})
}
