package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/repository"
	"github.com/payd/payd/service"
)

// Store is the outbox's reading side the worker drives
// (repository.NotifyStore).
type Store interface {
	Unfanned(ctx context.Context, limit int) ([]domain.NotifyEvent, error)
	FanOut(ctx context.Context, ev domain.NotifyEvent, body []byte, endpoints []domain.Endpoint, newID func() string, now time.Time) (int, error)
	PassOver(ctx context.Context, ids []string) (int64, error)
	Due(ctx context.Context, endpointID string, now time.Time, limit int) ([]string, error)
	Claim(ctx context.Context, id string, now, until time.Time) (domain.Delivery, bool, error)
	FindEvent(ctx context.Context, id string) (domain.NotifyEvent, error)
	Record(ctx context.Context, a domain.DeliveryAttempt, held time.Time, o repository.Outcome, now time.Time) (bool, error)
}

// Endpoints is what the worker reads of the endpoints, and the 410 path
// (repository.EndpointStore).
type Endpoints interface {
	List(ctx context.Context, enabledOnly bool) ([]domain.Endpoint, error)
	Gone(ctx context.Context, id, reason string, now time.Time) (int64, error)
	UpsertFromEnv(ctx context.Context, e domain.Endpoint, now time.Time) (domain.Endpoint, error)
}

// EnvEndpointID is the ID of the endpoint PAYD_NOTIFY_URL configures: the
// same on every replica, so replicas starting together store it once.
var EnvEndpointID = uuid.NewSHA1(uuid.NameSpaceURL, []byte("payd:notify:PAYD_NOTIFY_URL")).String()

// EnvEndpoint is the endpoint PAYD_NOTIFY_URL and PAYD_NOTIFY_SECRET
// configure: every event type.
func EnvEndpoint(url, secret string, now time.Time) domain.Endpoint {
	return domain.Endpoint{ID: EnvEndpointID, URL: url, Secret: secret, Events: domain.NotifyTypes,
		Description: "PAYD_NOTIFY_URL", Status: domain.EndpointEnabled, FromEnv: true, CreatedAt: now, UpdatedAt: now}
}

// Outcome labels payd_notify_deliveries_total: what one attempt's answer did.
type Outcome string

// The outcomes of an attempt.
const (
	OutcomeDelivered Outcome = "delivered" // 2xx
	OutcomeRetry     Outcome = "retry"     // another answer, a timeout, a refused connection: sent again later
	OutcomeFailed    Outcome = "failed"    // given up after DeliveryGiveUpAfter
	OutcomeGone      Outcome = "gone"      // 410: the endpoint is disabled
)

// Outcomes lists every outcome.
var Outcomes = []Outcome{OutcomeDelivered, OutcomeRetry, OutcomeFailed, OutcomeGone}

// Observer is told of each attempt's outcome (the metrics).
type Observer interface{ Delivered(Outcome) }

// Worker fans out and delivers; every replica runs one (JobNotify). The
// lease makes one replica send one attempt at a time.
type Worker struct {
	Store     Store
	Endpoints Endpoints
	Sender    Sender
	// Lease is how long a claimed delivery is the claimer's: longer than
	// the sender's timeout, so no other replica sends it while this one
	// may still be waiting for the answer.
	Lease    time.Duration
	Now      func() time.Time
	Log      *slog.Logger
	Observer Observer             // nil: none
	Tracer   trace.TracerProvider // nil: no spans
	// PerEndpoint is how many deliveries of one endpoint one goroutine
	// sends, one after another; every endpoint has its own goroutine.
	PerEndpoint int
	// Env, optional, is the endpoint from the environment (EnvEndpoint),
	// stored before the first pass fans anything out.
	Env    *domain.Endpoint
	envSet atomic.Bool

	mu       sync.Mutex
	busy     map[string]bool // endpoints a goroutine is delivering to
	sent     int             // finished goroutines' attempts, not reported yet
	errs     []error         // and their errors
	inflight sync.WaitGroup
}

// fanOutBatch is how many events one pass fans out at most: the
// background jobs' full batch, so that a pass that took a full batch
// runs again at once (service.Job.Loop) and a busy payd's events never
// wait for the next tick in a growing queue.
const fanOutBatch = 500

// LeaseFor is the lease for a sender timeout: twice it, and a margin for
// recording the answer.
func LeaseFor(timeout time.Duration) time.Duration { return 2*timeout + 5*time.Second }

// Job is the worker as a background job.
func (w *Worker) Job(every time.Duration, log *slog.Logger, obs service.Observer) service.Job {
	return service.Job{Name: service.JobNotify, Every: every, Run: w.Run, Log: log, Observer: obs}
}

