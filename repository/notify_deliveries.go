package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/payd/payd/domain"
)

// NotifyStore is the outbox's reading side (docs/adr/0053): events fanned
// out to deliveries, deliveries claimed under a lease, each attempt and its
// outcome recorded. The events themselves are written by the changes'
// own transactions.
type NotifyStore struct{ db *DB }

// NewNotifyStore returns a NotifyStore on db.
func NewNotifyStore(db *DB) *NotifyStore { return &NotifyStore{db: db} }

// The delivery machine's guards, rendered from domain's table.
var (
	deliveryDeliver   = guardOf(domain.DeliveryMachine, domain.DeliveryEventDeliver)
	deliveryRetry     = guardOf(domain.DeliveryMachine, domain.DeliveryEventRetry)
	deliveryGiveUp    = guardOf(domain.DeliveryMachine, domain.DeliveryEventGiveUp)
	deliveryRedeliver = guardOf(domain.DeliveryMachine, domain.DeliveryEventRedeliver)
	deliveryPending   = sqlStatus(domain.DeliveryPending)
)

// fanOutColumns are what an event is read with: its own columns, its
// snapshot, and the order's immutable columns (orders o).
const fanOutColumns = `e.id, e.order_id, e.seq, e.type, e.cause, e.cause_ref, e.order_status, e.pay_request_id, e.paid_at,
	e.refunded_minor, e.order_updated_at, e.charged_minor, e.books_refunded_minor, e.disputed_minor, e.lost_minor,
	e.body, e.fanned_out, e.created_at, o.customer_id, o.currency, o.amount_minor, o.created_at, o.expires_at,
	e.fulfillment_status, e.shipment_id, o.capture_method, e.captured_minor, e.capture_before, e.authorized_minor`

// scanEvent reads one row of fanOutColumns.
func scanEvent(scan func(...any) error) (domain.NotifyEvent, orderRow, string, error) {
	var (
		ev                                domain.NotifyEvent
		o                                 orderRow
		typ, cause                        string
		charged, refunded, disputed, lost int64
		authorized                        int64
		createdAt                         utcTime
		shipment                          sql.NullString
	)
	err := scan(&ev.ID, &ev.OrderID, &ev.Seq, &typ, &cause, &ev.Cause.Ref, &o.Status, &o.PayRequestID, &o.PaidAt,
		&o.RefundedMinor, &o.UpdatedAt, &charged, &refunded, &disputed, &lost,
		&ev.Body, &ev.FannedOut, &createdAt, &o.CustomerID, &o.Currency, &o.AmountMinor, &o.CreatedAt, &o.ExpiresAt,
		&o.Fulfillment, &shipment, &o.CaptureMethod, &o.CapturedMinor, &o.CaptureBefore, &authorized)
	if err != nil {
		return domain.NotifyEvent{}, orderRow{}, "", err
	}
	ev.Type, ev.Cause.Kind, ev.CreatedAt = domain.NotifyType(typ), domain.CauseKind(cause), createdAt.time()
	o.ID, o.Version = ev.OrderID, ev.Seq
	c := domain.Currency(o.Currency)
	ev.Money = domain.Books{Authorized: domain.FromMinorUnits(authorized, c), Charged: domain.FromMinorUnits(charged, c), Refunded: domain.FromMinorUnits(refunded, c),
		Disputed: domain.FromMinorUnits(disputed, c), Lost: domain.FromMinorUnits(lost, c)}
	ev.Money.Net = ev.Money.Charged.Sub(ev.Money.Refunded).Sub(ev.Money.Lost)
	return ev, o, shipment.String, nil
}

