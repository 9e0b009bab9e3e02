-- +goose Up
-- Confirmed money apart from reservations (ADR 0055). refunded_minor is
-- from now on only what the provider confirmed given back;
-- refund_reserved_minor is what payd's refunds in flight reserved. Until
-- now a reservation was added to refunded_minor, so an order with a
-- refund in flight read as refunded before the provider had said so.
ALTER TABLE orders ADD COLUMN refund_reserved_minor INTEGER NOT NULL DEFAULT 0
    CONSTRAINT orders_refund_reserved CHECK (refund_reserved_minor >= 0);

-- The reservations of the refunds still in flight move to their column;
-- an order that read refunded only by them is paid again (SQLite's SET
-- reads the old row throughout).
UPDATE orders SET refund_reserved_minor = (
    SELECT COALESCE(SUM(r.amount_minor), 0) FROM refunds r
    WHERE r.order_id = orders.id AND r.kind = 'manual' AND r.status = 'pending');
UPDATE orders
    SET status = CASE WHEN status = 'refunded' AND refunded_minor - refund_reserved_minor < amount_minor THEN 'paid' ELSE status END,
        refunded_minor = MAX(refunded_minor - refund_reserved_minor, 0)
    WHERE refund_reserved_minor > 0;

-- A refund the provider took back after confirming it, and the reports
-- of books repaired and of disputes larger than what was left: three
-- CHECKs grow, and SQLite builds each table again to change one (as
-- 00015 and 00016 did), its rows copied and its indexes made again.
CREATE TABLE ledger_entries_new (
    id            TEXT    NOT NULL PRIMARY KEY,
    order_id      TEXT    NOT NULL,
    kind          TEXT    NOT NULL CHECK (kind IN ('charge', 'refund', 'outside_refund', 'dispute_opened', 'dispute_won', 'dispute_lost', 'refund_reversed')),
    reference     TEXT    NOT NULL,
    charge_id     TEXT    NOT NULL,
    currency      TEXT    NOT NULL,
    amount_minor  INTEGER NOT NULL CHECK (amount_minor > 0),
    source        TEXT    NOT NULL CHECK (source IN ('pay_reply', 'webhook', 'recoverer', 'reconciliation', 'operator')),
    actor         TEXT    NOT NULL DEFAULT '',
    note          TEXT    NOT NULL DEFAULT '',
    created_at    TEXT    NOT NULL
);

INSERT INTO ledger_entries_new (id, order_id, kind, reference, charge_id, currency, amount_minor, source, actor, note, created_at)
    SELECT id, order_id, kind, reference, charge_id, currency, amount_minor, source, actor, note, created_at FROM ledger_entries;

DROP TABLE ledger_entries;
ALTER TABLE ledger_entries_new RENAME TO ledger_entries;

CREATE UNIQUE INDEX ledger_entries_reference ON ledger_entries (reference);
CREATE INDEX ledger_entries_order ON ledger_entries (order_id, created_at);
CREATE INDEX ledger_entries_created ON ledger_entries (created_at);

CREATE TABLE discrepancies_new (
    id                     TEXT    NOT NULL PRIMARY KEY,
    run_id                 TEXT    NULL,
    type                   TEXT    NOT NULL,
    reference              TEXT    NOT NULL,
    order_id               TEXT    NULL,
    attempt_id             TEXT    NULL,
    charge_id              TEXT    NULL,
    currency               TEXT    NULL,
    provider_amount_minor  INTEGER NULL,
    local_amount_minor     INTEGER NULL,
    status                 TEXT    NOT NULL,
    resolution             TEXT    NULL,
    note                   TEXT    NULL,
    detected_at            TEXT    NOT NULL,
    resolved_at            TEXT    NULL,
    CONSTRAINT discrepancies_status CHECK (status IN ('open', 'resolving', 'resolved')),
    CONSTRAINT discrepancies_type CHECK (type IN ('missing_local_payment', 'missing_provider_charge', 'amount_mismatch', 'duplicate_charge', 'stuck_processing', 'paid_after_close', 'disputed', 'refund_missing_locally', 'refund_missing_at_provider', 'refund_amount_mismatch', 'unconfirmed_payment', 'refund_reversed', 'order_books_repaired', 'dispute_exceeds_remaining'))
);

