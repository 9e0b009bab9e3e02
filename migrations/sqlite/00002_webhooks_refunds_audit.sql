-- +goose Up
-- The provider's webhooks, each event id stored once (the inbox).
CREATE TABLE webhook_events (
    id            TEXT    NOT NULL PRIMARY KEY,
    type          TEXT    NOT NULL,
    order_id      TEXT    NULL,
    attempt_id    TEXT    NULL,
    charge_id     TEXT    NULL,
    payload       BLOB    NOT NULL,
    outcome       TEXT    NULL,
    received_at   TEXT    NOT NULL,
    processed_at  TEXT    NULL
);
CREATE INDEX webhook_events_order ON webhook_events (order_id, received_at);

-- Refunds, manual and automatic. provider_key is the provider's idempotency
-- key; its unique index is what stops one charge being refunded twice.
CREATE TABLE refunds (
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
    updated_at          TEXT    NOT NULL
);
CREATE UNIQUE INDEX refunds_provider_key ON refunds (provider_key);
CREATE INDEX refunds_order ON refunds (order_id, created_at);
CREATE INDEX refunds_status ON refunds (status, updated_at);

CREATE TABLE reconciliation_runs (
    id           TEXT    NOT NULL PRIMARY KEY,
    source       TEXT    NOT NULL,
    window_from  TEXT    NOT NULL,
    window_to    TEXT    NOT NULL,
    dry_run      INTEGER NOT NULL DEFAULT 0,
    matched      INTEGER NOT NULL DEFAULT 0,
    found        INTEGER NOT NULL DEFAULT 0,
    new_found    INTEGER NOT NULL DEFAULT 0,
    created_at   TEXT    NOT NULL,
    finished_at  TEXT    NULL
);

-- A disagreement between payd and the provider. (type, reference) is unique,
-- so finding it again (a redelivered webhook, a re-run window) adds nothing.
CREATE TABLE discrepancies (
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
    resolved_at            TEXT    NULL
);
CREATE UNIQUE INDEX discrepancies_type_reference ON discrepancies (type, reference);
CREATE INDEX discrepancies_run ON discrepancies (run_id);
CREATE INDEX discrepancies_order ON discrepancies (order_id);
CREATE INDEX discrepancies_status ON discrepancies (status, detected_at);

-- Which runs saw which discrepancy (a re-run sees known ones again).
CREATE TABLE reconciliation_findings (
    run_id          TEXT    NOT NULL,
    discrepancy_id  TEXT    NOT NULL,
    PRIMARY KEY (run_id, discrepancy_id)
);

CREATE TABLE audit_log (
    id          TEXT    NOT NULL PRIMARY KEY,
    actor       TEXT    NOT NULL,
    action      TEXT    NOT NULL,
    order_id    TEXT    NULL,
    target      TEXT    NULL,
    request_id  TEXT    NULL,
    result      INTEGER NOT NULL,
    detail      TEXT    NULL,
    created_at  TEXT    NOT NULL
);
CREATE INDEX audit_log_order ON audit_log (order_id, created_at);
CREATE INDEX audit_log_created ON audit_log (created_at);

-- Reconciliation lists the orders paid in a window (ListPaidBetween).
CREATE INDEX orders_paid_at ON orders (paid_at);

-- +goose Down
DROP INDEX orders_paid_at;
DROP TABLE audit_log;
DROP TABLE reconciliation_findings;
DROP TABLE discrepancies;
DROP TABLE reconciliation_runs;
DROP TABLE refunds;
DROP TABLE webhook_events;