// events reads the events a query of fanOutColumns selects, each with its
// order rebuilt from the snapshot and the order's items.
func (s *NotifyStore) events(ctx context.Context, query string, args ...any) ([]domain.NotifyEvent, error) {
	rows, err := s.db.query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		out       []domain.NotifyEvent
		orders    []orderRow
		ids       []string
		shipments []string // each event's, "" for none
	)
	for rows.Next() {
		ev, o, shipment, err := scanEvent(rows.Scan)
		if err != nil {
			return nil, classify(err)
		}
		out, orders, shipments = append(out, ev), append(orders, o), append(shipments, shipment)
		if !slices.Contains(ids, ev.OrderID) {
			ids = append(ids, ev.OrderID)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	store := &OrderStore{db: s.db}
	items, err := store.items(ctx, ids)
	if err != nil {
		return nil, err
	}
	named := slices.DeleteFunc(slices.Clone(shipments), func(id string) bool { return id == "" })
	byID, err := store.shipmentsByID(ctx, named)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Order = orders[i].toDomain(items[out[i].OrderID])
		if sh, ok := byID[shipments[i]]; ok {
			out[i].Shipment = &sh
		}
	}
	return out, nil
}

// listUnfanned is Unfanned's: the oldest events not fanned out yet.
const listUnfanned = `SELECT ` + fanOutColumns + ` FROM notify_events e JOIN orders o ON o.id = e.order_id
	WHERE e.fanned_out = 0 ORDER BY e.created_at, e.order_id, e.seq LIMIT ?`

// Unfanned returns at most limit events not fanned out yet, oldest first.
func (s *NotifyStore) Unfanned(ctx context.Context, limit int) ([]domain.NotifyEvent, error) {
	out, err := s.events(ctx, listUnfanned, limit)
	if err != nil {
		return nil, fmt.Errorf("list events to fan out: %w", err)
	}
	return out, nil
}

// findEvent is FindEvent's.
const findEvent = `SELECT ` + fanOutColumns + ` FROM notify_events e JOIN orders o ON o.id = e.order_id WHERE e.id = ?`

// FindEvent returns one event, or domain.ErrNotifyEventNotFound.
func (s *NotifyStore) FindEvent(ctx context.Context, id string) (domain.NotifyEvent, error) {
	out, err := s.events(ctx, findEvent, id)
	if err != nil {
		return domain.NotifyEvent{}, fmt.Errorf("find event %s: %w", id, err)
	}
	if len(out) == 0 {
		return domain.NotifyEvent{}, fmt.Errorf("find event %s: %w", id, domain.ErrNotifyEventNotFound)
	}
	return out[0], nil
}

// markFannedOut is FanOut's guard: of replicas fanning out one event at
// once, the first to reach the row matches it and the others (waiting on
// its lock, then reading it fanned out) match nothing.
const markFannedOut = `UPDATE notify_events SET fanned_out = 1, body = ? WHERE id = ? AND fanned_out = 0`

// PassOver marks events that no endpoint wants fanned out, with no body
// and no delivery, in one statement, and returns how many it marked (an
// event another replica fanned out meanwhile is left as it is).
func (s *NotifyStore) PassOver(ctx context.Context, ids []string) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	q := `UPDATE notify_events SET fanned_out = 1 WHERE fanned_out = 0 AND id IN (?` + strings.Repeat(", ?", len(ids)-1) + `)`
	n, err := s.db.exec(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("pass over %d events no endpoint wants: %w", len(ids), err)
	}
	return n, nil
}

// insertDelivery is one pending delivery, due at once.
var insertDelivery = `INSERT INTO notify_deliveries (id, endpoint_id, event_id, order_id, seq, status, attempts, next_attempt_at, created_at, updated_at)
	VALUES (?, ?, ?, ?, ?, ` + deliveryPending + `, 0, ?, ?, ?)`

