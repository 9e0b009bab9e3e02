package repository_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/repository"
)

// BenchmarkPurgeExpired measures the idempotency purge: one op is one
// PurgeExpired pass of 500 records (the job's batch), over a table of
// expired completed records loaded in bulk beforehand; records/s is what
// one replica's purge deletes per second, to set beside the peak rate at
// which new pays create records.
//
//	go test -run '^$' -bench BenchmarkPurgeExpired ./repository
func BenchmarkPurgeExpired(b *testing.B) {
	const batch = 500
	for _, d := range dbtest.Dialects() {
		b.Run(string(d), func(b *testing.B) {
			db := dbtest.Open(b, d)
			s := repository.NewRecordStore(db)
			loadExpiredRecords(b, db, b.N*batch)
			now := t0.Add(48 * time.Hour)
			var deleted int64
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				n, err := s.PurgeExpired(b.Context(), now, batch)
				if err != nil {
					b.Fatal(err)
				}
				deleted += n
			}
			elapsed := time.Since(start)
			b.StopTimer()
			if deleted != int64(b.N*batch) {
				b.Fatalf("purged %d records, want %d", deleted, b.N*batch)
			}
			b.ReportMetric(float64(deleted)/elapsed.Seconds(), "records/s")
		})
	}
}

// loadExpiredRecords inserts n completed records that expired at t0, 500
// to a statement.
func loadExpiredRecords(b *testing.B, db *repository.DB, n int) {
	b.Helper()
	stamp := t0.UTC().Format("2006-01-02 15:04:05.000000")
	for done := 0; done < n; {
		rows := min(500, n-done)
		var q strings.Builder
		q.WriteString(`INSERT INTO idempotency_records (scope, idem_key, method, path, fingerprint, status, response_status,
			response_body, response_sealed, order_id, completed_by, locked_until, created_at, updated_at, expires_at) VALUES `)
		args := make([]any, 0, rows*6)
		for i := range rows {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString(`(?, ?, 'POST', ?, 'fp', 'succeeded', 200, ?, 0, 'o1', 'request', ?, ?, ?, ?)`)
			key := fmt.Sprintf("key-%09d", done+i)
			args = append(args, "customer:c1", key, "/v1/orders/o1/pay", []byte(`{"id":"o1","status":"paid"}`), stamp, stamp, stamp, stamp)
		}
		if err := db.Gorm().WithContext(b.Context()).Exec(q.String(), args...).Error; err != nil {
			b.Fatal(err)
		}
		done += rows
	}
}
