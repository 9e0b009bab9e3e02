package repository_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// TestRecordInsertReplacesGone: an insert takes over the key of a record
// that is gone (expired, and not a processing record under a live lease)
// before the purge job ran; any other existing record keeps the key.
func TestRecordInsertReplacesGone(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRecordStore(dbtest.Open(t, d))
		later := t0.Add(48 * time.Hour) // past every expiry below

		done := newRecord("done")
		insertRecord(t, s, done)
		if ok, err := s.Complete(t.Context(), done.Scope, done.Key, domain.RecordSucceeded, 201, []byte(`{}`), false, t0); !ok || err != nil {
			t.Fatalf("Complete(done) = %v, %v", ok, err)
		}
		dead := newRecord("dead-lease") // processing, lease over long ago
		insertRecord(t, s, dead)
		held := newRecord("held") // processing past its expiry, lease still live
		held.LockedUntil = later.Add(time.Minute)
		insertRecord(t, s, held)

		for _, tt := range []struct {
			key  string
			at   time.Time
			want error
		}{
			{"done", t0.Add(time.Hour), domain.ErrKeyInUse}, // not expired yet
			{"done", later, nil},
			{"dead-lease", later, nil},
			{"held", later, domain.ErrKeyInUse}, // someone's lock
		} {
			r := newRecord(tt.key)
			r.Fingerprint = "other request"
			r.CreatedAt, r.UpdatedAt, r.LockedUntil, r.ExpiresAt = tt.at, tt.at, tt.at.Add(lease), tt.at.Add(24*time.Hour)
			if err := s.Insert(t.Context(), r); !errors.Is(err, tt.want) {
				t.Errorf("Insert(%q at %s) = %v, want %v", tt.key, tt.at, err, tt.want)
				continue
			}
			got := findRecord(t, s, r.Scope, r.Key)
			if replaced := got.Fingerprint == r.Fingerprint; replaced != (tt.want == nil) {
				t.Errorf("Insert(%q at %s): record replaced = %v, want %v", tt.key, tt.at, replaced, tt.want == nil)
			}
			if tt.want == nil && (got.Status != domain.RecordProcessing || got.ResponseStatus != 0 || !got.ExpiresAt.Equal(r.ExpiresAt)) {
				t.Errorf("Insert(%q at %s) left %+v, want the new processing record", tt.key, tt.at, got)
			}
		}
	})
}

// TestRecordInsertReplacesGoneConcurrent: of many requests taking over one
// gone record at once, exactly one gets the key, on both databases.
func TestRecordInsertReplacesGoneConcurrent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		s := repository.NewRecordStore(dbtest.Open(t, d))
		insertRecord(t, s, newRecord("old"))
		at := t0.Add(48 * time.Hour)
		const n = 20
		var got, inUse atomic.Int64
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				r := newRecord("old")
				r.CreatedAt, r.UpdatedAt, r.LockedUntil, r.ExpiresAt = at, at, at.Add(lease), at.Add(24*time.Hour)
				switch err := s.Insert(t.Context(), r); {
				case err == nil:
					got.Add(1)
				case errors.Is(err, domain.ErrKeyInUse):
					inUse.Add(1)
				default:
					t.Errorf("Insert(old) = %v, want nil or %v", err, domain.ErrKeyInUse)
				}
			})
		}
		wg.Wait()
		if got.Load() != 1 || inUse.Load() != n-1 {
			t.Errorf("concurrent take-over of a gone record: %d got the key, %d were told it is in use; want 1 and %d", got.Load(), inUse.Load(), n-1)
		}
	})
}

// TestRowFingerprints: the fingerprint of the request that created an
// order or a customer under a key is stored with the row and read back;
// a row without one reads as empty (unknown).
func TestRowFingerprints(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		c := domain.Customer{ID: newID(), Email: "fp@example.com", Name: "F", TokenHash: "ab12", RequestID: "reg-1",
			RequestFingerprint: "fp-register", CreatedAt: t0}
		customers := repository.NewCustomerStore(db)
		if err := customers.Create(t.Context(), c); err != nil {
			t.Fatalf("Create(customer) = %v", err)
		}
		if got, err := customers.FindByEmail(t.Context(), c.Email); err != nil || got.RequestFingerprint != "fp-register" {
			t.Errorf("FindByEmail = %+v, %v; want fingerprint fp-register", got, err)
		}

		orders := repository.NewOrderStore(db)
		o := pendingOrder(c.ID)
		o.CreateRequestID, o.CreateFingerprint = "key-1", "fp-create"
		createOrder(t, db, o)
		if got, err := orders.FindByCreateRequest(t.Context(), domain.CustomerScope(c.ID), "key-1"); err != nil || got.CreateFingerprint != "fp-create" {
			t.Errorf("FindByCreateRequest = %+v, %v; want fingerprint fp-create", got, err)
		}
		legacy := pendingOrder(c.ID)
		legacy.CreateRequestID = "key-2"
		createOrder(t, db, legacy)
		if got := findOrder(t, db, legacy.ID); got.CreateFingerprint != "" {
			t.Errorf("order without fingerprint reads %q, want empty", got.CreateFingerprint)
		}
	})
}