// FanOut stores ev's body and one pending delivery to each of endpoints
// (those that want its type), and marks it fanned out, in one transaction.
// It reports how many deliveries it wrote: 0 when another replica fanned
// the event out first. The unique key on (endpoint_id, event_id) holds each
// delivery to one row whatever happens.
func (s *NotifyStore) FanOut(ctx context.Context, ev domain.NotifyEvent, body []byte, endpoints []domain.Endpoint, newID func() string, now time.Time) (int, error) {
	var n int
	err := s.db.inTx(ctx, func(ctx context.Context) error {
		n = 0
		won, err := s.db.guarded(ctx, act{"fan out event", ev.ID}, markFannedOut, body, ev.ID)
		if err != nil || !won {
			return err
		}
		for _, e := range endpoints {
			if !e.Wants(ev.Type) {
				continue
			}
			if _, err := s.db.exec(ctx, insertDelivery, newID(), e.ID, ev.ID, ev.OrderID, ev.Seq, ts(now), ts(now), ts(now)); err != nil {
				if isUniqueViolation(err) {
					continue
				}
				return fmt.Errorf("fan out event %s to endpoint %s: %w", ev.ID, e.ID, err)
			}
			n++
		}
		return nil
	})
	return n, err
}

// deliveryRow is a row of notify_deliveries.
type deliveryRow struct {
	ID            string   `gorm:"column:id"`
	EndpointID    string   `gorm:"column:endpoint_id"`
	EventID       string   `gorm:"column:event_id"`
	OrderID       string   `gorm:"column:order_id"`
	Seq           int64    `gorm:"column:seq"`
	Status        string   `gorm:"column:status"`
	Attempts      int      `gorm:"column:attempts"`
	NextAttemptAt utcTime  `gorm:"column:next_attempt_at"`
	LeasedUntil   *utcTime `gorm:"column:leased_until"`
	LastStatus    int      `gorm:"column:last_status"`
	LastError     string   `gorm:"column:last_error"`
	DeliveredAt   *utcTime `gorm:"column:delivered_at"`
	FailedAt      *utcTime `gorm:"column:failed_at"`
	CreatedAt     utcTime  `gorm:"column:created_at"`
	UpdatedAt     utcTime  `gorm:"column:updated_at"`
}

// TableName tells GORM the table.
func (deliveryRow) TableName() string { return "notify_deliveries" }

func (r deliveryRow) toDomain() domain.Delivery {
	return domain.Delivery{ID: r.ID, EndpointID: r.EndpointID, EventID: r.EventID, OrderID: r.OrderID, Seq: r.Seq,
		Status: domain.DeliveryStatus(r.Status), Attempts: r.Attempts, NextAttemptAt: r.NextAttemptAt.time(),
		LeasedUntil: timePtr(r.LeasedUntil), LastStatus: r.LastStatus, LastError: r.LastError,
		DeliveredAt: timePtr(r.DeliveredAt), FailedAt: timePtr(r.FailedAt), CreatedAt: r.CreatedAt.time(), UpdatedAt: r.UpdatedAt.time()}
}

// listDue is Due's. A delivery is due when it is pending, its time has
// come, no replica holds it, and nothing of the same order before it is
// still to be sent to the same endpoint: neither a pending delivery of an
// earlier event nor an earlier event not fanned out yet (whose delivery
// may be about to exist). So one order's events reach an endpoint in
// order of seq, the order's version.
var listDue = `SELECT d.id FROM notify_deliveries d
	WHERE d.endpoint_id = ? AND d.status = ` + deliveryPending + ` AND d.next_attempt_at <= ?
	  AND (d.leased_until IS NULL OR d.leased_until < ?)
	  AND NOT EXISTS (SELECT 1 FROM notify_deliveries p
	      WHERE p.endpoint_id = d.endpoint_id AND p.order_id = d.order_id AND p.seq < d.seq AND p.status = ` + deliveryPending + `)
	  AND NOT EXISTS (SELECT 1 FROM notify_events u WHERE u.order_id = d.order_id AND u.seq < d.seq AND u.fanned_out = 0)
	ORDER BY d.next_attempt_at, d.seq LIMIT ?`

// Due returns the IDs of at most limit deliveries to endpointID that may
// be sent now (see listDue): taken per endpoint, so a failing endpoint's
// backlog never fills another's pass.
func (s *NotifyStore) Due(ctx context.Context, endpointID string, now time.Time, limit int) ([]string, error) {
	rows, err := s.db.query(ctx, listDue, endpointID, ts(now), ts(now), limit)
	if err != nil {
		return nil, fmt.Errorf("list due deliveries of endpoint %s: %w", endpointID, err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, classify(err)
		}
		ids = append(ids, id)
	}
	return ids, classify(rows.Err())
}

