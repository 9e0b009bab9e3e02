package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// reconcileSpan is the window -reconcile reconciles: the preload's last
// 30 days (a run takes at most 31). At -preload 350000 (90 days of
// orders) it holds some 100,000 charges and 9,000 refunds.
const reconcileSpan = 30 * 24 * time.Hour

// reconcileRun is one timed reconciliation run of -reconcile.
type reconcileRun struct {
	Against   string  `json:"against"` // "provider" (its list) or "file" (a settlement CSV)
	Charges   int     `json:"charges"` // the provider's succeeded charges in the window
	Refunds   int     `json:"refunds"` // its succeeded refunds in the window
	FileBytes int     `json:"file_bytes,omitempty"`
	Status    int     `json:"status"` // payd's answer
	Seconds   float64 `json:"seconds"`
	Matched   int     `json:"matched"`
	Found     int     `json:"found"`
	// RSSBeforeBytes is payd's resident memory as the run was asked for,
	// RSSPeakBytes the most it held while it ran (sampled every 20 ms).
	RSSBeforeBytes int64  `json:"rss_before_bytes"`
	RSSPeakBytes   int64  `json:"rss_peak_bytes"`
	Error          string `json:"error,omitempty"` // the answer's body when it was not 201
}

// reconcile hands the stub the preload's books of the last reconcileSpan
// (its charges and refunds, as a provider whose books agree with payd's
// would list them), then asks payd to reconcile that window against the
// stub's list and against a settlement file of the same books, timing
// each run and sampling payd's memory while it runs.
func (b *bench) reconcile(ctx context.Context, stub *stub) error {
	to := time.Now().UTC().Truncate(time.Second)
	from := to.Add(-reconcileSpan)
	write, read, err := b.db.open(ctx)
	if err != nil {
		return err
	}
	charges, refunds, err := books(ctx, read, b.db.Dialect, from, to)
	_ = write.Close()
	if read != write {
		_ = read.Close()
	}
	if err != nil {
		return err
	}
	stub.adopt(charges, refunds)
	body, _ := json.Marshal(map[string]string{"from": from.Format(time.RFC3339), "to": to.Format(time.RFC3339)})
	r := b.timeRun(ctx, "application/json", body)
	r.Against, r.Charges, r.Refunds = "provider", len(charges), len(refunds)
	b.rep.Reconcile = append(b.rep.Reconcile, r)

	form, ctype := settlementForm(from, to, charges, refunds)
	r = b.timeRun(ctx, ctype, form)
	r.Against, r.Charges, r.Refunds, r.FileBytes = "file", len(charges), len(refunds), len(form)
	b.rep.Reconcile = append(b.rep.Reconcile, r)
	return nil
}

