-- +goose Up
-- The sandbox provider's own store: it lives in its own database, as a real
-- provider's would, so payd crashing (or the sandbox restarting) never makes
-- it forget a charge, a refund or a webhook it still owes. Money is integer
-- minor units (SQLite would turn DECIMAL into a float). Timestamps are
-- fixed-width UTC text ('2006-01-02 15:04:05.000000'), so comparing them as
-- text is comparing them in time.
CREATE TABLE sandbox_charges (
    id               TEXT    NOT NULL PRIMARY KEY,
    -- One charge per idempotency key: the unique index, not a read-then-write,
    -- is what stops concurrent identical requests from charging twice.
    idempotency_key  TEXT    NOT NULL UNIQUE,
    order_id         TEXT    NOT NULL,
    payment_method   TEXT    NOT NULL,
    currency         TEXT    NOT NULL,
    amount_minor     INTEGER NOT NULL,
    refunded_minor   INTEGER NOT NULL DEFAULT 0,
    status           TEXT    NOT NULL,
    failure_code     TEXT    NOT NULL DEFAULT '',
    -- settle_at is when a pending (asynchronous) charge resolves.
    settle_at        TEXT    NULL,
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL
);
CREATE INDEX sandbox_charges_created ON sandbox_charges (created_at);
CREATE INDEX sandbox_charges_settle ON sandbox_charges (status, settle_at);

CREATE TABLE sandbox_refunds (
    id               TEXT    NOT NULL PRIMARY KEY,
    idempotency_key  TEXT    NOT NULL UNIQUE,
    charge_id        TEXT    NOT NULL REFERENCES sandbox_charges (id),
    currency         TEXT    NOT NULL,
    amount_minor     INTEGER NOT NULL,
    reason           TEXT    NOT NULL DEFAULT '',
    status           TEXT    NOT NULL,
    created_at       TEXT    NOT NULL
);
CREATE INDEX sandbox_refunds_charge ON sandbox_refunds (charge_id);
CREATE INDEX sandbox_refunds_created ON sandbox_refunds (created_at);

-- The webhook outbox: one row per delivery copy of an event (several copies
-- share event_id when duplicates are configured). A worker claims a due row
-- with a guarded UPDATE of claimed_until before sending, so two sandbox
-- processes on one database never send the same copy at once.
CREATE TABLE sandbox_webhook_deliveries (
    id               TEXT    NOT NULL PRIMARY KEY,
    event_id         TEXT    NOT NULL,
    copy_no          INTEGER NOT NULL,
    event_type       TEXT    NOT NULL,
    payload          TEXT    NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  TEXT    NOT NULL,
    claimed_until    TEXT    NULL,
    delivered_at     TEXT    NULL,
    last_status      INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT    NOT NULL DEFAULT '',
    created_at       TEXT    NOT NULL,
    UNIQUE (event_id, copy_no)
);
CREATE INDEX sandbox_webhook_deliveries_due ON sandbox_webhook_deliveries (delivered_at, next_attempt_at);

-- +goose Down
DROP TABLE sandbox_webhook_deliveries;
DROP TABLE sandbox_refunds;
DROP TABLE sandbox_charges;