// claimDelivery is Claim's: the recoverer's attempt lease (ADR 7), for a
// delivery. It counts the attempt as it takes it, so an attempt a replica
// died in the middle of is counted too.
var claimDelivery = `UPDATE notify_deliveries SET leased_until = ?, attempts = attempts + 1, updated_at = ?
	WHERE id = ? AND status = ` + deliveryPending + ` AND next_attempt_at <= ? AND (leased_until IS NULL OR leased_until < ?)`

// Claim leases delivery id to the caller until until, if it is still
// pending, due and unleased at now, and returns it as claimed (its
// Attempts the number of this attempt). Of replicas claiming at once one
// wins; the others get false.
func (s *NotifyStore) Claim(ctx context.Context, id string, now, until time.Time) (domain.Delivery, bool, error) {
	won, err := s.db.guarded(ctx, act{"claim delivery", id}, claimDelivery, ts(until), ts(now), id, ts(now), ts(now))
	if err != nil || !won {
		return domain.Delivery{}, false, err
	}
	d, err := s.Delivery(ctx, id)
	return d, err == nil, err
}

// Delivery returns one delivery.
func (s *NotifyStore) Delivery(ctx context.Context, id string) (domain.Delivery, error) {
	var row deliveryRow
	if err := s.db.conn(ctx).Where("id = ?", id).Take(&row).Error; err != nil {
		return domain.Delivery{}, fmt.Errorf("find delivery %s: %w", id, notFound(err, errors.New("no such delivery")))
	}
	return row.toDomain(), nil
}

// attemptRow is a row of notify_attempts.
type notifyAttemptRow struct {
	ID          string  `gorm:"column:id"`
	DeliveryID  string  `gorm:"column:delivery_id"`
	N           int     `gorm:"column:n"`
	StartedAt   utcTime `gorm:"column:started_at"`
	DurationUS  int64   `gorm:"column:duration_us"`
	Status      int     `gorm:"column:status"`
	Error       string  `gorm:"column:error"`
	RequestHead string  `gorm:"column:request_head"`
	Response    string  `gorm:"column:response"`
}

// TableName tells GORM the table.
func (notifyAttemptRow) TableName() string { return "notify_attempts" }

func (r notifyAttemptRow) toDomain() domain.DeliveryAttempt {
	return domain.DeliveryAttempt{ID: r.ID, DeliveryID: r.DeliveryID, N: r.N, StartedAt: r.StartedAt.time(),
		Duration: time.Duration(r.DurationUS) * time.Microsecond, Status: r.Status, Error: r.Error,
		RequestHead: r.RequestHead, Response: r.Response}
}

// The outcomes of an attempt, each guarded by the delivery's status and by
// the lease the caller took (its end is the token): a replica whose lease
// ran out, and was taken over, records nothing.
var (
	deliverDelivery = `UPDATE notify_deliveries SET status = ` + deliveryDeliver.to + `, leased_until = NULL, last_status = ?, last_error = '',
		delivered_at = ?, updated_at = ? WHERE id = ? AND status IN ` + deliveryDeliver.from + ` AND leased_until = ?`
	retryDelivery = `UPDATE notify_deliveries SET status = ` + deliveryRetry.to + `, leased_until = NULL, last_status = ?, last_error = ?,
		next_attempt_at = ?, updated_at = ? WHERE id = ? AND status IN ` + deliveryRetry.from + ` AND leased_until = ?`
	giveUpDelivery = `UPDATE notify_deliveries SET status = ` + deliveryGiveUp.to + `, leased_until = NULL, last_status = ?, last_error = ?,
		failed_at = ?, updated_at = ? WHERE id = ? AND status IN ` + deliveryGiveUp.from + ` AND leased_until = ?`
)

