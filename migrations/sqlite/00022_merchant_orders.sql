-- +goose Up
-- Orders the merchant creates (ADR 0059). An order may have no customer
-- (a guest's, created by the merchant's server), so customer_id may be
-- NULL; creator is who created it, as an idempotency scope
-- ('customer:<id>' or 'merchant'), and a creation key is unique within
-- its creator, not within a customer: the merchant's key K and a
-- customer's key K are different requests. order_items.stock_taken is how
-- many of a line's units were taken from the product's counted stock when
-- the order was created: what a cancel or an expiry gives back, once.
--
-- SQLite cannot make a column nullable in place: orders is built again,
-- as 00015 did, with its two children (order_items, payment_attempts)
-- first naming the new table, the old ones dropped children first, and
-- the renames rewriting the references. Every row is copied; an order
-- stored before this keeps its customer, creator 'customer:<id>', and
-- lines that took nothing from stock.

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
    CONSTRAINT orders_refund_reserved CHECK (refund_reserved_minor >= 0),
    CONSTRAINT orders_status CHECK (status IN ('pending', 'processing', 'paid', 'refunded', 'cancelled', 'expired'))
);

INSERT INTO orders_new (id, customer_id, creator, status, currency, amount_minor, refunded_minor, refund_reserved_minor, pay_request_id, version, paid_at, expires_at, created_at, updated_at, create_request_id, create_fingerprint)
    SELECT id, customer_id, 'customer:' || customer_id, status, currency, amount_minor, refunded_minor, refund_reserved_minor, pay_request_id, version, paid_at, expires_at, created_at, updated_at, create_request_id, create_fingerprint FROM orders;

CREATE TABLE payment_attempts_new (
    id                  TEXT    NOT NULL PRIMARY KEY,
    order_id            TEXT    NOT NULL REFERENCES orders_new (id),
    request_id          TEXT    NOT NULL,
    status              TEXT    NOT NULL,
    payment_method      TEXT    NOT NULL,
    provider_charge_id  TEXT    NULL,
    failure_code        TEXT    NULL,
    currency            TEXT    NOT NULL,
    amount_minor        INTEGER NOT NULL,
    created_at          TEXT    NOT NULL,
    updated_at          TEXT    NOT NULL,
    leased_until TEXT NULL,
    in_flight_until TEXT NULL,
    CONSTRAINT payment_attempts_status CHECK (status IN ('started', 'succeeded', 'failed', 'unknown', 'held'))
);

INSERT INTO payment_attempts_new (id, order_id, request_id, status, payment_method, provider_charge_id, failure_code, currency, amount_minor, created_at, updated_at, leased_until, in_flight_until)
    SELECT id, order_id, request_id, status, payment_method, provider_charge_id, failure_code, currency, amount_minor, created_at, updated_at, leased_until, in_flight_until FROM payment_attempts;

CREATE TABLE order_items_new (
    order_id          TEXT    NOT NULL REFERENCES orders_new (id) ON DELETE CASCADE,
    position          INTEGER NOT NULL,
    sku               TEXT    NOT NULL,
    name              TEXT    NOT NULL,
    quantity          INTEGER NOT NULL,
    unit_price_minor  INTEGER NOT NULL,
    stock_taken       INTEGER NOT NULL DEFAULT 0 CONSTRAINT order_items_stock_taken CHECK (stock_taken >= 0),
    PRIMARY KEY (order_id, position)
);

INSERT INTO order_items_new (order_id, position, sku, name, quantity, unit_price_minor)
    SELECT order_id, position, sku, name, quantity, unit_price_minor FROM order_items;

DROP TABLE order_items;
DROP TABLE payment_attempts;
DROP TABLE orders;
ALTER TABLE orders_new RENAME TO orders;
ALTER TABLE payment_attempts_new RENAME TO payment_attempts;
ALTER TABLE order_items_new RENAME TO order_items;

