-- +goose Up
-- Money is stored as integer minor units (cents): SQLite would turn a
-- DECIMAL column into a float. Timestamps are fixed-width UTC text
-- ('2006-01-02 15:04:05.000000'), so comparing them as text is comparing
-- them in time.
CREATE TABLE customers (
    id          TEXT    NOT NULL PRIMARY KEY,
    email       TEXT    NOT NULL UNIQUE,
    name        TEXT    NOT NULL,
    token_hash  TEXT    NOT NULL UNIQUE,
    -- the idempotency key of the registration, so a repeated registration
    -- resolves to this customer even after its idempotency record expired
    request_id  TEXT    NULL,
    created_at  TEXT    NOT NULL
);

CREATE TABLE orders (
    id              TEXT    NOT NULL PRIMARY KEY,
    customer_id     TEXT    NOT NULL REFERENCES customers (id),
    status          TEXT    NOT NULL,
    currency        TEXT    NOT NULL,
    amount_minor    INTEGER NOT NULL,
    refunded_minor  INTEGER NOT NULL DEFAULT 0,
    pay_request_id  TEXT    NULL,
    version         INTEGER NOT NULL DEFAULT 1,
    paid_at         TEXT    NULL,
    expires_at      TEXT    NOT NULL,
    created_at      TEXT    NOT NULL,
    updated_at      TEXT    NOT NULL
);
CREATE INDEX orders_customer ON orders (customer_id, id);
CREATE INDEX orders_status_expires ON orders (status, expires_at);
CREATE INDEX orders_status_id ON orders (status, id);

CREATE TABLE order_items (
    order_id          TEXT    NOT NULL REFERENCES orders (id) ON DELETE CASCADE,
    position          INTEGER NOT NULL,
    sku               TEXT    NOT NULL,
    name              TEXT    NOT NULL,
    quantity          INTEGER NOT NULL,
    unit_price_minor  INTEGER NOT NULL,
    PRIMARY KEY (order_id, position)
);

CREATE TABLE payment_attempts (
    id                  TEXT    NOT NULL PRIMARY KEY,
    order_id            TEXT    NOT NULL REFERENCES orders (id),
    request_id          TEXT    NOT NULL,
    status              TEXT    NOT NULL,
    payment_method      TEXT    NOT NULL,
    provider_charge_id  TEXT    NULL,
    failure_code        TEXT    NULL,
    currency            TEXT    NOT NULL,
    amount_minor        INTEGER NOT NULL,
    created_at          TEXT    NOT NULL,
    updated_at          TEXT    NOT NULL
);
CREATE INDEX payment_attempts_order ON payment_attempts (order_id, created_at);
CREATE INDEX payment_attempts_status ON payment_attempts (status, updated_at);

-- The idempotency record: inserting it is the lock (primary key on scope and
-- key), its lease is locked_until, and its stored response is replayed.
CREATE TABLE idempotency_records (
    scope            TEXT    NOT NULL,
    idem_key         TEXT    NOT NULL,
    method           TEXT    NOT NULL,
    path             TEXT    NOT NULL,
    fingerprint      TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    response_status  INTEGER NOT NULL DEFAULT 0,
    response_body    BLOB    NULL,
    response_sealed  INTEGER NOT NULL DEFAULT 0,
    order_id         TEXT    NULL,
    locked_until     TEXT    NOT NULL,
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL,
    expires_at       TEXT    NOT NULL,
    PRIMARY KEY (scope, idem_key)
);
CREATE INDEX idempotency_records_expires ON idempotency_records (expires_at);
CREATE INDEX idempotency_records_order ON idempotency_records (order_id);

-- +goose Down
DROP TABLE idempotency_records;
DROP TABLE payment_attempts;
DROP TABLE order_items;
DROP TABLE orders;
DROP TABLE customers;
