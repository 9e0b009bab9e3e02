package handler

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

type refundJSON struct {
	ID               string  `json:"id"`
	OrderID          string  `json:"order_id"`
	Kind             string  `json:"kind"`
	Status           string  `json:"status"`
	Amount           string  `json:"amount"`
	Currency         string  `json:"currency"`
	ChargeID         string  `json:"provider_charge_id"`
	ProviderRefundID *string `json:"provider_refund_id"`
	RequestID        *string `json:"request_id"`
	Reason           string  `json:"reason"`
	CreatedAt        string  `json:"created_at"`
}

func toRefundJSON(r domain.Refund) refundJSON {
	return refundJSON{ID: r.ID, OrderID: r.OrderID, Kind: r.Kind, Status: string(r.Status), Amount: domain.FormatAmount(r.Amount, r.Currency),
		Currency: string(r.Currency), ChargeID: r.ChargeID, ProviderRefundID: strPtr(r.ProviderRefundID), RequestID: strPtr(r.RequestID),
		Reason: r.Reason, CreatedAt: stamp(r.CreatedAt)}
}

type refundResultJSON struct {
	Refund refundJSON `json:"refund"`
	Order  orderJSON  `json:"order"`
}

type webhookEventJSON struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	Outcome     *string         `json:"outcome"`
	ReceivedAt  string          `json:"received_at"`
	ProcessedAt *string         `json:"processed_at"`
	Payload     json.RawMessage `json:"payload"`
}

type auditJSON struct {
	ID        string          `json:"id"`
	Actor     string          `json:"actor"`
	Action    string          `json:"action"`
	OrderID   *string         `json:"order_id"`
	Target    *string         `json:"target"`
	RequestID *string         `json:"request_id"`
	Result    int             `json:"result"`
	Outcome   string          `json:"outcome"` // succeeded, refused or failed, from result
	Code      *string         `json:"code"`    // the problem code of a refusal or failure
	Replayed  bool            `json:"replayed"`
	Detail    json.RawMessage `json:"detail,omitempty"`
	CreatedAt string          `json:"created_at"`
}

func toAuditJSON(e domain.AuditEntry) auditJSON {
	j := auditJSON{ID: e.ID, Actor: e.Actor, Action: e.Action, OrderID: strPtr(e.OrderID), Target: strPtr(e.Target),
		RequestID: strPtr(e.RequestID), Result: e.Result, Outcome: auditOutcome(e.Result), CreatedAt: stamp(e.CreatedAt)}
	if json.Valid([]byte(e.Detail)) {
		j.Detail = json.RawMessage(e.Detail)
		var d struct {
			Code     string `json:"code"`
			Replayed bool   `json:"replayed"`
		}
		if json.Unmarshal(j.Detail, &d) == nil {
			j.Code, j.Replayed = strPtr(d.Code), d.Replayed
		}
	}
	return j
}

// auditSummary is an audit entry's line on the timeline: who did what and
// how it ended, e.g. "alice refund: 409 refund_too_large (refused)".
func auditSummary(j auditJSON) string {
	s := j.Actor + " " + j.Action + ": " + strconv.Itoa(j.Result)
	if j.Code != nil {
		s += " " + *j.Code
	}
	s += " (" + j.Outcome
	if j.Replayed {
		s += ", replayed"
	}
	return s + ")"
}

type discrepancyJSON struct {
	ID             string  `json:"id"`
	RunID          *string `json:"run_id"`
	Type           string  `json:"type"`
	Reference      string  `json:"reference"`
	OrderID        *string `json:"order_id"`
	AttemptID      *string `json:"attempt_id"`
	ChargeID       *string `json:"provider_charge_id"`
	ProviderAmount *string `json:"provider_amount"`
	LocalAmount    *string `json:"local_amount"`
	Currency       *string `json:"currency"`
	Status         string  `json:"status"`
	Resolution     *string `json:"resolution"`
	Note           string  `json:"note"`
	DetectedAt     string  `json:"detected_at"`
	ResolvedAt     *string `json:"resolved_at"`
	// Actions are the resolutions that fit it now (none unless open), so
	// a console offers those alone rather than learning from a 409.
	Actions []string `json:"actions"`
}

