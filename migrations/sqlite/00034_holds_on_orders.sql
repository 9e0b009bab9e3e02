-- +goose NO TRANSACTION
-- +goose Up
-- Holds on the order (ADR 0060; 00033 made their actions): status
-- authorized, the money held until capture_before; hold_action is the
-- action that owns the hold (claimed by a guarded UPDATE, as a pay claims
-- an order); captured_minor is what a manual order's capture took.
--
-- SQLite cannot change a CHECK in place, and orders has children
-- (order_items, payment_attempts, shipments): orders is built again by
-- SQLite's own procedure for it, with foreign keys off (which only works
-- outside a transaction: hence NO TRANSACTION, and the BEGIN and COMMIT
-- below, so the swap is whole or not at all). The children keep naming
-- "orders", which is the new table once it is renamed. Run again after a
-- kill between its COMMIT and goose's record of it, it builds the tables
-- again from themselves: nothing in it adds to a table in place.
PRAGMA foreign_keys = OFF;
BEGIN IMMEDIATE;
CREATE TABLE orders_new (
    id              TEXT    NOT NULL PRIMARY KEY,
    customer_id     TEXT    NULL REFERENCES customers (id),
    creator         TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    currency        TEXT    NOT NULL,
    amount_minor    INTEGER NOT NULL,
    refunded_minor  INTEGER NOT NULL DEFAULT 0,
    refund_reserved_minor INTEGER NOT NULL DEFAULT 0,
    pay_request_id  TEXT    NULL,
    version         INTEGER NOT NULL DEFAULT 1,
    paid_at         TEXT    NULL,
    expires_at      TEXT    NOT NULL,
    created_at      TEXT    NOT NULL,
    updated_at      TEXT    NOT NULL,
    create_request_id TEXT NULL,
    create_fingerprint TEXT NULL,
    fulfillment_status TEXT NOT NULL DEFAULT 'unfulfilled',
    capture_method  TEXT    NOT NULL DEFAULT 'automatic',
    capture_before  TEXT    NULL,
    captured_minor  INTEGER NOT NULL DEFAULT 0,
    hold_action     TEXT    NULL,
    CONSTRAINT orders_fulfillment_status CHECK (fulfillment_status IN ('unfulfilled', 'partially_shipped', 'shipped')),
    CONSTRAINT orders_refund_reserved CHECK (refund_reserved_minor >= 0),
    CONSTRAINT orders_status CHECK (status IN ('pending', 'processing', 'authorized', 'paid', 'refunded', 'cancelled', 'expired')),
    CONSTRAINT orders_capture_method CHECK (capture_method IN ('automatic', 'manual')),
    CONSTRAINT orders_captured CHECK (captured_minor >= 0 AND captured_minor <= amount_minor)
);
INSERT INTO orders_new (id, customer_id, creator, status, currency, amount_minor, refunded_minor, refund_reserved_minor, pay_request_id,
                        version, paid_at, expires_at, created_at, updated_at, create_request_id, create_fingerprint, fulfillment_status)
    SELECT id, customer_id, creator, status, currency, amount_minor, refunded_minor, refund_reserved_minor, pay_request_id,
           version, paid_at, expires_at, created_at, updated_at, create_request_id, create_fingerprint, fulfillment_status FROM orders;
DROP TABLE orders;
ALTER TABLE orders_new RENAME TO orders;
CREATE UNIQUE INDEX orders_create_request_id ON orders (creator, create_request_id);
CREATE INDEX orders_customer ON orders (customer_id, id);
CREATE INDEX orders_status_expires ON orders (status, expires_at);
CREATE INDEX orders_status_id ON orders (status, id);
CREATE INDEX orders_created ON orders (created_at, id);
CREATE INDEX orders_paid_at ON orders (paid_at, id);
-- The job's work: authorized orders by when their hold lapses.
CREATE INDEX orders_hold ON orders (status, capture_before);