// Outcome is what an attempt's answer does to its delivery.
type Outcome struct {
	Event  domain.DeliveryEvent // deliver, retry or give_up
	Next   time.Time            // retry: when
	Status int                  // the endpoint's HTTP status; 0: none
	Error  string
}

// Record stores attempt a and applies its outcome to the delivery held
// under the lease ending at held, in one transaction. It reports false,
// and stores nothing, when the lease is no longer the caller's.
func (s *NotifyStore) Record(ctx context.Context, a domain.DeliveryAttempt, held time.Time, o Outcome, now time.Time) (bool, error) {
	errText := cleanText(o.Error, 500)
	var won bool
	err := s.db.inTx(ctx, func(ctx context.Context) error {
		var err error
		switch o.Event {
		case domain.DeliveryEventDeliver:
			won, err = s.db.guarded(ctx, act{"deliver", a.DeliveryID}, deliverDelivery, o.Status, ts(now), ts(now), a.DeliveryID, ts(held))
		case domain.DeliveryEventRetry:
			won, err = s.db.guarded(ctx, act{"retry delivery", a.DeliveryID}, retryDelivery, o.Status, errText, ts(o.Next), ts(now), a.DeliveryID, ts(held))
		case domain.DeliveryEventGiveUp:
			won, err = s.db.guarded(ctx, act{"give up delivery", a.DeliveryID}, giveUpDelivery, o.Status, errText, ts(now), ts(now), a.DeliveryID, ts(held))
		default:
			return fmt.Errorf("record delivery %s: %q is no outcome", a.DeliveryID, o.Event)
		}
		if err != nil || !won {
			return err
		}
		row := notifyAttemptRow{ID: a.ID, DeliveryID: a.DeliveryID, N: a.N, StartedAt: ts(a.StartedAt),
			DurationUS: a.Duration.Microseconds(), Status: a.Status, Error: cleanText(a.Error, 500),
			RequestHead: cleanText(a.RequestHead, maxAttemptText), Response: cleanText(a.Response, maxAttemptText)}
		if err := s.db.create(ctx, &row); err != nil {
			return fmt.Errorf("record attempt %d of delivery %s: %w", a.N, a.DeliveryID, err)
		}
		return nil
	})
	return won && err == nil, err
}

// maxAttemptText bounds what an attempt keeps of its request and answer:
// under MariaDB's TEXT (65,535 bytes).
const maxAttemptText = 60 << 10

// cleanText is s as a column of at most n bytes keeps it: valid UTF-8
// (an endpoint's answer may carry any byte, and MariaDB refuses an
// invalid one, failing the whole record), cut at a rune's start.
func cleanText(s string, n int) string {
	return truncate(strings.ToValidUTF8(s, "\uFFFD"), n)
}

// redeliverEvent is Redeliver's: the event's finished deliveries back to
// pending, due at once, with their count of attempts kept; not those of
// an endpoint deleted since (nothing would send them).
var redeliverEvent = `UPDATE notify_deliveries SET status = ` + deliveryRedeliver.to + `, next_attempt_at = ?, leased_until = NULL,
	delivered_at = NULL, failed_at = NULL, updated_at = ? WHERE event_id = ? AND status IN ` + deliveryRedeliver.from + `
	  AND endpoint_id IN (SELECT id FROM notify_endpoints)`

// Redeliver puts event id's delivered and failed deliveries back to
// pending: each is sent again, with the same webhook-id. It returns how
// many, or domain.ErrNotifyEventNotFound.
func (s *NotifyStore) Redeliver(ctx context.Context, id string, now time.Time) (int64, error) {
	var exists int
	if err := s.db.queryRow(ctx, `SELECT COUNT(*) FROM notify_events WHERE id = ?`, id).Scan(&exists); err != nil {
		return 0, fmt.Errorf("redeliver event %s: %w", id, err)
	}
	if exists == 0 {
		return 0, fmt.Errorf("redeliver event %s: %w", id, domain.ErrNotifyEventNotFound)
	}
	n, err := s.db.exec(ctx, redeliverEvent, ts(now), ts(now), id)
	if err != nil {
		return 0, fmt.Errorf("redeliver event %s: %w", id, err)
	}
	return n, nil
}