func toDiscrepancyJSON(d domain.Discrepancy) discrepancyJSON {
	amount := func(v interface{ IsZero() bool }, s string) *string {
		if v.IsZero() {
			return nil
		}
		return &s
	}
	cur := d.Currency
	return discrepancyJSON{
		ID: d.ID, RunID: strPtr(d.RunID), Type: string(d.Type), Reference: d.Reference, OrderID: strPtr(d.OrderID),
		AttemptID: strPtr(d.AttemptID), ChargeID: strPtr(d.ChargeID),
		ProviderAmount: amount(d.ProviderAmount, domain.FormatAmount(d.ProviderAmount, cur)),
		LocalAmount:    amount(d.LocalAmount, domain.FormatAmount(d.LocalAmount, cur)),
		Currency:       strPtr(string(cur)), Status: string(d.Status), Resolution: strPtr(d.Resolution), Note: d.Note,
		DetectedAt: stamp(d.DetectedAt), ResolvedAt: stampPtr(d.ResolvedAt), Actions: d.Actions(),
	}
}

// runJSON is a run with its findings: the list's summary and the
// discrepancies it recorded.
type runJSON struct {
	runSummaryJSON
	Discrepancies []discrepancyJSON `json:"discrepancies"`
}

func toRunJSON(r domain.ReconciliationRun) runJSON {
	out := runJSON{runSummaryJSON: toRunSummaryJSON(r), Discrepancies: make([]discrepancyJSON, len(r.Discrepancies))}
	for i, d := range r.Discrepancies {
		out.Discrepancies[i] = toDiscrepancyJSON(d)
	}
	return out
}

// toRunSummaryJSON is a run's counts, as a list shows them.
func toRunSummaryJSON(r domain.ReconciliationRun) runSummaryJSON {
	return runSummaryJSON{ID: r.ID, Source: r.Source, From: stamp(r.From), To: stamp(r.To), DryRun: r.DryRun,
		Matched: r.Matched, Found: r.Found, New: r.New, CreatedAt: stamp(r.CreatedAt), FinishedAt: stampPtr(r.FinishedAt)}
}

// timelineEntry is one line of an order's merged story.
type timelineEntry struct {
	At      string `json:"at"`
	Kind    string `json:"kind"` // order, attempt, webhook, refund, discrepancy, audit, ledger, dispute, event
	ID      string `json:"id"`
	Summary string `json:"summary"`
	at      time.Time
}

type timelineJSON struct {
	Order         adminOrderJSON     `json:"order"`
	Attempts      []attemptJSON      `json:"attempts"`
	WebhookEvents []webhookEventJSON `json:"webhook_events"`
	Refunds       []refundJSON       `json:"refunds"`
	Discrepancies []discrepancyJSON  `json:"discrepancies"`
	Audit         []auditJSON        `json:"audit"`
	Ledger        []ledgerEntryJSON  `json:"ledger"`
	Disputes      []disputeJSON      `json:"disputes"`
	Events        []outboxEventJSON  `json:"events"`
	Timeline      []timelineEntry    `json:"timeline"`
}

// outboxEventJSON is one event the order's changes wrote for the
// merchant's endpoints (ADR 0053), with the order as the change left it.
type outboxEventJSON struct {
	ID             string    `json:"id"`
	Type           string    `json:"type"`
	Seq            int64     `json:"seq"`
	Cause          causeJSON `json:"cause"`
	OrderStatus    string    `json:"order_status"`
	PayRequestID   *string   `json:"pay_request_id"`
	PaidAt         *string   `json:"paid_at"`
	RefundedAmount string    `json:"refunded_amount"`
	OrderUpdatedAt string    `json:"order_updated_at"`
	Money          booksJSON `json:"money"`
	FannedOut      bool      `json:"fanned_out"`
	CreatedAt      string    `json:"created_at"`
}

// causeJSON is what made a change.
type causeJSON struct {
	Kind string `json:"kind"`
	Ref  string `json:"ref"`
}

func toOutboxEventJSON(e domain.OutboxEvent) outboxEventJSON {
	return outboxEventJSON{ID: e.ID, Type: string(e.Type), Seq: e.Seq, Cause: causeJSON{Kind: string(e.Cause.Kind), Ref: e.Cause.Ref},
		OrderStatus: string(e.OrderStatus), PayRequestID: strPtr(e.PayRequestID), PaidAt: stampPtr(e.PaidAt),
		RefundedAmount: domain.FormatAmount(e.Refunded, e.Currency), OrderUpdatedAt: stamp(e.UpdatedAt),
		Money: toBooksJSON(e.Books, e.Currency), FannedOut: e.FannedOut, CreatedAt: stamp(e.CreatedAt)}
}