-- The ledger records a hold (hold) and its end (hold_released), and the
-- merchant is told of an authorization (order.authorized): two CHECKs
-- grow, their tables built again as 00020 and 00032 did. An event keeps
-- the hold as the change left it (captured_minor, capture_before, and the
-- ledger's authorized_minor), as it keeps the rest of the order's moving
-- columns.
CREATE TABLE ledger_entries_new (
    id            TEXT    NOT NULL PRIMARY KEY,
    order_id      TEXT    NOT NULL,
    kind          TEXT    NOT NULL CHECK (kind IN ('charge', 'refund', 'outside_refund', 'dispute_opened', 'dispute_won', 'dispute_lost', 'refund_reversed', 'hold', 'hold_released')),
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
CREATE INDEX ledger_entries_order ON ledger_entries (order_id, created_at, currency, kind, amount_minor);
CREATE INDEX ledger_entries_created ON ledger_entries (created_at, kind, currency, amount_minor);

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
    fulfillment_status      TEXT     NOT NULL DEFAULT 'unfulfilled',
    shipment_id             TEXT     NULL,
    captured_minor          INTEGER  NOT NULL DEFAULT 0,
    capture_before          TEXT     NULL,
    authorized_minor        INTEGER  NOT NULL DEFAULT 0,
    CONSTRAINT notify_events_type CHECK (type IN ('order.paid', 'order.payment_failed', 'order.cancelled', 'order.expired', 'order.refunded', 'order.disputed', 'order.dispute_closed', 'order.refund_reversed', 'order.shipped', 'order.authorized')),
    CONSTRAINT notify_events_cause CHECK (cause IN ('pay_request', 'webhook', 'operator', 'recoverer', 'expiry', 'reconciliation', 'customer', 'merchant'))
);
INSERT INTO notify_events_new (id, order_id, seq, type, cause, cause_ref, order_status, pay_request_id, paid_at, refunded_minor, order_updated_at, charged_minor,
                               books_refunded_minor, disputed_minor, lost_minor, body, fanned_out, created_at, fulfillment_status, shipment_id)
    SELECT id, order_id, seq, type, cause, cause_ref, order_status, pay_request_id, paid_at, refunded_minor, order_updated_at, charged_minor,
           books_refunded_minor, disputed_minor, lost_minor, body, fanned_out, created_at, fulfillment_status, shipment_id FROM notify_events;
DROP TABLE notify_events;
ALTER TABLE notify_events_new RENAME TO notify_events;
CREATE UNIQUE INDEX notify_events_order_seq ON notify_events (order_id, seq);
CREATE INDEX notify_events_fanout ON notify_events (fanned_out, created_at);
COMMIT;
PRAGMA foreign_keys = ON;

-- +goose Down
-- The wider ledger and event CHECKs stay (as 00032's did): a row of a new
-- kind or type would make a narrow CHECK fail.
PRAGMA foreign_keys = OFF;
BEGIN IMMEDIATE;
CREATE TABLE orders_old (
    id              TEXT    NOT NULL PRIMARY KEY,
    customer_id     TEXT    NULL REFERENCES customers (id),
    creator         TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    currency        TEXT    NOT NULL,
    amount_minor    INTEGER NOT NULL,
    refunded_minor  INTEGER NOT NULL DEFAULT 0,
    refund_reserved_minor INTEGER NOT NULL DEFAULT 0,
    pay_request_id  TEXT    NULL,
    version         INTEGER NOT NULL DEFAULT 1,
    paid_at         TEXT    NULL,
    expires_at      TEXT    NOT NULL,
    created_at      TEXT    NOT NULL,
    updated_at      TEXT    NOT NULL,
    create_request_id TEXT NULL,
    create_fingerprint TEXT NULL,
    fulfillment_status TEXT NOT NULL DEFAULT 'unfulfilled',
    CONSTRAINT orders_fulfillment_status CHECK (fulfillment_status IN ('unfulfilled', 'partially_shipped', 'shipped')),
    CONSTRAINT orders_refund_reserved CHECK (refund_reserved_minor >= 0),
    CONSTRAINT orders_status CHECK (status IN ('pending', 'processing', 'paid', 'refunded', 'cancelled', 'expired'))
);
-- An order held or captured by hand has no status the older payd knows:
-- it cannot go down (the INSERT fails on the CHECK) until it is settled.
INSERT INTO orders_old (id, customer_id, creator, status, currency, amount_minor, refunded_minor, refund_reserved_minor, pay_request_id,
                        version, paid_at, expires_at, created_at, updated_at, create_request_id, create_fingerprint, fulfillment_status)
    SELECT id, customer_id, creator, status, currency, amount_minor, refunded_minor, refund_reserved_minor, pay_request_id,
           version, paid_at, expires_at, created_at, updated_at, create_request_id, create_fingerprint, fulfillment_status FROM orders;
DROP TABLE orders;
ALTER TABLE orders_old RENAME TO orders;
CREATE UNIQUE INDEX orders_create_request_id ON orders (creator, create_request_id);
CREATE INDEX orders_customer ON orders (customer_id, id);
CREATE INDEX orders_status_expires ON orders (status, expires_at);
CREATE INDEX orders_status_id ON orders (status, id);
CREATE INDEX orders_created ON orders (created_at, id);
CREATE INDEX orders_paid_at ON orders (paid_at, id);
COMMIT;
PRAGMA foreign_keys = ON;
