-- +goose Up
-- Three more columns hold closed sets that domain lists in one place, and
-- get a CHECK as the statuses did (00015): an inbox event's outcome
-- (domain.WebhookOutcomes), a discrepancy's type (domain.DiscrepancyTypes)
-- and who stored an idempotency record's answer (domain.RecordCompleters).
-- A value payd does not know cannot be written. Every value an earlier
-- version of payd wrote is in these lists: none was ever renamed or
-- dropped. An outcome is NULL until its event is applied and completed_by
-- while its record is processing; a CHECK lets NULL through.
-- TestStatusChecksMatchDomain holds these lists to domain's.
--
-- As in 00015, each table is built again with its CHECKs (and the ones
-- 00015 gave it), its rows copied (a row another value would make the
-- migration fail, not vanish), the old table dropped and the new one
-- renamed, its indexes made again. No foreign key names these tables.

CREATE TABLE webhook_events_new (
    id            TEXT    NOT NULL PRIMARY KEY,
    type          TEXT    NOT NULL,
    order_id      TEXT    NULL,
    attempt_id    TEXT    NULL,
    charge_id     TEXT    NULL,
    payload       BLOB    NOT NULL,
    outcome       TEXT    NULL,
    received_at   TEXT    NOT NULL,
    processed_at  TEXT    NULL,
    CONSTRAINT webhook_events_outcome CHECK (outcome IN ('applied', 'duplicate', 'ignored', 'discrepancy'))
);

INSERT INTO webhook_events_new (id, type, order_id, attempt_id, charge_id, payload, outcome, received_at, processed_at)
    SELECT id, type, order_id, attempt_id, charge_id, payload, outcome, received_at, processed_at FROM webhook_events;

DROP TABLE webhook_events;
ALTER TABLE webhook_events_new RENAME TO webhook_events;

CREATE INDEX webhook_events_order ON webhook_events (order_id, received_at);
CREATE INDEX webhook_events_pending ON webhook_events (processed_at);

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
    CONSTRAINT discrepancies_type CHECK (type IN ('missing_local_payment', 'missing_provider_charge', 'amount_mismatch', 'duplicate_charge', 'stuck_processing', 'paid_after_close', 'disputed', 'refund_missing_locally', 'refund_missing_at_provider', 'refund_amount_mismatch', 'unconfirmed_payment'))
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
    CONSTRAINT idempotency_records_status CHECK (status IN ('processing', 'succeeded', 'failed')),
    CONSTRAINT idempotency_records_completed_by CHECK (completed_by IN ('request', 'background'))
);

INSERT INTO idempotency_records_new (scope, idem_key, method, path, fingerprint, status, response_status, response_body, response_sealed, order_id, locked_until, created_at, updated_at, expires_at, completed_by)
    SELECT scope, idem_key, method, path, fingerprint, status, response_status, response_body, response_sealed, order_id, locked_until, created_at, updated_at, expires_at, completed_by FROM idempotency_records;

DROP TABLE idempotency_records;
ALTER TABLE idempotency_records_new RENAME TO idempotency_records;

CREATE INDEX idempotency_records_expires ON idempotency_records (expires_at);
CREATE INDEX idempotency_records_order ON idempotency_records (order_id);

-- +goose Down
-- The CHECKs stay, as 00015's do: a schema that refuses what payd does not
-- know is valid for every earlier version of payd.
SELECT 1;