// timeRun posts one reconciliation and times it, sampling payd's RSS.
func (b *bench) timeRun(ctx context.Context, contentType string, body []byte) reconcileRun {
	var r reconcileRun
	r.RSSBeforeBytes, _ = currentRSS(b.pid)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the peak, until the answer is in
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if rss, err := currentRSS(b.pid); err == nil && rss > r.RSSPeakBytes {
				r.RSSPeakBytes = rss
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	start := time.Now()
	status, reply, err := b.api.admin(ctx, "/v1/admin/reconciliations", contentType, body)
	r.Seconds = time.Since(start).Seconds()
	close(stop)
	wg.Wait()
	r.Status = status
	switch {
	case err != nil:
		r.Error = err.Error()
	case status != http.StatusCreated:
		r.Error = strings.TrimSpace(string(reply))
	default:
		var run struct{ Matched, Found int }
		if err := json.Unmarshal(reply, &run); err != nil {
			r.Error = "the run's answer: " + err.Error()
		}
		r.Matched, r.Found = run.Matched, run.Found
	}
	return r
}

// admin posts body to path as the operator, with a new idempotency key,
// and returns the answer. A reconciliation may take minutes: no client
// timeout but ctx's.
func (c *client) admin(ctx context.Context, path, contentType string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Idempotency-Key", uuid.NewString())
	resp, err := (&http.Client{Transport: c.hc.Transport}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(resp.Body)
	return resp.StatusCode, reply, err
}

// books reads payd's succeeded charges and refunds created in [from, to)
// as the provider's lists show them: a charge under its attempt's key,
// with what was refunded of its order.
func books(ctx context.Context, db *sql.DB, dialect string, from, to time.Time) ([]*charge, []refund, error) {
	charges, err := bookedCharges(ctx, db, dialect, from, to)
	if err != nil {
		return nil, nil, fmt.Errorf("read the books' charges: %w", err)
	}
	refunds, err := bookedRefunds(ctx, db, dialect, from, to)
	if err != nil {
		return nil, nil, fmt.Errorf("read the books' refunds: %w", err)
	}
	return charges, refunds, nil
}

func bookedCharges(ctx context.Context, db *sql.DB, dialect string, from, to time.Time) ([]*charge, error) {
	rows, err := db.QueryContext(ctx, `SELECT a.id, a.provider_charge_id, a.order_id, a.amount_minor, a.currency, o.refunded_minor, `+
		textOf(dialect, "a.created_at")+`
		  FROM payment_attempts a JOIN orders o ON o.id = a.order_id
		 WHERE a.status = 'succeeded' AND a.created_at >= ? AND a.created_at < ?`, ts(from), ts(to))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var charges []*charge
	for rows.Next() {
		var ch charge
		var amount, refunded int64
		var created string
		if err := rows.Scan(&ch.IdempotencyKey, &ch.ID, &ch.OrderID, &amount, &ch.Currency, &refunded, &created); err != nil {
			return nil, err
		}
		if ch.created, err = time.Parse(timeLayout, created); err != nil {
			return nil, err
		}
		ch.Amount, ch.RefundedAmount, ch.Status, ch.PaymentMethod = minor(amount), minor(refunded), "succeeded", "pm_ok"
		ch.CreatedAt = ch.created.Format(time.RFC3339Nano)
		charges = append(charges, &ch)
	}
	return charges, rows.Err()
}

func bookedRefunds(ctx context.Context, db *sql.DB, dialect string, from, to time.Time) ([]refund, error) {
	rows, err := db.QueryContext(ctx, `SELECT provider_refund_id, provider_key, charge_id, order_id, amount_minor, currency, `+
		textOf(dialect, "created_at")+`
		  FROM refunds WHERE status = 'succeeded' AND created_at >= ? AND created_at < ?`, ts(from), ts(to))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var refunds []refund
	for rows.Next() {
		var rf refund
		var amount int64
		var created string
		if err := rows.Scan(&rf.ID, &rf.IdempotencyKey, &rf.ChargeID, &rf.OrderID, &amount, &rf.Currency, &created); err != nil {
			return nil, err
		}
		if rf.created, err = time.Parse(timeLayout, created); err != nil {
			return nil, err
		}
		rf.Amount, rf.Status, rf.CreatedAt = minor(amount), "succeeded", rf.created.Format(time.RFC3339Nano)
		refunds = append(refunds, rf)
	}
	return refunds, rows.Err()
}

// minor writes an amount in cents as the provider API does ("12.30").
func minor(cents int64) string { return fmt.Sprintf("%d.%02d", cents/100, cents%100) }

// settlementForm is the multipart upload of a settlement CSV listing
// charges and refunds (docs/settlement-csv.md), with its content type.
func settlementForm(from, to time.Time, charges []*charge, refunds []refund) ([]byte, string) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	_ = w.WriteField("from", from.Format(time.RFC3339))
	_ = w.WriteField("to", to.Format(time.RFC3339))
	f, _ := w.CreateFormFile("file", "settlement.csv")
	fmt.Fprintln(f, "charge_id,idempotency_key,order_id,type,status,amount,currency,created_at,refund_id")
	for _, ch := range charges {
		fmt.Fprintf(f, "%s,%s,%s,charge,succeeded,%s,%s,%s,\n", ch.ID, ch.IdempotencyKey, ch.OrderID, ch.Amount, ch.Currency, ch.CreatedAt)
	}
	for _, rf := range refunds {
		fmt.Fprintf(f, "%s,%s,%s,refund,succeeded,%s,%s,%s,%s\n", rf.ChargeID, rf.IdempotencyKey, rf.OrderID, rf.Amount, rf.Currency, rf.CreatedAt, rf.ID)
	}
	_ = w.Close()
	return buf.Bytes(), w.FormDataContentType()
}
