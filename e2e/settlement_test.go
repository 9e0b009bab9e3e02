package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
	"github.com/payd/payd/service"
)

// TestBadSettlementFile: a settlement CSV with one bad line is refused as a
// whole with 400 validation_failed naming the line and the field, before
// anything is written: no run, no discrepancy, no finding — on both
// databases. The same file with the line fixed is accepted.
func TestBadSettlementFile(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), tuned(silentSandbox))
		_, tok := s.register("settle@example.com")
		from := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
		s.paidOrder(tok, "10.00")
		to := time.Now().UTC().Add(time.Minute).Truncate(time.Second)
		good := s.settlementCSV()
		if n := strings.Count(good, "\n"); n != 2 {
			t.Fatalf("settlement has %d lines, want a header and one charge:\n%s", n, good)
		}
		stamp := time.Now().UTC().Format(time.RFC3339)
		line := func(chargeID, key, orderID, typ, status, amount, currency, created string) string {
			return strings.Join([]string{chargeID, key, orderID, typ, status, amount, currency, created, ""}, ",") + "\n" // no refund_id
		}
		ok := line("ch_unknown_1", uuid.NewString(), uuid.NewString(), "charge", "succeeded", "5.00", "USD", stamp)
		if r := s.uploadSettlement(uuid.NewString(), from, to, true, good+ok); r.Status != http.StatusOK {
			t.Fatalf("dry run of a good file = %d %s, want 200", r.Status, r.Body)
		}
		bad := []struct {
			name, line, field string
		}{
			{"exponent", line("ch_x", uuid.NewString(), uuid.NewString(), "charge", "succeeded", "1e30", "USD", stamp), "amount"},
			{"too many decimals", line("ch_x", uuid.NewString(), uuid.NewString(), "charge", "succeeded", "5.001", "USD", stamp), "amount"},
			{"too many digits", line("ch_x", uuid.NewString(), uuid.NewString(), "charge", "succeeded", strings.Repeat("9", 30), "USD", stamp), "amount"},
			{"negative", line("ch_x", uuid.NewString(), uuid.NewString(), "charge", "succeeded", "-5.00", "USD", stamp), "amount"},
			{"zero", line("ch_x", uuid.NewString(), uuid.NewString(), "charge", "succeeded", "0.00", "USD", stamp), "amount"},
			{"long charge id", line("ch_"+strings.Repeat("x", 300), uuid.NewString(), uuid.NewString(), "charge", "succeeded", "5.00", "USD", stamp), "charge_id"},
			{"empty charge id", line("", uuid.NewString(), uuid.NewString(), "charge", "succeeded", "5.00", "USD", stamp), "charge_id"},
			{"long key", line("ch_x", strings.Repeat("k", 300), uuid.NewString(), "charge", "succeeded", "5.00", "USD", stamp), "idempotency_key"},
			{"long order id", line("ch_x", uuid.NewString(), strings.Repeat("o", 100), "charge", "succeeded", "5.00", "USD", stamp), "order_id"},
			{"not UTF-8", line("ch_\xff\xfe", uuid.NewString(), uuid.NewString(), "charge", "succeeded", "5.00", "USD", stamp), "charge_id"},
			{"unknown currency", line("ch_x", uuid.NewString(), uuid.NewString(), "charge", "succeeded", "5.00", "XYZ", stamp), "currency"},
			{"unknown status", line("ch_x", uuid.NewString(), uuid.NewString(), "charge", "settled-ish", "5.00", "USD", stamp), "status"},
			{"unknown type", line("ch_x", uuid.NewString(), uuid.NewString(), "payout", "succeeded", "5.00", "USD", stamp), "type"},
			{"bad time", line("ch_x", uuid.NewString(), uuid.NewString(), "charge", "succeeded", "5.00", "USD", "yesterday"), "created_at"},
			{"charge listed twice", good[strings.Index(good, "\n")+1:], "charge_id"},
		}
		for _, b := range bad {
			// The bad line is line 4: header, the real charge, a good line, then it.
			for _, dry := range []bool{false, true} {
				r := s.uploadSettlement(uuid.NewString(), from, to, dry, good+ok+b.line)
				if r.Status != http.StatusBadRequest || r.code(t) != "validation_failed" {
					t.Errorf("%s (dry %v): upload = %d %s, want 400 validation_failed", b.name, dry, r.Status, r.Body)
					continue
				}
				detail, _ := r.json(t)["detail"].(string)
				if !strings.Contains(detail, "line 4") || !strings.Contains(detail, b.field) {
					t.Errorf("%s: detail %q, want it to name line 4 and %s", b.name, detail, b.field)
				}
			}
			if n := s.count("reconciliation_runs") + s.count("discrepancies") + s.count("reconciliation_findings"); n != 0 {
				t.Fatalf("%s: %d rows written for a refused file, want 0", b.name, n)
			}
		}
		if r := s.uploadSettlement(uuid.NewString(), from, to, false, good+ok); r.Status != http.StatusCreated {
			t.Errorf("upload of a good file = %d %s, want 201", r.Status, r.Body)
		}
		if n := s.count("reconciliation_runs WHERE finished_at IS NULL"); n != 0 {
			t.Errorf("%d runs left unfinished, want 0", n)
		}
	})
}

