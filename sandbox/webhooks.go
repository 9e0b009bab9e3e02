package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"gorm.io/gorm"

	"github.com/payd/payd/domain"
)

// eventJSON is a webhook body. Its id is the webhook-id header too, and it
// is the same on every retry and duplicate of the event.
type eventJSON struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	CreatedAt string `json:"created_at"`
	Data      any    `json:"data"`
}

type paymentDataJSON struct {
	ChargeID       string `json:"charge_id"`
	IdempotencyKey string `json:"idempotency_key"`
	OrderID        string `json:"order_id"`
	Amount         string `json:"amount"`
	Currency       string `json:"currency"`
	Status         string `json:"status"`
	FailureCode    string `json:"failure_code"`
	// AmountCaptured is what a capture took (payment.captured); absent
	// on the other payment events.
	AmountCaptured string `json:"amount_captured,omitempty"`
}

type refundDataJSON struct {
	RefundID       string `json:"refund_id"`
	ChargeID       string `json:"charge_id"`
	IdempotencyKey string `json:"idempotency_key"` // the refund's key
	OrderID        string `json:"order_id"`
	Amount         string `json:"amount"`
	Currency       string `json:"currency"`
}

type disputeDataJSON struct {
	DisputeID      string `json:"dispute_id"`
	ChargeID       string `json:"charge_id"`
	IdempotencyKey string `json:"idempotency_key"` // the disputed charge's key
	OrderID        string `json:"order_id"`
	Amount         string `json:"amount"`
	Currency       string `json:"currency"`
	Status         string `json:"status"` // open, won or lost
	Reason         string `json:"reason"`
}

// event is an event about to enter the outbox.
type event struct {
	typ  string
	data any
}

// paymentEvent announces a charge's final status.
func paymentEvent(c chargeRow) event {
	typ := string(domain.EventPaymentSucceeded)
	switch {
	case c.Status == string(domain.ChargeFailed):
		typ = string(domain.EventPaymentFailed)
	case c.Status == string(domain.ChargeAuthorized):
		typ = string(domain.EventPaymentAuthorized)
	case c.Status == string(domain.ChargeVoided):
		typ = string(domain.EventPaymentVoided)
	case c.manual(): // succeeded: its capture
		typ = string(domain.EventPaymentCaptured)
	}
	data := paymentDataJSON{
		ChargeID: c.ID, IdempotencyKey: c.IdempotencyKey, OrderID: c.OrderID,
		Amount: money(c.AmountMinor, c.Currency), Currency: c.Currency,
		Status: c.Status, FailureCode: c.FailureCode,
	}
	if typ == string(domain.EventPaymentCaptured) {
		data.AmountCaptured = money(c.capturedMinor(), c.Currency)
	}
	return event{typ: typ, data: data}
}

// refundEvent announces a refund, whoever asked for it.
func refundEvent(r refundRow) event {
	return event{typ: string(domain.EventRefundSucceeded), data: refundDataJSON{
		RefundID: r.ID, ChargeID: r.ChargeID, IdempotencyKey: r.IdempotencyKey, OrderID: r.OrderID,
		Amount: money(r.AmountMinor, r.Currency), Currency: r.Currency,
	}}
}

// disputeEvent announces a dispute opened (dispute.created) or closed
// (dispute.closed, won or lost), as its status says.
func disputeEvent(d disputeRow) event {
	typ := string(domain.EventDisputeClosed)
	if d.Status == string(domain.DisputeOpen) {
		typ = string(domain.EventDisputeCreated)
	}
	return event{typ: typ, data: disputeDataJSON{
		DisputeID: d.ID, ChargeID: d.ChargeID, IdempotencyKey: d.ChargeKey, OrderID: d.OrderID,
		Amount: money(d.AmountMinor, d.Currency), Currency: d.Currency, Status: d.Status, Reason: d.Reason,
	}}
}

// enqueue writes ev into the outbox inside tx, so an event exists exactly
// when the change it announces was committed. Each of the Duplicates copies
// is a row of its own, delivered (and retried) on its own.
func (s *Server) enqueue(tx *gorm.DB, ev event) error {
	now := s.now()
	id := newID("evt_")
	payload, err := json.Marshal(eventJSON{ID: id, Type: ev.typ, CreatedAt: formatTime(now), Data: ev.data})
	if err != nil {
		return fmt.Errorf("sandbox: encode event: %w", err)
	}
	rows := make([]deliveryRow, s.cfg.Duplicates)
	for i := range rows {
		next := now.Add(s.cfg.WebhookDelay)
		if s.cfg.Reorder {
			next = next.Add(rand.N(s.cfg.ReorderWindow))
		}
		rows[i] = deliveryRow{
			ID: newID("whd_"), EventID: id, CopyNo: i, EventType: ev.typ, Payload: string(payload),
			NextAttemptAt: at(next), CreatedAt: at(now),
		}
	}
	return tx.Create(&rows).Error
}