CREATE UNIQUE INDEX orders_create_request_id ON orders (creator, create_request_id);
CREATE INDEX orders_customer ON orders (customer_id, id);
CREATE INDEX orders_paid_at ON orders (paid_at);
CREATE INDEX orders_status_expires ON orders (status, expires_at);
CREATE INDEX orders_status_id ON orders (status, id);
CREATE INDEX payment_attempts_order ON payment_attempts (order_id, created_at);
CREATE INDEX payment_attempts_status ON payment_attempts (status, updated_at);
CREATE INDEX payment_attempts_created ON payment_attempts (created_at, status);

-- +goose Down
-- An order without a customer has no place in the schema before this:
-- going down fails while one exists, rather than losing it.
CREATE TABLE orders_old (
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
    updated_at      TEXT    NOT NULL,
    create_request_id TEXT NULL,
    create_fingerprint TEXT NULL,
    refund_reserved_minor INTEGER NOT NULL DEFAULT 0,
    CONSTRAINT orders_refund_reserved CHECK (refund_reserved_minor >= 0),
    CONSTRAINT orders_status CHECK (status IN ('pending', 'processing', 'paid', 'refunded', 'cancelled', 'expired'))
);

INSERT INTO orders_old (id, customer_id, status, currency, amount_minor, refunded_minor, pay_request_id, version, paid_at, expires_at, created_at, updated_at, create_request_id, create_fingerprint, refund_reserved_minor)
    SELECT id, customer_id, status, currency, amount_minor, refunded_minor, pay_request_id, version, paid_at, expires_at, created_at, updated_at, create_request_id, create_fingerprint, refund_reserved_minor FROM orders;

CREATE TABLE payment_attempts_old (
    id                  TEXT    NOT NULL PRIMARY KEY,
    order_id            TEXT    NOT NULL REFERENCES orders_old (id),
    request_id          TEXT    NOT NULL,
    status              TEXT    NOT NULL,
    payment_method      TEXT    NOT NULL,
    provider_charge_id  TEXT    NULL,
    failure_code        TEXT    NULL,
    currency            TEXT    NOT NULL,
    amount_minor        INTEGER NOT NULL,
    created_at          TEXT    NOT NULL,
    updated_at          TEXT    NOT NULL,
    leased_until TEXT NULL,
    in_flight_until TEXT NULL,
    CONSTRAINT payment_attempts_status CHECK (status IN ('started', 'succeeded', 'failed', 'unknown', 'held'))
);

INSERT INTO payment_attempts_old (id, order_id, request_id, status, payment_method, provider_charge_id, failure_code, currency, amount_minor, created_at, updated_at, leased_until, in_flight_until)
    SELECT id, order_id, request_id, status, payment_method, provider_charge_id, failure_code, currency, amount_minor, created_at, updated_at, leased_until, in_flight_until FROM payment_attempts;

CREATE TABLE order_items_old (
    order_id          TEXT    NOT NULL REFERENCES orders_old (id) ON DELETE CASCADE,
    position          INTEGER NOT NULL,
    sku               TEXT    NOT NULL,
    name              TEXT    NOT NULL,
    quantity          INTEGER NOT NULL,
    unit_price_minor  INTEGER NOT NULL,
    PRIMARY KEY (order_id, position)
);

INSERT INTO order_items_old (order_id, position, sku, name, quantity, unit_price_minor)
    SELECT order_id, position, sku, name, quantity, unit_price_minor FROM order_items;

DROP TABLE order_items;
DROP TABLE payment_attempts;
DROP TABLE orders;
ALTER TABLE orders_old RENAME TO orders;
ALTER TABLE payment_attempts_old RENAME TO payment_attempts;
ALTER TABLE order_items_old RENAME TO order_items;

CREATE UNIQUE INDEX orders_create_request_id ON orders (customer_id, create_request_id);
CREATE INDEX orders_customer ON orders (customer_id, id);
CREATE INDEX orders_paid_at ON orders (paid_at);
CREATE INDEX orders_status_expires ON orders (status, expires_at);
CREATE INDEX orders_status_id ON orders (status, id);
CREATE INDEX payment_attempts_order ON payment_attempts (order_id, created_at);
CREATE INDEX payment_attempts_status ON payment_attempts (status, updated_at);
CREATE INDEX payment_attempts_created ON payment_attempts (created_at, status);