// TestLargeSettlementFile: a busy day's settlement file is larger than
// the 1 MiB every other body may be: an upload of 12,000 lines (about
// 1.8 MiB) is reconciled, while a JSON body over 1 MiB on the same route
// is still 413, and an upload over 64 MiB is 413 before payd reads it.
func TestLargeSettlementFile(t *testing.T) {
	s := start(t, tuned(silentSandbox))
	_, tok := s.register("settle-large@example.com")
	from := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	s.paidOrder(tok, "10.00")
	to := time.Now().UTC().Add(time.Minute).Truncate(time.Second)
	var file strings.Builder
	file.WriteString(s.settlementCSV())
	stamp := time.Now().UTC().Format(time.RFC3339)
	for i := range 12000 { // failed charges: checked, then left out of the run
		file.WriteString(strings.Join([]string{fmt.Sprintf("ch_failed_%06d", i), uuid.NewString(), uuid.NewString(),
			"charge", "failed", "5.00", "USD", stamp, ""}, ",") + "\n")
	}
	if file.Len() <= 1<<20 {
		t.Fatalf("the file is %d bytes, want more than 1 MiB", file.Len())
	}
	r := s.uploadSettlement(uuid.NewString(), from, to, false, file.String())
	if r.Status != http.StatusCreated {
		t.Fatalf("upload of %d bytes = %d %.300s, want 201", file.Len(), r.Status, r.Body)
	}
	if run := r.json(t); run["matched"] != 1.0 || run["found"] != 0.0 {
		t.Errorf("run = matched %v found %v, want 1 and 0", run["matched"], run["found"])
	}
	huge := `{"from":"` + strings.Repeat(" ", 2<<20) + `"}`
	if r := s.do(request{method: "POST", path: "/v1/admin/reconciliations", token: testAdminToken, key: uuid.NewString(), body: []byte(huge)}); r.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("JSON body of 2 MiB = %d %.200s, want 413", r.Status, r.Body)
	}
	if r := s.uploadSettlement(uuid.NewString(), from, to, false, strings.Repeat("x", 65<<20)); r.Status != http.StatusRequestEntityTooLarge || r.code(t) != "payload_too_large" {
		t.Errorf("upload of 65 MiB = %d %.200s, want 413 payload_too_large", r.Status, r.Body)
	}
	if n := s.count("reconciliation_runs"); n != 1 {
		t.Errorf("%d runs recorded, want the one of the good file", n)
	}
}

