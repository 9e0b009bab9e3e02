package handler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/service"
)

// pagedRuns is a ReconcileService that walks a file run's pages as a run
// does, keeping what they hand out.
type pagedRuns struct {
	ReconcileService
	runs    int
	file    bool
	sizes   []int
	charges []string
}

func (p *pagedRuns) Run(_ context.Context, req service.ReconcileRequest) (domain.ReconciliationRun, error) {
	p.runs++
	if p.file = req.File != nil; p.file && req.File.Charges != nil {
		err := req.File.Charges(func(page []domain.Charge) error {
			p.sizes = append(p.sizes, len(page))
			for _, ch := range page {
				p.charges = append(p.charges, ch.ID)
			}
			return nil
		})
		if err != nil {
			return domain.ReconciliationRun{}, err
		}
	}
	return domain.ReconciliationRun{ID: "run_1", DryRun: req.DryRun}, nil
}

// upload posts a reconciliation's multipart form to h.reconcile, the
// file's part between the fields, and returns the handler's answer and
// error.
func upload(h *Admin, file string) (*httptest.ResponseRecorder, error) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("from", "2026-01-31T00:00:00Z")
	fw, _ := mw.CreateFormFile("file", "day.csv")
	_, _ = fw.Write([]byte(file))
	_ = mw.WriteField("to", "2026-02-01T00:00:00Z")
	_ = mw.WriteField("dry_run", "true")
	_ = mw.Close()
	req := httptest.NewRequest(http.MethodPost, "/v1/admin/reconciliations", &body)
	req.Header.Set(echo.HeaderContentType, mw.FormDataContentType())
	rec := httptest.NewRecorder()
	c := echo.New().NewContext(req, rec)
	return rec, idempotency.AcceptMultipart(h.reconcile)(c)
}

// TestReconcileUploadChecksBeforeRun: an uploaded file is checked whole
// before any run starts — one refused on its last line starts none — and a
// good one is handed to the run as pages read from the upload again, every
// succeeded charge once, in the file's order.
func TestReconcileUploadChecksBeforeRun(t *testing.T) {
	const head = "charge_id,idempotency_key,order_id,type,status,amount,currency,created_at\n"
	var lines strings.Builder
	var want []string
	for i := range 1201 {
		status := "succeeded"
		if i%10 == 9 {
			status = "failed"
		} else {
			want = append(want, fmt.Sprintf("ch_%d", i))
		}
		fmt.Fprintf(&lines, "ch_%d,,,charge,%s,1.00,USD,2026-01-31T12:00:00Z\n", i, status)
	}

	runs := &pagedRuns{}
	h := &Admin{Reconcile: runs, Settlements: provider.ParseSettlement}
	_, err := upload(h, head+lines.String()+"ch_0,,,refund,succeeded,1.01,USD,2026-01-31T13:00:00Z\n")
	var ve *domain.ValidationError
	if !errors.As(err, &ve) || ve.Field != "file" || !strings.Contains(ve.Reason, "line 1203: amount") || runs.runs != 0 {
		t.Errorf("upload refused on its last line = %v, %d runs; want a validation error on the file's line 1203 and no run", err, runs.runs)
	}

	rec, err := upload(h, head+lines.String())
	if err != nil || rec.Code != http.StatusOK || runs.runs != 1 || !runs.file {
		t.Fatalf("upload = %v, %d %s, %d runs (file %v); want a dry run of the file", err, rec.Code, rec.Body, runs.runs, runs.file)
	}
	if fmt.Sprint(runs.sizes) != fmt.Sprint([]int{provider.SettlementPage, provider.SettlementPage, len(want) - 2*provider.SettlementPage}) ||
		strings.Join(runs.charges, ",") != strings.Join(want, ",") {
		t.Errorf("the run was handed pages of %v, charges %d, want the %d succeeded charges in order, in pages of %d", runs.sizes, len(runs.charges), len(want), provider.SettlementPage)
	}
}