// Run is one pass: new events fanned out, then due deliveries sent. It
// returns how many events it fanned out and attempts it made.
func (w *Worker) Run(ctx context.Context) (int64, error) {
	if w.Env != nil && !w.envSet.Load() {
		ep, err := w.Endpoints.UpsertFromEnv(ctx, *w.Env, w.Now().UTC())
		if err != nil {
			return 0, fmt.Errorf("store the endpoint of PAYD_NOTIFY_URL: %w", err)
		}
		w.envSet.Store(true)
		if ep.Status != domain.EndpointEnabled {
			w.log().Warn("notify: the endpoint of PAYD_NOTIFY_URL is disabled and stays so; nothing is sent to it until an operator enables it with `payd admin endpoints update "+ep.ID+" -enable`",
				"endpoint", ep.ID, "reason", ep.DisabledReason)
		}
	}
	endpoints, err := w.Endpoints.List(ctx, true)
	if err != nil {
		return 0, err
	}
	fanned, ferr := w.fanOut(ctx, endpoints)
	sent, derr := w.deliver(ctx, endpoints)
	return int64(fanned + sent), errors.Join(ferr, derr)
}

func (w *Worker) fanOut(ctx context.Context, endpoints []domain.Endpoint) (int, error) {
	events, err := w.Store.Unfanned(ctx, fanOutBatch)
	if err != nil {
		return 0, err
	}
	// Events no endpoint wants (every event, while payd has no endpoint)
	// are passed over together, in one statement: nothing will send them,
	// so they need no body and no transaction each.
	var unwanted []string
	total := 0
	for _, ev := range events {
		if !slices.ContainsFunc(endpoints, func(e domain.Endpoint) bool { return e.Wants(ev.Type) }) {
			unwanted = append(unwanted, ev.ID)
			continue
		}
		body, err := Render(ev)
		if err != nil {
			return total, fmt.Errorf("render event %s: %w", ev.ID, err)
		}
		if _, err := w.Store.FanOut(ctx, ev, body, endpoints, newID, w.Now().UTC()); err != nil {
			return total, err
		}
		total++
	}
	if len(unwanted) > 0 {
		if _, err := w.Store.PassOver(ctx, unwanted); err != nil {
			return total, err
		}
		total += len(unwanted)
	}
	return total, nil
}

func newID() string { return uuid.Must(uuid.NewV7()).String() }

// deliver starts, for each endpoint not already being delivered to, a
// goroutine of its own sending its due deliveries one after another, and
// returns without waiting for any: a slow endpoint holds only its own
// goroutine, never the pass, the fan-out or another endpoint. It returns
// what the goroutines finished since the last pass sent and failed with.
func (w *Worker) deliver(ctx context.Context, endpoints []domain.Endpoint) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.busy == nil {
		w.busy = map[string]bool{}
	}
	for _, ep := range endpoints {
		if w.busy[ep.ID] {
			continue
		}
		w.busy[ep.ID] = true
		w.inflight.Add(1)
		go func() {
			defer w.inflight.Done()
			n, err := w.deliverTo(ctx, ep)
			w.mu.Lock()
			defer w.mu.Unlock()
			delete(w.busy, ep.ID)
			w.sent += n
			if err != nil {
				w.errs = append(w.errs, err)
			}
		}()
	}
	sent, errs := w.sent, w.errs
	w.sent, w.errs = 0, nil
	return sent, errors.Join(errs...)
}

// Wait waits for the deliveries the passes so far started.
func (w *Worker) Wait() { w.inflight.Wait() }

// deliverTo sends ep's due deliveries, PerEndpoint at a time: batch after
// batch while every attempt of the last one delivered and it was full (a
// healthy endpoint with a backlog is drained in one pass, up to
// maxPerPass), and no further after an attempt that did not deliver (a
// failing endpoint waits for its backoff, holding no pool slot meanwhile).
func (w *Worker) deliverTo(ctx context.Context, ep domain.Endpoint) (int, error) {
	batch := max(w.PerEndpoint, 1)
	sent := 0
	for sent < maxPerPass {
		ids, err := w.Store.Due(ctx, ep.ID, w.Now().UTC(), batch)
		if err != nil {
			return sent, err
		}
		healthy := len(ids) == batch
		for _, id := range ids {
			if ctx.Err() != nil {
				return sent, nil
			}
			outcome, err := w.attempt(ctx, ep, id)
			if err != nil {
				return sent, err
			}
			if outcome != "" {
				sent++
			}
			if outcome == OutcomeGone {
				return sent, nil
			}
			healthy = healthy && outcome == OutcomeDelivered
		}
		if !healthy {
			return sent, nil
		}
	}
	return sent, nil
}

// maxPerPass bounds the deliveries one pass sends one endpoint.
const maxPerPass = 500

