-- +goose Up
-- The provider's webhooks, each event id stored once (the inbox).
CREATE TABLE webhook_events (
    id            VARCHAR(255) NOT NULL PRIMARY KEY,
    type          VARCHAR(64)  NOT NULL,
    order_id      VARCHAR(64)  NULL,
    attempt_id    VARCHAR(255) NULL,
    charge_id     VARCHAR(64)  NULL,
    payload       MEDIUMBLOB   NOT NULL,
    outcome       VARCHAR(32)  NULL,
    received_at   DATETIME(6)  NOT NULL,
    processed_at  DATETIME(6)  NULL,
    KEY webhook_events_order (order_id, received_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Refunds, manual and automatic. provider_key is the provider's idempotency
-- key; its unique index is what stops one charge being refunded twice.
CREATE TABLE refunds (
    id                  CHAR(36)     NOT NULL PRIMARY KEY,
    order_id            CHAR(36)     NOT NULL,
    charge_id           VARCHAR(64)  NOT NULL,
    request_id          VARCHAR(255) NULL,
    kind                VARCHAR(16)  NOT NULL,
    provider_key        VARCHAR(255) NOT NULL,
    provider_refund_id  VARCHAR(64)  NULL,
    currency            CHAR(3)      NOT NULL,
    amount_minor        BIGINT       NOT NULL,
    status              VARCHAR(16)  NOT NULL,
    reason              VARCHAR(500) NOT NULL,
    created_at          DATETIME(6)  NOT NULL,
    updated_at          DATETIME(6)  NOT NULL,
    UNIQUE KEY refunds_provider_key (provider_key),
    KEY refunds_order (order_id, created_at),
    KEY refunds_status (status, updated_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE reconciliation_runs (
    id           CHAR(36)     NOT NULL PRIMARY KEY,
    source       VARCHAR(16)  NOT NULL,
    window_from  DATETIME(6)  NOT NULL,
    window_to    DATETIME(6)  NOT NULL,
    dry_run      BOOLEAN      NOT NULL DEFAULT FALSE,
    matched      INT          NOT NULL DEFAULT 0,
    found        INT          NOT NULL DEFAULT 0,
    new_found    INT          NOT NULL DEFAULT 0,
    created_at   DATETIME(6)  NOT NULL,
    finished_at  DATETIME(6)  NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- A disagreement between payd and the provider. (type, reference) is unique,
-- so finding it again (a redelivered webhook, a re-run window) adds nothing.
CREATE TABLE discrepancies (
    id                     CHAR(36)     NOT NULL PRIMARY KEY,
    run_id                 CHAR(36)     NULL,
    type                   VARCHAR(32)  NOT NULL,
    reference              VARCHAR(255) NOT NULL,
    order_id               VARCHAR(64)  NULL,
    attempt_id             VARCHAR(255) NULL,
    charge_id              VARCHAR(64)  NULL,
    currency               CHAR(3)      NULL,
    provider_amount_minor  BIGINT       NULL,
    local_amount_minor     BIGINT       NULL,
    status                 VARCHAR(16)  NOT NULL,
    resolution             VARCHAR(32)  NULL,
    note                   VARCHAR(1000) NULL,
    detected_at            DATETIME(6)  NOT NULL,
    resolved_at            DATETIME(6)  NULL,
    UNIQUE KEY discrepancies_type_reference (type, reference),
    KEY discrepancies_run (run_id),
    KEY discrepancies_order (order_id),
    KEY discrepancies_status (status, detected_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Which runs saw which discrepancy (a re-run sees known ones again).
CREATE TABLE reconciliation_findings (
    run_id          CHAR(36) NOT NULL,
    discrepancy_id  CHAR(36) NOT NULL,
    PRIMARY KEY (run_id, discrepancy_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE audit_log (
    id          CHAR(36)     NOT NULL PRIMARY KEY,
    actor       VARCHAR(64)  NOT NULL,
    action      VARCHAR(64)  NOT NULL,
    order_id    VARCHAR(64)  NULL,
    target      VARCHAR(255) NULL,
    request_id  VARCHAR(255) NULL,
    result      INT          NOT NULL,
    detail      TEXT         NULL,
    created_at  DATETIME(6)  NOT NULL,
    KEY audit_log_order (order_id, created_at),
    KEY audit_log_created (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Reconciliation lists the orders paid in a window (ListPaidBetween).
ALTER TABLE orders ADD KEY orders_paid_at (paid_at);

-- +goose Down
ALTER TABLE orders DROP KEY orders_paid_at;
DROP TABLE audit_log;
DROP TABLE reconciliation_findings;
DROP TABLE discrepancies;
DROP TABLE reconciliation_runs;
DROP TABLE refunds;
DROP TABLE webhook_events;
