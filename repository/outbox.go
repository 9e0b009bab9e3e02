package repository

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
)

// The outbox's writing side (docs/adr/0053-telling-the-shop.md): every
// committed change of an order a merchant is told of writes one row of
// notify_events in the change's own transaction, right after the
// statement that changed the order. The row is an INSERT ... SELECT from
// the order's row, so it records the version the change left (its seq:
// (order_id, seq) is unique) and the order as the transaction sees it:
// status, payment, refunded amount, and the ledger's sums as
// domain.Summarize adds them (entries of the order's currency only). The
// one exception is the pay of an order's first claim, whose event is
// known whole and written with its values (firstPaidEvent, ADR 0067).

// The ledger's sums of order o, by domain.Summarize's rules, over its
// entries l of the order's currency (a LEFT JOIN grouped by the order's
// row): charged is every charge; refunded every refund, payd's and
// outside ones, less those reversed; disputed what disputes still open
// withdrew (opened less won and lost); lost what disputes took for good.
var (
	ledgerSum = func(cases string) string {
		return `COALESCE(SUM(CASE ` + cases + ` ELSE 0 END), 0)`
	}
	chargedSum  = ledgerSum(`WHEN l.kind IN ` + kindList(domain.LedgerCharge) + ` THEN l.amount_minor`)
	refundedSum = ledgerSum(`WHEN l.kind IN ` + kindList(domain.LedgerRefund, domain.LedgerOutsideRefund) + ` THEN l.amount_minor
		WHEN l.kind = '` + string(domain.LedgerRefundReversed) + `' THEN -l.amount_minor`)
	disputedSum = ledgerSum(`WHEN l.kind = '` + string(domain.LedgerDisputeOpened) + `' THEN l.amount_minor
		WHEN l.kind IN ` + kindList(domain.LedgerDisputeWon, domain.LedgerDisputeLost) + ` THEN -l.amount_minor`)
	lostSum       = ledgerSum(`WHEN l.kind = '` + string(domain.LedgerDisputeLost) + `' THEN l.amount_minor`)
	authorizedSum = ledgerSum(`WHEN l.kind = '` + string(domain.LedgerHold) + `' THEN l.amount_minor
		WHEN l.kind = '` + string(domain.LedgerHoldReleased) + `' THEN -l.amount_minor`)
)

// kindList renders ledger kinds as an SQL list: ('a', 'b').
func kindList(kinds ...domain.LedgerKind) string {
	out := "("
	for i, k := range kinds {
		if i > 0 {
			out += ", "
		}
		out += "'" + string(k) + "'"
	}
	return out + ")"
}