// toTimelineJSON renders the order's story: each kind of record in its own
// list, and all of them merged in time order.
func toTimelineJSON(t service.Timeline, links ProviderLinks) timelineJSON {
	out := timelineJSON{Order: adminOrderJSON{orderJSON: toOrderJSON(t.Order), Money: toBooksJSON(t.Money, t.Order.Currency)},
		Attempts: []attemptJSON{}, WebhookEvents: []webhookEventJSON{}, Refunds: []refundJSON{}, Discrepancies: []discrepancyJSON{},
		Audit: []auditJSON{}, Ledger: []ledgerEntryJSON{}, Disputes: []disputeJSON{}, Events: []outboxEventJSON{}}
	add := func(at time.Time, kind, id, summary string) {
		out.Timeline = append(out.Timeline, timelineEntry{At: stamp(at), Kind: kind, ID: id, Summary: summary, at: at})
	}
	add(t.Order.CreatedAt, "order", t.Order.ID, "created "+domain.FormatAmount(t.Order.Amount, t.Order.Currency)+" "+string(t.Order.Currency))
	out.Order.Shipments = toShipmentsJSON(t.Order.Shipments)
	for _, sh := range t.Order.Shipments {
		add(sh.CreatedAt, "shipment", sh.ID, shipmentSummary(sh))
	}
	for _, a := range t.Attempts {
		out.Attempts = append(out.Attempts, toAttemptJSON(a, true))
		add(a.CreatedAt, "attempt", a.ID, "payment attempt "+string(a.Status)+" ("+a.PaymentMethod+")")
	}
	for _, e := range t.Events {
		j := webhookEventJSON{ID: e.ID, Type: e.Type, Outcome: strPtr(e.Outcome), ReceivedAt: stamp(e.ReceivedAt), ProcessedAt: stampPtr(e.ProcessedAt)}
		if json.Valid(e.Payload) {
			j.Payload = e.Payload
		}
		out.WebhookEvents = append(out.WebhookEvents, j)
		add(e.ReceivedAt, "webhook", e.ID, e.Type+" "+e.Outcome)
	}
	for _, r := range t.Refunds {
		out.Refunds = append(out.Refunds, toRefundJSON(r))
		add(r.CreatedAt, "refund", r.ID, r.Kind+" refund of "+domain.FormatAmount(r.Amount, r.Currency)+" "+string(r.Status))
	}
	for _, d := range t.Discrepancies {
		out.Discrepancies = append(out.Discrepancies, toDiscrepancyJSON(d))
		add(d.DetectedAt, "discrepancy", d.ID, string(d.Type)+" "+string(d.Status))
	}
	for _, e := range t.Audit {
		j := toAuditJSON(e)
		out.Audit = append(out.Audit, j)
		add(e.CreatedAt, "audit", e.ID, auditSummary(j))
	}
	for _, e := range t.Ledger {
		j := toLedgerEntryJSON(e)
		out.Ledger = append(out.Ledger, j)
		add(e.CreatedAt, "ledger", e.ID, ledgerSummary(j))
	}
	for _, d := range t.Disputes {
		j := toDisputeJSON(d, links)
		out.Disputes = append(out.Disputes, j)
		add(d.OpenedAt, "dispute", j.ID, "dispute of "+j.Amount+" "+j.Currency+disputeReason(j.Reason))
	}
	for _, e := range t.Notified {
		out.Events = append(out.Events, toOutboxEventJSON(e))
		add(e.CreatedAt, "event", e.ID, string(e.Type)+" #"+strconv.FormatInt(e.Seq, 10)+" ("+string(e.Cause.Kind)+")")
	}
	sort.SliceStable(out.Timeline, func(i, j int) bool { return out.Timeline[i].at.Before(out.Timeline[j].at) })
	return out
}

// shipmentSummary is a shipment's line on the timeline: "shipped 2 × mug,
// 1 × tea (DHL JD0146)".
func shipmentSummary(sh domain.Shipment) string {
	lines := make([]string, len(sh.Items))
	for i, l := range sh.Items {
		lines[i] = strconv.FormatInt(l.Quantity, 10) + " × " + l.SKU
	}
	out := "shipped " + strings.Join(lines, ", ")
	if by := strings.TrimSpace(sh.Carrier + " " + sh.TrackingNumber); by != "" {
		out += " (" + by + ")"
	}
	return out
}

type adminRecordJSON struct {
	recordJSON
	Scope       string `json:"scope"`
	LockedUntil string `json:"locked_until"`
	Fingerprint string `json:"fingerprint"`
}