INSERT INTO discrepancies_new (id, run_id, type, reference, order_id, attempt_id, charge_id, currency, provider_amount_minor, local_amount_minor, status, resolution, note, detected_at, resolved_at)
    SELECT id, run_id, type, reference, order_id, attempt_id, charge_id, currency, provider_amount_minor, local_amount_minor, status, resolution, note, detected_at, resolved_at FROM discrepancies;

DROP TABLE discrepancies;
ALTER TABLE discrepancies_new RENAME TO discrepancies;

CREATE INDEX discrepancies_order ON discrepancies (order_id);
CREATE INDEX discrepancies_run ON discrepancies (run_id);
CREATE INDEX discrepancies_status ON discrepancies (status, detected_at);
CREATE INDEX discrepancies_status_id ON discrepancies (status, id);
CREATE INDEX discrepancies_type_id ON discrepancies (type, id);
CREATE UNIQUE INDEX discrepancies_type_reference ON discrepancies (type, reference);

CREATE TABLE notify_events_new (
    id                      TEXT     NOT NULL PRIMARY KEY,
    order_id                TEXT     NOT NULL,
    seq                     INTEGER  NOT NULL,
    type                    TEXT     NOT NULL,
    cause                   TEXT     NOT NULL,
    cause_ref               TEXT     NOT NULL DEFAULT '',
    order_status            TEXT     NOT NULL,
    pay_request_id          TEXT     NULL,
    paid_at                 TEXT     NULL,
    refunded_minor          INTEGER  NOT NULL,
    order_updated_at        TEXT     NOT NULL,
    charged_minor           INTEGER  NOT NULL,
    books_refunded_minor    INTEGER  NOT NULL,
    disputed_minor          INTEGER  NOT NULL,
    lost_minor              INTEGER  NOT NULL,
    body                    BLOB     NULL,
    fanned_out              INTEGER  NOT NULL DEFAULT 0,
    created_at              TEXT     NOT NULL,
    CONSTRAINT notify_events_type CHECK (type IN ('order.paid', 'order.payment_failed', 'order.cancelled', 'order.expired', 'order.refunded', 'order.disputed', 'order.dispute_closed', 'order.refund_reversed')),
    CONSTRAINT notify_events_cause CHECK (cause IN ('pay_request', 'webhook', 'operator', 'recoverer', 'expiry', 'reconciliation', 'customer'))
);

INSERT INTO notify_events_new (id, order_id, seq, type, cause, cause_ref, order_status, pay_request_id, paid_at, refunded_minor, order_updated_at, charged_minor, books_refunded_minor, disputed_minor, lost_minor, body, fanned_out, created_at)
    SELECT id, order_id, seq, type, cause, cause_ref, order_status, pay_request_id, paid_at, refunded_minor, order_updated_at, charged_minor, books_refunded_minor, disputed_minor, lost_minor, body, fanned_out, created_at FROM notify_events;

DROP TABLE notify_events;
ALTER TABLE notify_events_new RENAME TO notify_events;

CREATE UNIQUE INDEX notify_events_order_seq ON notify_events (order_id, seq);
CREATE INDEX notify_events_fanout ON notify_events (fanned_out, created_at);
CREATE INDEX notify_events_created ON notify_events (created_at);

-- +goose Down
-- The reservations go back into refunded_minor, as before; the wider
-- CHECKs stay (narrowing one is building its table again, and a row of a
-- new kind would make it fail).
UPDATE orders
    SET status = CASE WHEN status = 'paid' AND refunded_minor + refund_reserved_minor >= amount_minor THEN 'refunded' ELSE status END,
        refunded_minor = MIN(refunded_minor + refund_reserved_minor, amount_minor);
ALTER TABLE orders DROP COLUMN refund_reserved_minor;