// TestSettlementUploadShape: an upload must carry exactly one file in the
// field "file" (none, or two, is 400 naming the field, and nothing is
// recorded); the form's fields may come before or after it; a body that
// is not the multipart it says is 400.
func TestSettlementUploadShape(t *testing.T) {
	s := start(t, tuned(silentSandbox))
	from := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	to := from.Add(2 * time.Minute)
	header := "charge_id,idempotency_key,order_id,type,status,amount,currency,created_at\n"
	upload := func(files int, fieldsLast bool) reply {
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		fields := func() {
			_ = w.WriteField("from", from.Format(time.RFC3339))
			_ = w.WriteField("to", to.Format(time.RFC3339))
		}
		if !fieldsLast {
			fields()
		}
		for range files {
			f, _ := w.CreateFormFile("file", "settlement.csv")
			_, _ = f.Write([]byte(header))
		}
		if fieldsLast {
			fields()
		}
		_ = w.Close()
		return s.do(request{method: "POST", path: "/v1/admin/reconciliations", token: testAdminToken, key: uuid.NewString(),
			contentType: w.FormDataContentType(), body: buf.Bytes()})
	}
	for _, files := range []int{0, 2} {
		r := upload(files, false)
		if r.Status != http.StatusBadRequest || r.code(t) != "validation_failed" || !strings.Contains(string(r.Body), `"file"`) {
			t.Errorf("upload of %d files = %d %s, want 400 validation_failed naming file", files, r.Status, r.Body)
		}
	}
	if n := s.count("reconciliation_runs"); n != 0 {
		t.Fatalf("%d runs recorded for refused uploads, want 0", n)
	}
	if r := upload(1, true); r.Status != http.StatusCreated {
		t.Errorf("upload with its fields after the file = %d %s, want 201", r.Status, r.Body)
	}
	broken := s.do(request{method: "POST", path: "/v1/admin/reconciliations", token: testAdminToken, key: uuid.NewString(),
		contentType: "multipart/form-data; boundary=xyz", body: []byte("--xyz\r\nnot a part")})
	if broken.Status != http.StatusBadRequest {
		t.Errorf("a broken multipart body = %d %s, want 400", broken.Status, broken.Body)
	}
}

// failingDiscrepancies is payd's discrepancy store that fails its nth
// Record, as a database that goes away in the middle of a run would.
type failingDiscrepancies struct {
	*repository.DiscrepancyStore
	n, calls int
}

func (f *failingDiscrepancies) Record(ctx context.Context, d domain.Discrepancy) (domain.Discrepancy, bool, error) {
	if f.calls++; f.calls == f.n {
		return domain.Discrepancy{}, false, errors.New("connection lost")
	}
	return f.DiscrepancyStore.Record(ctx, d)
}

// TestRunFailingMidwayLeavesNothing: a reconciliation that fails after its
// first finding was recorded leaves no run behind (none unfinished), no
// discrepancy and no finding; run again, it records everything once.
func TestRunFailingMidwayLeavesNothing(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		db := dbtest.Open(t, migrations.Dialect(dialect))
		store := &failingDiscrepancies{DiscrepancyStore: repository.NewDiscrepancyStore(db), n: 2}
		rec := &service.Reconciler{Orders: repository.NewOrderStore(db), Attempts: repository.NewAttemptStore(db), Discrepancies: store,
			Runs: repository.NewRunStore(db), Tx: repository.NewTransactor(db), Lease: time.Minute, Now: now}
		from := now().Add(-time.Hour)
		charges := []domain.Charge{
			{ID: "ch_a", IdempotencyKey: uuid.NewString(), OrderID: uuid.NewString(), Amount: decimal.RequireFromString("1.00"), Currency: "USD", Status: domain.ChargeSucceeded, CreatedAt: now()},
			{ID: "ch_b", IdempotencyKey: uuid.NewString(), OrderID: uuid.NewString(), Amount: decimal.RequireFromString("2.00"), Currency: "USD", Status: domain.ChargeSucceeded, CreatedAt: now()},
		}
		file := &domain.Settlement{Charges: func(yield func([]domain.Charge) error) error { return yield(charges) }}
		req := service.ReconcileRequest{From: from, To: now().Add(time.Hour), File: file}
		if _, err := rec.Run(context.Background(), req); err == nil {
			t.Fatal("Run with a failing store = nil, want an error")
		}
		count := func(q string) int64 {
			var n int64
			if err := db.Gorm().Raw("SELECT COUNT(*) FROM " + q).Scan(&n).Error; err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := count("reconciliation_runs") + count("discrepancies") + count("reconciliation_findings"); n != 0 {
			t.Errorf("a failed run left %d rows (%d unfinished runs), want 0", n, count("reconciliation_runs WHERE finished_at IS NULL"))
		}
		run, err := rec.Run(context.Background(), req)
		if err != nil || run.FinishedAt == nil || run.New != 2 {
			t.Fatalf("Run again = %+v, %v, want a finished run with 2 new discrepancies", run, err)
		}
		if n := count("reconciliation_runs WHERE finished_at IS NOT NULL"); n != 1 {
			t.Errorf("finished runs = %d, want 1", n)
		}
	})
}
