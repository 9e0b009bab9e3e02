-- +goose Up
-- The sandbox provider's own store: it lives in its own database, as a real
-- provider's would, so payd crashing (or the sandbox restarting) never makes
-- it forget a charge, a refund or a webhook it still owes. Tables carry a
-- sandbox_ prefix so they cannot clash with payd's if both share a server.
-- Money is integer minor units; timestamps are UTC with microseconds.
CREATE TABLE sandbox_charges (
    id               VARCHAR(64)  NOT NULL PRIMARY KEY,
    idempotency_key  VARCHAR(255) NOT NULL,
    order_id         VARCHAR(255) NOT NULL,
    payment_method   VARCHAR(64)  NOT NULL,
    currency         CHAR(3)      NOT NULL,
    amount_minor     BIGINT       NOT NULL,
    refunded_minor   BIGINT       NOT NULL DEFAULT 0,
    status           VARCHAR(16)  NOT NULL,
    failure_code     VARCHAR(64)  NOT NULL DEFAULT '',
    -- settle_at is when a pending (asynchronous) charge resolves.
    settle_at        DATETIME(6)  NULL,
    created_at       DATETIME(6)  NOT NULL,
    updated_at       DATETIME(6)  NOT NULL,
    -- One charge per idempotency key: the unique index, not a read-then-write,
    -- is what stops concurrent identical requests from charging twice.
    UNIQUE KEY sandbox_charges_key (idempotency_key),
    KEY sandbox_charges_created (created_at),
    KEY sandbox_charges_settle (status, settle_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE sandbox_refunds (
    id               VARCHAR(64)  NOT NULL PRIMARY KEY,
    idempotency_key  VARCHAR(255) NOT NULL,
    charge_id        VARCHAR(64)  NOT NULL,
    currency         CHAR(3)      NOT NULL,
    amount_minor     BIGINT       NOT NULL,
    reason           VARCHAR(500) NOT NULL DEFAULT '',
    status           VARCHAR(16)  NOT NULL,
    created_at       DATETIME(6)  NOT NULL,
    UNIQUE KEY sandbox_refunds_key (idempotency_key),
    KEY sandbox_refunds_charge (charge_id),
    KEY sandbox_refunds_created (created_at),
    CONSTRAINT sandbox_refunds_charge_fk FOREIGN KEY (charge_id) REFERENCES sandbox_charges (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The webhook outbox: one row per delivery copy of an event (several copies
-- share event_id when duplicates are configured). A worker claims a due row
-- with a guarded UPDATE of claimed_until before sending, so two sandbox
-- processes on one database never send the same copy at once.
CREATE TABLE sandbox_webhook_deliveries (
    id               VARCHAR(64)  NOT NULL PRIMARY KEY,
    event_id         VARCHAR(64)  NOT NULL,
    copy_no          INT          NOT NULL,
    event_type       VARCHAR(64)  NOT NULL,
    payload          MEDIUMTEXT   NOT NULL,
    attempts         INT          NOT NULL DEFAULT 0,
    next_attempt_at  DATETIME(6)  NOT NULL,
    claimed_until    DATETIME(6)  NULL,
    delivered_at     DATETIME(6)  NULL,
    last_status      INT          NOT NULL DEFAULT 0,
    last_error       VARCHAR(500) NOT NULL DEFAULT '',
    created_at       DATETIME(6)  NOT NULL,
    UNIQUE KEY sandbox_webhook_deliveries_copy (event_id, copy_no),
    KEY sandbox_webhook_deliveries_due (delivered_at, next_attempt_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE sandbox_webhook_deliveries;
DROP TABLE sandbox_refunds;
DROP TABLE sandbox_charges;