// attempt claims delivery id, sends it once and records the answer. It
// reports the attempt's outcome: "" when it sent nothing (another replica
// holds the delivery), OutcomeGone when the endpoint is gone (410).
func (w *Worker) attempt(ctx context.Context, ep domain.Endpoint, id string) (Outcome, error) {
	now := w.Now().UTC()
	d, won, err := w.Store.Claim(ctx, id, now, now.Add(w.Lease))
	if err != nil || !won {
		return "", err
	}
	ev, err := w.Store.FindEvent(ctx, d.EventID)
	if err != nil {
		return "", err
	}
	service.Fault("notify_before_send") // test builds: kill -9 here, the lease taken and nothing sent
	ctx, span := w.tracer().Start(ctx, "notify deliver", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("payd.notify.event_id", ev.ID), attribute.String("payd.notify.event_type", string(ev.Type)),
			attribute.String("payd.notify.endpoint_id", ep.ID), attribute.Int("payd.notify.attempt", d.Attempts)))
	defer span.End()
	start := w.Now().UTC()
	ans := w.Sender.Send(ctx, ep, ev.ID, ev.Body, start)
	end := w.Now().UTC()
	outcome, rec := w.judge(ev, d, ans, end)
	span.SetAttributes(attribute.Int("http.response.status_code", ans.Status), attribute.String("payd.notify.outcome", string(outcome)))
	if outcome != OutcomeDelivered {
		span.SetStatus(codes.Error, rec.Error)
	}
	att := domain.DeliveryAttempt{ID: newID(), DeliveryID: d.ID, N: d.Attempts, StartedAt: start, Duration: end.Sub(start),
		Status: ans.Status, Error: rec.Error, RequestHead: ans.RequestHead, Response: ans.Response}
	ok, err := w.Store.Record(ctx, att, *d.LeasedUntil, rec, end)
	if err != nil {
		// whatever in the answer the store refused, the outcome must still
		// land (else the delivery is re-sent at each lease's end, with no
		// backoff): once more, the attempt without the answer's text
		w.log().Warn("notify: recording an attempt failed; recording it without its answer", "delivery", d.ID, "err", err)
		att.RequestHead, att.Response = "", ""
		att.Error = "the answer could not be recorded"
		if rec.Error != "" {
			att.Error += "; " + rec.Error
		}
		if ok, err = w.Store.Record(ctx, att, *d.LeasedUntil, rec, end); err != nil {
			return OutcomeRetry, err
		}
	}
	if !ok {
		w.log().Warn("notify: a delivery's lease ran out before its answer was recorded", "delivery", d.ID, "event", ev.ID)
		return OutcomeRetry, nil // what it was told is another claim's now: no reason to go on
	}
	if w.Observer != nil {
		w.Observer.Delivered(outcome)
	}
	if outcome == OutcomeGone {
		if _, err := w.Endpoints.Gone(ctx, ep.ID, "the endpoint answered 410 Gone", end); err != nil {
			return OutcomeGone, err
		}
		w.log().Warn("notify: endpoint answered 410 Gone and is disabled", "endpoint", ep.ID)
		return OutcomeGone, nil
	}
	return outcome, nil
}

// judge turns an answer into the delivery's next step: 2xx delivers, 410
// gives up (and disables the endpoint), an address the policy refuses
// fails the delivery, anything else retries after the
// backoff, until DeliveryGiveUpAfter has passed since the event.
func (w *Worker) judge(ev domain.NotifyEvent, d domain.Delivery, a Answer, now time.Time) (Outcome, repository.Outcome) {
	o := repository.Outcome{Status: a.Status}
	switch {
	case a.Err == nil && a.Status >= 200 && a.Status < 300:
		o.Event = domain.DeliveryEventDeliver
		return OutcomeDelivered, o
	case a.Err == nil && a.Status == http.StatusGone:
		o.Event, o.Error = domain.DeliveryEventGiveUp, "answered 410 Gone: the endpoint is disabled"
		return OutcomeGone, o
	case errors.Is(a.Err, ErrRefusedAddress):
		// the policy will refuse it on every attempt: failed now, and the
		// delivery log says why
		o.Event, o.Error = domain.DeliveryEventGiveUp, a.Err.Error()
		return OutcomeFailed, o
	case a.Err != nil:
		o.Error = inWords(a.Err)
	default:
		o.Error = fmt.Sprintf("answered %d", a.Status)
	}
	next, again := domain.NextDeliveryAttempt(ev.CreatedAt, now, d.Attempts, nil)
	if !again {
		o.Event = domain.DeliveryEventGiveUp
		return OutcomeFailed, o
	}
	o.Event, o.Next = domain.DeliveryEventRetry, next
	return OutcomeRetry, o
}

func (w *Worker) tracer() trace.Tracer {
	if w.Tracer == nil {
		return noop.NewTracerProvider().Tracer("")
	}
	return w.Tracer.Tracer("github.com/payd/payd/notify")
}

func (w *Worker) log() *slog.Logger {
	if w.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return w.Log
}