var (
	// insertEvent writes the event of the change the transaction just
	// made to order o: its arguments are the event's id, type, cause,
	// cause's reference, created_at, and the order's id. One read of the
	// order's entries, not a subquery per sum: every new pay writes an
	// event, and four subqueries doubled its cost (docs/performance.md).
	// The GROUP BY names every column of o it reads, so that servers
	// with ONLY_FULL_GROUP_BY take it; o.id is the key, so it groups the
	// one row.
	insertEvent = eventSelect + eventGroup

	eventSelect = eventSelectOf("", "")
	eventGroup  = ` GROUP BY o.id, o.version, o.status, o.pay_request_id, o.paid_at, o.refunded_minor, o.updated_at, o.fulfillment_status,
		o.captured_minor, o.capture_before`

	// insertShippedEvent is insertEvent for order.shipped, which names its
	// shipment: its arguments are insertEvent's with the shipment's ID
	// after created_at.
	insertShippedEvent = eventSelectOf(", shipment_id", ", ?") + eventGroup

	// insertEventIfChanged is insertEvent in a MySQL packet, after the
	// statement that changed the order (PayBatch, DB.batch).
	insertEventIfChanged = eventSelect + ` AND ROW_COUNT() = 1` + eventGroup

	// insertPaidEvent writes the event firstPaidEvent knows whole: no
	// read of the order or its ledger, which cost a new pay about a
	// quarter of its database time (docs/performance.md).
	insertPaidEvent = `INSERT INTO notify_events (id, order_id, seq, type, cause, cause_ref, order_status, pay_request_id,
		paid_at, refunded_minor, order_updated_at, charged_minor, books_refunded_minor, disputed_minor, lost_minor, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

	// insertPaidEventIfPaid is insertPaidEvent in PayBatch's packet,
	// after the statement that paid the order.
	insertPaidEventIfPaid = `INSERT INTO notify_events (id, order_id, seq, type, cause, cause_ref, order_status, pay_request_id,
		paid_at, refunded_minor, order_updated_at, charged_minor, books_refunded_minor, disputed_minor, lost_minor, created_at)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM DUAL WHERE ROW_COUNT() = 1`

	// restampEvent brings the event the transaction wrote for order ?
	// up to the order after one more change in the same transaction (a
	// refund counted as the order is paid, countOutside): its seq and the
	// order's columns that change can move. The ledger's sums cannot: the
	// change books nothing.
	restampEvent = `UPDATE notify_events SET seq = seq + 1,
		order_status = (SELECT o.status FROM orders o WHERE o.id = notify_events.order_id),
		refunded_minor = (SELECT o.refunded_minor FROM orders o WHERE o.id = notify_events.order_id),
		order_updated_at = (SELECT o.updated_at FROM orders o WHERE o.id = notify_events.order_id)
		WHERE order_id = ? AND fanned_out = FALSE AND seq = (SELECT o.version - 1 FROM orders o WHERE o.id = ?)`
)

// eventSelectOf is insertEvent's INSERT ... SELECT with more columns
// (", shipment_id") and their values (", ?"), bound after created_at.
func eventSelectOf(columns, values string) string {
	return `INSERT INTO notify_events (id, order_id, seq, type, cause, cause_ref, order_status, pay_request_id,
		paid_at, refunded_minor, order_updated_at, fulfillment_status, captured_minor, capture_before, authorized_minor,
		charged_minor, books_refunded_minor, disputed_minor, lost_minor, created_at` + columns + `)
		SELECT ?, o.id, o.version, ?, ?, ?, o.status, o.pay_request_id, o.paid_at, o.refunded_minor, o.updated_at, o.fulfillment_status,
		o.captured_minor, o.capture_before, ` + authorizedSum + `, ` + chargedSum + `, ` + refundedSum + `, ` + disputedSum + `, ` + lostSum + `, ?` + values + `
		FROM orders o LEFT JOIN ledger_entries l ON l.order_id = o.id AND l.currency = o.currency
		WHERE o.id = ?`
}

// maxCauseRef bounds a cause's reference to its column.
const maxCauseRef = 255

// eventStatement is the statement that writes order id's event of type
// t, caused by c, at now. An unknown type or cause is refused (the
// table's CHECKs hold the same sets).
func eventStatement(id string, t domain.NotifyType, c domain.Cause, now time.Time) (statement, error) {
	eventID, ref, err := eventKeys(t, c)
	if err != nil {
		return statement{}, err
	}
	return statement{insertEvent, insertEventIfChanged, []any{eventID, string(t), string(c.Kind), ref, ts(now), id}}, nil
}

// eventKeys checks an event's type and cause, and returns the event's new
// ID and its cause's reference as its column takes it.
func eventKeys(t domain.NotifyType, c domain.Cause) (id, ref string, err error) {
	if !t.Valid() {
		return "", "", fmt.Errorf("unknown event type %q", t)
	}
	if !c.Kind.Valid() {
		return "", "", fmt.Errorf("unknown cause %q of %s", c.Kind, t)
	}
	ref = strings.ToValidUTF8(c.Ref, "")
	if len(ref) > maxCauseRef {
		ref = ref[:maxCauseRef]
		for !utf8.ValidString(ref) {
			ref = ref[:len(ref)-1] // a rune the cut split
		}
	}
	return uuid.Must(uuid.NewV7()).String(), ref, nil
}

// firstPayment reports whether a pay of a's order at version, booking
// entry, settles the order's first claim: the order is to be paid at
// domain.CreatedVersion+1, and entry is a charge in the attempt's (the
// order's) currency. Its event is then known whole (firstPaidEvent).
func firstPayment(a domain.Attempt, entry ledgerRow, version int64) bool {
	return version == domain.CreatedVersion+1 && entry.Kind == string(domain.LedgerCharge) && entry.Currency == string(a.Currency)
}

// firstPaidEvent is the order.paid event of a pay that settles the first
// claim of its order (firstPayment), its every value known without
// reading the order or its ledger (ADR 0067): the order leaves the packet
// paid by a at now, one version on; it has no refund; and its ledger holds
// the one charge the packet books, entry. Nothing but the claim has
// changed the order since it was created: a booking about an order raises
// its version in its transaction (OrderStore.Lock, Tell) unless it pays
// the order or the order can no longer be paid by this claim, and the
// claim made the order's only attempt. The packet's guard on the version
// (markPaidAt) holds all of it to the row.
func firstPaidEvent(a domain.Attempt, entry ledgerRow, version int64, c domain.Cause, now time.Time) (statement, error) {
	eventID, ref, err := eventKeys(domain.NotifyOrderPaid, c)
	if err != nil {
		return statement{}, err
	}
	return statement{insertPaidEvent, insertPaidEventIfPaid, []any{
		eventID, a.OrderID, version + 1, string(domain.NotifyOrderPaid), string(c.Kind), ref,
		string(domain.StatusPaid), a.RequestID, ts(now), 0, ts(now),
		entry.AmountMinor, 0, 0, 0, ts(now),
	}}, nil
}

// transition runs the guarded statement query, which moves order id, and
// when it matched the order's row writes the change's event of type t,
// caused by c, in the same transaction: in the caller's, one after the
// other, or else as one batch (one round trip on MySQL). It reports
// whether the statement matched; a statement that matched nothing writes
// no event.
func (s *OrderStore) transition(ctx context.Context, what act, t domain.NotifyType, c domain.Cause, now time.Time, query string, args ...any) (bool, error) {
	ev, err := eventStatement(what.row, t, c, now)
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	if inTx(ctx, s.db) {
		ok, err := s.db.guarded(ctx, what, query, args...)
		if err != nil || !ok {
			return false, err
		}
		return true, s.db.writeEvent(ctx, what, ev)
	}
	matched, err := s.db.batch(ctx, statement{query: query, args: args}, ev)
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	if matched == 1 {
		// The order's row was just matched: the INSERT ... SELECT of it
		// writes its row or fails.
		return false, fmt.Errorf("%s: the order moved but its event was not written", what)
	}
	return matched == 2, nil
}

// writeEvent runs ev in the caller's transaction; it must write one row.
func (db *DB) writeEvent(ctx context.Context, what act, ev statement) error {
	n, err := db.exec(ctx, ev.query, ev.args...)
	if err != nil {
		return fmt.Errorf("%s: write its event: %w", what, err)
	}
	if n != 1 {
		return fmt.Errorf("%s: its event wrote %d rows, want 1", what, n)
	}
	return nil
}

// Tell writes the event of type t, caused by c, of a change of order id
// that moved no status of it (money booked in its ledger: a refund, a
// dispute's step): it takes the order's lock first (Lock's statement),
// which raises its version, so the event has a seq of its own and the
// order's lock for the rest of the transaction (ADR 0030). In a caller's
// transaction it runs in it, else the two run as one batch.
// domain.ErrOrderNotFound when there is no such order.
func (s *OrderStore) Tell(ctx context.Context, id string, t domain.NotifyType, c domain.Cause, now time.Time) error {
	what := act{"tell " + string(t) + " of order", id}
	ev, err := eventStatement(id, t, c, now)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var matched int
	if inTx(ctx, s.db) {
		n, err := s.db.exec(ctx, lockOrder, id)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if n != 1 {
			return domain.ErrOrderNotFound
		}
		return s.db.writeEvent(ctx, what, ev)
	}
	if matched, err = s.db.batch(ctx, statement{query: lockOrder, args: []any{id}}, ev); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	switch matched {
	case 0:
		return domain.ErrOrderNotFound
	case 1:
		return fmt.Errorf("%s: the order was locked but its event was not written", what)
	}
	return nil
}

// errNoEventToRestamp: Restamp found no event of this transaction's to
// bring up to date.
var errNoEventToRestamp = errors.New("no event of the order's previous version, written by this transaction, to restamp")

// Restamp brings the event this transaction wrote for order id, one
// change ago, up to the order as it now stands: a transaction that paid
// the order (MarkPaid, which wrote order.paid) and then counted refunds
// into it (AddRefund, which raised the version once more) tells one
// change, the order as both left it. It runs only in a caller's
// transaction.
func (s *OrderStore) Restamp(ctx context.Context, id string) error {
	if !inTx(ctx, s.db) {
		return fmt.Errorf("restamp event of order %s: only inside the transaction that wrote it", id)
	}
	n, err := s.db.exec(ctx, restampEvent, id, id)
	if err != nil {
		return fmt.Errorf("restamp event of order %s: %w", id, err)
	}
	if n != 1 {
		return fmt.Errorf("restamp event of order %s: %w", id, errNoEventToRestamp)
	}
	return nil
}

// eventRow is a row of notify_events as the writing side stores it, with
// its order's currency.
type eventRow struct {
	ID                 string   `gorm:"column:id"`
	OrderID            string   `gorm:"column:order_id"`
	Seq                int64    `gorm:"column:seq"`
	Type               string   `gorm:"column:type"`
	Cause              string   `gorm:"column:cause"`
	CauseRef           string   `gorm:"column:cause_ref"`
	OrderStatus        string   `gorm:"column:order_status"`
	PayRequestID       *string  `gorm:"column:pay_request_id"`
	PaidAt             *utcTime `gorm:"column:paid_at"`
	RefundedMinor      int64    `gorm:"column:refunded_minor"`
	OrderUpdatedAt     utcTime  `gorm:"column:order_updated_at"`
	ChargedMinor       int64    `gorm:"column:charged_minor"`
	BooksRefundedMinor int64    `gorm:"column:books_refunded_minor"`
	DisputedMinor      int64    `gorm:"column:disputed_minor"`
	LostMinor          int64    `gorm:"column:lost_minor"`
	FannedOut          bool     `gorm:"column:fanned_out"`
	CreatedAt          utcTime  `gorm:"column:created_at"`
	Currency           string   `gorm:"column:currency"` // the order's
}

// TableName tells GORM the table.
func (eventRow) TableName() string { return "notify_events" }

func (r eventRow) toDomain() domain.OutboxEvent {
	c := domain.Currency(r.Currency)
	m := func(minor int64) decimal.Decimal { return domain.FromMinorUnits(minor, c) }
	e := domain.OutboxEvent{
		NotifyEvent: domain.NotifyEvent{
			ID: r.ID, OrderID: r.OrderID, Seq: r.Seq, Type: domain.NotifyType(r.Type),
			Cause:     domain.Cause{Kind: domain.CauseKind(r.Cause), Ref: r.CauseRef},
			FannedOut: r.FannedOut, CreatedAt: r.CreatedAt.time(),
		},
		Currency: c, OrderStatus: domain.OrderStatus(r.OrderStatus), PaidAt: timePtr(r.PaidAt), Refunded: m(r.RefundedMinor),
		UpdatedAt: r.OrderUpdatedAt.time(),
		Books:     domain.Books{Charged: m(r.ChargedMinor), Refunded: m(r.BooksRefundedMinor), Disputed: m(r.DisputedMinor), Lost: m(r.LostMinor)},
	}
	e.Books.Net = e.Books.Charged.Sub(e.Books.Refunded).Sub(e.Books.Lost)
	if r.PayRequestID != nil {
		e.PayRequestID = *r.PayRequestID
	}
	return e
}

// eventColumns are eventRow's columns, of notify_events e and its order o.
const eventColumns = `e.id, e.order_id, e.seq, e.type, e.cause, e.cause_ref, e.order_status, e.pay_request_id, e.paid_at,
	e.refunded_minor, e.order_updated_at, e.charged_minor, e.books_refunded_minor, e.disputed_minor, e.lost_minor,
	e.fanned_out, e.created_at, o.currency`

// EventsOf returns order id's events with their snapshots, by seq.
func (s *OrderStore) EventsOf(ctx context.Context, id string) ([]domain.OutboxEvent, error) {
	var rows []eventRow
	err := s.db.conn(ctx).Raw(`SELECT `+eventColumns+` FROM notify_events e JOIN orders o ON o.id = e.order_id
		WHERE e.order_id = ? ORDER BY e.seq`, id).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list events of order %s: %w", id, err)
	}
	out := make([]domain.OutboxEvent, len(rows))
	for i, r := range rows {
		out[i] = r.toDomain()
	}
	return out, nil
}
