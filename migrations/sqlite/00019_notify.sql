-- +goose Up
-- Telling the shop (ADR 0053). notify_events is the outbox: one row per
-- committed change of an order, written by the change's own transaction.
-- seq is the order's version the change left, so (order_id, seq) is unique
-- and orders one order's events. The snapshot columns are the order's
-- changing columns and its ledger's sums as that transaction saw them;
-- body is rendered from them once, at fan-out, and sent on every attempt.
CREATE TABLE notify_events (
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
    CONSTRAINT notify_events_type CHECK (type IN ('order.paid', 'order.payment_failed', 'order.cancelled', 'order.expired', 'order.refunded', 'order.disputed', 'order.dispute_closed')),
    CONSTRAINT notify_events_cause CHECK (cause IN ('pay_request', 'webhook', 'operator', 'recoverer', 'expiry', 'reconciliation', 'customer'))
);
CREATE UNIQUE INDEX notify_events_order_seq ON notify_events (order_id, seq);
CREATE INDEX notify_events_fanout ON notify_events (fanned_out, created_at);
CREATE INDEX notify_events_created ON notify_events (created_at);

-- A merchant's endpoints. events is the subscribed types, space-separated.
-- The secrets are sealed with the key payd seals stored answers with.
CREATE TABLE notify_endpoints (
    id                      TEXT     NOT NULL PRIMARY KEY,
    url                     TEXT     NOT NULL,
    description             TEXT     NOT NULL DEFAULT '',
    events                  TEXT     NOT NULL,
    status                  TEXT     NOT NULL,
    disabled_reason         TEXT     NOT NULL DEFAULT '',
    secret_sealed           BLOB     NOT NULL,
    previous_secret_sealed  BLOB     NULL,
    previous_until          TEXT     NULL,
    from_env                INTEGER  NOT NULL DEFAULT 0,
    created_at              TEXT     NOT NULL,
    updated_at              TEXT     NOT NULL,
    CONSTRAINT notify_endpoints_status CHECK (status IN ('enabled', 'disabled'))
);
CREATE INDEX notify_endpoints_status ON notify_endpoints (status);

-- One event's delivery to one endpoint. A replica sends it under a lease
-- (leased_until), as the recoverer holds an attempt.
CREATE TABLE notify_deliveries (
    id                      TEXT     NOT NULL PRIMARY KEY,
    endpoint_id             TEXT     NOT NULL,
    event_id                TEXT     NOT NULL,
    order_id                TEXT     NOT NULL,
    seq                     INTEGER  NOT NULL,
    status                  TEXT     NOT NULL,
    attempts                INTEGER  NOT NULL DEFAULT 0,
    next_attempt_at         TEXT     NOT NULL,
    leased_until            TEXT     NULL,
    last_status             INTEGER  NOT NULL DEFAULT 0,
    last_error              TEXT     NOT NULL DEFAULT '',
    delivered_at            TEXT     NULL,
    failed_at               TEXT     NULL,
    created_at              TEXT     NOT NULL,
    updated_at              TEXT     NOT NULL,
    CONSTRAINT notify_deliveries_status CHECK (status IN ('pending', 'delivered', 'failed'))
);
CREATE UNIQUE INDEX notify_deliveries_endpoint_event ON notify_deliveries (endpoint_id, event_id);
CREATE INDEX notify_deliveries_due ON notify_deliveries (status, next_attempt_at);
CREATE INDEX notify_deliveries_order ON notify_deliveries (endpoint_id, order_id, seq);
CREATE INDEX notify_deliveries_event ON notify_deliveries (event_id);

-- Each request sent for a delivery, for the operators' delivery log.
CREATE TABLE notify_attempts (
    id                      TEXT     NOT NULL PRIMARY KEY,
    delivery_id             TEXT     NOT NULL,
    n                       INTEGER  NOT NULL,
    started_at              TEXT     NOT NULL,
    duration_us             INTEGER  NOT NULL,
    status                  INTEGER  NOT NULL DEFAULT 0,
    error                   TEXT     NOT NULL DEFAULT '',
    request_head            TEXT     NOT NULL,
    response                TEXT     NOT NULL
);
CREATE UNIQUE INDEX notify_attempts_delivery_n ON notify_attempts (delivery_id, n);

-- +goose Down
DROP TABLE notify_attempts;
DROP TABLE notify_deliveries;
DROP TABLE notify_endpoints;
DROP TABLE notify_events;
