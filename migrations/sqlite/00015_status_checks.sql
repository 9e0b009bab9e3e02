-- +goose Up
-- Every status column holds only the statuses of its machine in domain
-- (ADR 0032), as disputes.status and the ledger's kind and source already
-- do: a row no machine knows cannot be written, whoever writes it. A test
-- holds these lists to domain's tables (TestStatusChecksMatchDomain).
--
-- SQLite cannot add a CHECK to a table that exists: each table is built
-- again with its CHECKs, its rows copied (a row another value would make
-- the migration fail, not vanish), the old table dropped and the new one
-- renamed, its indexes made again. Triggers would do the same without a
-- rebuild, but SQLite compiles a table's triggers into every statement
-- that writes it: the pay path's statements took measurably more CPU
-- (BenchmarkPayStatements), while a CHECK costs nothing it can measure.
--
-- orders is named by the foreign keys of order_items (ON DELETE CASCADE)
-- and payment_attempts, and foreign keys are on: dropping orders while
-- they name it would delete every order's items. So its two children are
-- built again first, naming the new orders table, the three old tables
-- are dropped children first, and renaming the new orders table rewrites
-- its children's references to the name orders.


CREATE TABLE orders_new (
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
    CONSTRAINT orders_status CHECK (status IN ('pending', 'processing', 'paid', 'refunded', 'cancelled', 'expired'))
);

INSERT INTO orders_new (id, customer_id, status, currency, amount_minor, refunded_minor, pay_request_id, version, paid_at, expires_at, created_at, updated_at, create_request_id, create_fingerprint)
    SELECT id, customer_id, status, currency, amount_minor, refunded_minor, pay_request_id, version, paid_at, expires_at, created_at, updated_at, create_request_id, create_fingerprint FROM orders;

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

CREATE UNIQUE INDEX orders_create_request_id ON orders (customer_id, create_request_id);
CREATE INDEX orders_customer ON orders (customer_id, id);
CREATE INDEX orders_paid_at ON orders (paid_at);
CREATE INDEX orders_status_expires ON orders (status, expires_at);
CREATE INDEX orders_status_id ON orders (status, id);
CREATE INDEX payment_attempts_order ON payment_attempts (order_id, created_at);
CREATE INDEX payment_attempts_status ON payment_attempts (status, updated_at);

CREATE TABLE idempotency_records_new (
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
    completed_by TEXT NULL,
    PRIMARY KEY (scope, idem_key),
    CONSTRAINT idempotency_records_status CHECK (status IN ('processing', 'succeeded', 'failed'))
);

INSERT INTO idempotency_records_new (scope, idem_key, method, path, fingerprint, status, response_status, response_body, response_sealed, order_id, locked_until, created_at, updated_at, expires_at, completed_by)
    SELECT scope, idem_key, method, path, fingerprint, status, response_status, response_body, response_sealed, order_id, locked_until, created_at, updated_at, expires_at, completed_by FROM idempotency_records;

DROP TABLE idempotency_records;
ALTER TABLE idempotency_records_new RENAME TO idempotency_records;

CREATE INDEX idempotency_records_expires ON idempotency_records (expires_at);
CREATE INDEX idempotency_records_order ON idempotency_records (order_id);

CREATE TABLE refunds_new (
    id                  TEXT    NOT NULL PRIMARY KEY,
    order_id            TEXT    NOT NULL,
    charge_id           TEXT    NOT NULL,
    request_id          TEXT    NULL,
    kind                TEXT    NOT NULL,
    provider_key        TEXT    NOT NULL,
    provider_refund_id  TEXT    NULL,
    currency            TEXT    NOT NULL,
    amount_minor        INTEGER NOT NULL,
    status              TEXT    NOT NULL,
    reason              TEXT    NOT NULL,
    created_at          TEXT    NOT NULL,
    updated_at          TEXT    NOT NULL,
    request_fingerprint TEXT NULL,
    CONSTRAINT refunds_status CHECK (status IN ('pending', 'succeeded', 'failed')),
    CONSTRAINT refunds_kind CHECK (kind IN ('manual', 'auto'))
);

INSERT INTO refunds_new (id, order_id, charge_id, request_id, kind, provider_key, provider_refund_id, currency, amount_minor, status, reason, created_at, updated_at, request_fingerprint)
    SELECT id, order_id, charge_id, request_id, kind, provider_key, provider_refund_id, currency, amount_minor, status, reason, created_at, updated_at, request_fingerprint FROM refunds;

DROP TABLE refunds;
ALTER TABLE refunds_new RENAME TO refunds;

CREATE INDEX refunds_order ON refunds (order_id, created_at);
CREATE UNIQUE INDEX refunds_provider_key ON refunds (provider_key);
CREATE INDEX refunds_status ON refunds (status, updated_at);

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
    CONSTRAINT discrepancies_status CHECK (status IN ('open', 'resolving', 'resolved'))
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

-- +goose Down
-- The CHECKs stay: taking one away is building its table again, and a
-- schema that refuses what no machine knows is valid for every earlier
-- version of payd.
SELECT 1;