// DeliverDue makes one delivery pass: it claims the due outbox rows and
// POSTs them to the webhook URL, returning how many were acknowledged with a
// 2xx. The background worker calls it every PollInterval; tests may call it
// directly. Without a webhook URL it does nothing and rows stay queued.
func (s *Server) DeliverDue(ctx context.Context) (int, error) {
	if s.cfg.WebhookURL == "" {
		return 0, nil
	}
	now := at(s.now())
	var due []deliveryRow
	err := s.db.WithContext(ctx).
		Where("delivered_at IS NULL AND next_attempt_at <= ? AND (claimed_until IS NULL OR claimed_until <= ?)", now, now).
		Order("next_attempt_at, id").Limit(s.cfg.BatchSize).Find(&due).Error
	if err != nil {
		return 0, fmt.Errorf("sandbox: due deliveries: %w", err)
	}
	if s.cfg.Reorder {
		rand.Shuffle(len(due), func(i, j int) { due[i], due[j] = due[j], due[i] })
	}
	var (
		wg        sync.WaitGroup
		delivered atomic.Int64
	)
	for _, d := range due {
		lease, ok, err := s.claim(ctx, d.ID)
		if err != nil {
			wg.Wait()
			return int(delivered.Load()), err
		}
		if !ok {
			continue // another worker or process has it
		}
		d.Attempts++
		send := func() {
			if s.deliver(ctx, d, lease) {
				delivered.Add(1)
			}
		}
		if s.cfg.Reorder {
			wg.Go(send) // concurrent sends arrive in any order
		} else {
			send()
		}
	}
	wg.Wait()
	return int(delivered.Load()), nil
}

// claim takes a due row for this worker with a guarded UPDATE: of two
// workers (even in two processes) racing for it, exactly one matches, and a
// row another process meanwhile sent and rescheduled no longer matches. The
// lease, taken at claim time, outlives the send; if this process dies the
// row becomes due again once it runs out: delivery is at least once.
func (s *Server) claim(ctx context.Context, id string) (dbTime, bool, error) {
	now := at(s.now())
	lease := at(now.Add(2*s.cfg.DeliveryTimeout + time.Second))
	res := s.db.WithContext(ctx).Exec(
		`UPDATE sandbox_webhook_deliveries SET claimed_until = ?, attempts = attempts + 1
		  WHERE id = ? AND delivered_at IS NULL AND next_attempt_at <= ?
		    AND (claimed_until IS NULL OR claimed_until <= ?)`,
		lease, id, now, now)
	if res.Error != nil {
		return dbTime{}, false, fmt.Errorf("sandbox: claim delivery: %w", res.Error)
	}
	return lease, res.RowsAffected == 1, nil
}

// deliver sends one claimed row and records the outcome: delivered on a
// 2xx, otherwise scheduled again after an exponential backoff.
func (s *Server) deliver(ctx context.Context, d deliveryRow, lease dbTime) bool {
	status, sendErr := s.send(ctx, d)
	ok := sendErr == nil && status >= 200 && status < 300
	now := at(s.now())
	// Record the outcome even when ctx is ending: a sent-but-unrecorded
	// event would be sent again, which is allowed but avoidable.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var res *gorm.DB
	if ok {
		res = s.db.WithContext(bctx).Exec(
			`UPDATE sandbox_webhook_deliveries SET delivered_at = ?, claimed_until = NULL, last_status = ?, last_error = ''
			  WHERE id = ? AND claimed_until = ?`, now, status, d.ID, lease)
	} else {
		msg := fmt.Sprintf("status %d", status)
		if sendErr != nil {
			msg = truncate(sendErr.Error(), 500)
		}
		next := at(now.Add(s.backoff(d.Attempts)))
		res = s.db.WithContext(bctx).Exec(
			`UPDATE sandbox_webhook_deliveries SET next_attempt_at = ?, claimed_until = NULL, last_status = ?, last_error = ?
			  WHERE id = ? AND claimed_until = ?`, next, status, msg, d.ID, lease)
		s.log.WarnContext(ctx, "sandbox webhook not accepted", "event_id", d.EventID, "type", d.EventType,
			"attempt", d.Attempts, "status", status, "err", sendErr, "next_attempt_at", formatTime(next.Time))
	}
	if res.Error != nil {
		s.log.ErrorContext(ctx, "sandbox webhook outcome not recorded", "event_id", d.EventID, "err", res.Error)
	}
	return ok
}

// send POSTs the stored payload, signed afresh per Standard Webhooks with
// the real current time (the receiver checks it against its own clock).
func (s *Server) send(ctx context.Context, d deliveryRow) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DeliveryTimeout)
	defer cancel()
	ts := time.Now()
	sig, err := s.signer.Sign(d.EventID, ts, []byte(d.Payload))
	if err != nil {
		return 0, fmt.Errorf("sign: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.WebhookURL, strings.NewReader(d.Payload))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "payd-sandbox/1")
	req.Header.Set(standardwebhooks.HeaderWebhookID, d.EventID)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		// Keep the cause, not the URL: it may carry credentials.
		var ue *url.Error
		if errors.As(err, &ue) {
			return 0, ue.Err
		}
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	return resp.StatusCode, nil
}

// backoff is the wait after the attempts-th failed delivery: RetryBase,
// doubling each time, capped at RetryMax.
func (s *Server) backoff(attempts int) time.Duration {
	d := s.cfg.RetryBase
	for i := 1; i < attempts && d < s.cfg.RetryMax; i++ {
		d *= 2
	}
	return min(d, s.cfg.RetryMax)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