// ListDeliveries returns at most limit deliveries to endpointID, newest
// first, of status (every status when empty), each with its attempts.
func (s *NotifyStore) ListDeliveries(ctx context.Context, endpointID string, status domain.DeliveryStatus, limit int) ([]domain.DeliveryLog, error) {
	q := s.db.conn(ctx).Where("endpoint_id = ?", endpointID)
	if status != "" {
		q = q.Where("status = ?", string(status))
	}
	var rows []deliveryRow
	if err := q.Order("created_at DESC, seq DESC, id DESC").Limit(limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list deliveries of endpoint %s: %w", endpointID, err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	ids, events := make([]string, len(rows)), make([]string, len(rows))
	for i, r := range rows {
		ids[i], events[i] = r.ID, r.EventID
	}
	var atts []notifyAttemptRow
	if err := s.db.conn(ctx).Where("delivery_id IN ?", ids).Order("delivery_id, n").Find(&atts).Error; err != nil {
		return nil, fmt.Errorf("list attempts: %w", err)
	}
	var types []struct{ ID, Type string }
	if err := s.db.conn(ctx).Raw(`SELECT id, type FROM notify_events WHERE id IN ?`, events).Scan(&types).Error; err != nil {
		return nil, fmt.Errorf("list event types: %w", err)
	}
	typeOf := map[string]domain.NotifyType{}
	for _, t := range types {
		typeOf[t.ID] = domain.NotifyType(t.Type)
	}
	out := make([]domain.DeliveryLog, len(rows))
	for i, r := range rows {
		out[i] = domain.DeliveryLog{Delivery: r.toDomain(), Type: typeOf[r.EventID]}
		for _, a := range atts {
			if a.DeliveryID == r.ID {
				out[i].Attempts = append(out[i].Attempts, a.toDomain())
			}
		}
	}
	return out, nil
}

// NotifyBacklog is what is left to tell the shop, over the whole database.
type NotifyBacklog struct {
	Pending       int64     // events not fanned out, and pending deliveries to enabled endpoints
	OldestPending time.Time // created_at of the oldest such event; zero when none
	// Held is the pending deliveries to disabled endpoints: an operator
	// paused them (a 410 fails them instead), and they go when the
	// endpoint is enabled again. Apart from Pending, whose age an alert
	// watches: a paused endpoint is not delivery falling behind.
	Held int64
}

// notifyBacklogQuery counts by notify_events_fanout and
// notify_deliveries_due: the few rows not yet told.
var notifyBacklogQuery = `SELECT
	(SELECT COUNT(*) FROM notify_events WHERE fanned_out = 0),
	(SELECT MIN(created_at) FROM notify_events WHERE fanned_out = 0),
	(SELECT COUNT(*) FROM notify_deliveries d JOIN notify_endpoints n ON n.id = d.endpoint_id
	  WHERE d.status = ` + deliveryPending + ` AND n.status = ` + sqlStatus(domain.EndpointEnabled) + `),
	(SELECT MIN(e.created_at) FROM notify_deliveries d JOIN notify_endpoints n ON n.id = d.endpoint_id JOIN notify_events e ON e.id = d.event_id
	  WHERE d.status = ` + deliveryPending + ` AND n.status = ` + sqlStatus(domain.EndpointEnabled) + `),
	(SELECT COUNT(*) FROM notify_deliveries d JOIN notify_endpoints n ON n.id = d.endpoint_id
	  WHERE d.status = ` + deliveryPending + ` AND n.status = ` + sqlStatus(domain.EndpointDisabled) + `)`

// ReadNotifyBacklog reads the notify backlog (the metrics' gauges).
func ReadNotifyBacklog(ctx context.Context, db *DB) (NotifyBacklog, error) {
	var (
		unfanned, pending, held int64
		o1, o2                  *utcTime
	)
	if err := db.queryRow(ctx, notifyBacklogQuery).Scan(&unfanned, &o1, &pending, &o2, &held); err != nil {
		return NotifyBacklog{}, fmt.Errorf("read notify backlog: %w", err)
	}
	b := NotifyBacklog{Pending: unfanned + pending, Held: held}
	for _, o := range []*utcTime{o1, o2} {
		if o != nil && (b.OldestPending.IsZero() || o.time().Before(b.OldestPending)) {
			b.OldestPending = o.time()
		}
	}
	return b, nil
}

// endpointPendingQuery counts every endpoint's pending deliveries, with
// their oldest event, by notify_deliveries_due: the few rows not yet told.
var endpointPendingQuery = `SELECT d.endpoint_id, COUNT(*), MIN(e.created_at)
	FROM notify_deliveries d JOIN notify_events e ON e.id = d.event_id
	WHERE d.status = ` + deliveryPending + ` GROUP BY d.endpoint_id`

// endpointFailedQuery counts every endpoint's deliveries given up, by
// notify_deliveries_finished (retention deletes them in time).
var endpointFailedQuery = `SELECT endpoint_id, COUNT(*) FROM notify_deliveries
	WHERE status = ` + sqlStatus(domain.DeliveryFailed) + ` GROUP BY endpoint_id`

// lastAttemptQuery is one endpoint's last attempt: the newest recorded
// attempt of its last delivery with one, by notify_deliveries_endpoint_updated
// and notify_attempts_delivery_n. A claim counts its attempt before the
// request goes out and records it after the answer: a delivery whose first
// attempt is in flight (or whose claimer died) has no row yet and is passed
// over, so a failing endpoint does not read as never tried meanwhile.
const lastAttemptQuery = `SELECT a.started_at, a.status, a.error FROM notify_attempts a
	WHERE a.delivery_id = (SELECT d.id FROM notify_deliveries d WHERE d.endpoint_id = ? AND d.attempts > 0
		AND EXISTS (SELECT 1 FROM notify_attempts r WHERE r.delivery_id = d.id)
		ORDER BY d.updated_at DESC LIMIT 1)
	ORDER BY a.n DESC LIMIT 1`

// EndpointHealth is how deliveries go to each of the endpoints ids, for
// the operators' list: pending (and the oldest), given up, and the last
// attempt. An endpoint with nothing to say has the zero EndpointHealth.
func (s *NotifyStore) EndpointHealth(ctx context.Context, ids []string) (map[string]domain.EndpointHealth, error) {
	out := make(map[string]domain.EndpointHealth, len(ids))
	rows, err := s.db.query(ctx, endpointPendingQuery)
	if err != nil {
		return nil, fmt.Errorf("endpoint health: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int64
		var oldest *utcTime
		if err := rows.Scan(&id, &n, &oldest); err != nil {
			return nil, fmt.Errorf("endpoint health: %w", err)
		}
		h := out[id]
		h.Pending, h.OldestPending = n, timePtr(oldest)
		out[id] = h
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("endpoint health: %w", err)
	}
	failed, err := s.db.query(ctx, endpointFailedQuery)
	if err != nil {
		return nil, fmt.Errorf("endpoint health: %w", err)
	}
	defer failed.Close()
	for failed.Next() {
		var id string
		var n int64
		if err := failed.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("endpoint health: %w", err)
		}
		h := out[id]
		h.Failed = n
		out[id] = h
	}
	if err := failed.Err(); err != nil {
		return nil, fmt.Errorf("endpoint health: %w", err)
	}
	for _, id := range ids {
		var at utcTime
		var status int
		var why string
		err := s.db.queryRow(ctx, lastAttemptQuery, id).Scan(&at, &status, &why)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("endpoint %s's last attempt: %w", id, err)
		}
		h := out[id]
		h.LastAttemptAt, h.LastStatus, h.LastError = timePtr(&at), status, why
		out[id] = h
	}
	return out, nil
}
