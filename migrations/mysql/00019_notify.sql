-- +goose Up
-- Telling the shop (ADR 0053). notify_events is the outbox: one row per
-- committed change of an order, written by the change's own transaction.
-- seq is the order's version the change left, so (order_id, seq) is unique
-- and orders one order's events. The snapshot columns are the order's
-- changing columns and its ledger's sums as that transaction saw them;
-- body is rendered from them once, at fan-out, and sent on every attempt.
CREATE TABLE notify_events (
    id                   CHAR(36)     NOT NULL PRIMARY KEY,
    order_id             CHAR(36)     NOT NULL,
    seq                  BIGINT       NOT NULL,
    type                 VARCHAR(32)  NOT NULL,
    cause                VARCHAR(16)  NOT NULL,
    cause_ref            VARCHAR(255) NOT NULL DEFAULT '',
    order_status         VARCHAR(16)  NOT NULL,
    pay_request_id       VARCHAR(255) NULL,
    paid_at              DATETIME(6)  NULL,
    refunded_minor       BIGINT       NOT NULL,
    order_updated_at     DATETIME(6)  NOT NULL,
    charged_minor        BIGINT       NOT NULL,
    books_refunded_minor BIGINT       NOT NULL,
    disputed_minor       BIGINT       NOT NULL,
    lost_minor           BIGINT       NOT NULL,
    body                 MEDIUMBLOB   NULL,
    fanned_out           BOOLEAN      NOT NULL DEFAULT FALSE,
    created_at           DATETIME(6)  NOT NULL,
    UNIQUE KEY notify_events_order_seq (order_id, seq),
    KEY notify_events_fanout (fanned_out, created_at),
    KEY notify_events_created (created_at),
    CONSTRAINT notify_events_type CHECK (type IN ('order.paid', 'order.payment_failed', 'order.cancelled', 'order.expired', 'order.refunded', 'order.disputed', 'order.dispute_closed')),
    CONSTRAINT notify_events_cause CHECK (cause IN ('pay_request', 'webhook', 'operator', 'recoverer', 'expiry', 'reconciliation', 'customer'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- A merchant's endpoints. events is the subscribed types, space-separated.
-- The secrets are sealed with the key payd seals stored answers with.
CREATE TABLE notify_endpoints (
    id                      CHAR(36)      NOT NULL PRIMARY KEY,
    url                     VARCHAR(2048) NOT NULL,
    description             VARCHAR(500)  NOT NULL DEFAULT '',
    events                  VARCHAR(500)  NOT NULL,
    status                  VARCHAR(16)   NOT NULL,
    disabled_reason         VARCHAR(255)  NOT NULL DEFAULT '',
    secret_sealed           BLOB          NOT NULL,
    previous_secret_sealed  BLOB          NULL,
    previous_until          DATETIME(6)   NULL,
    from_env                BOOLEAN       NOT NULL DEFAULT FALSE,
    created_at              DATETIME(6)   NOT NULL,
    updated_at              DATETIME(6)   NOT NULL,
    KEY notify_endpoints_status (status),
    CONSTRAINT notify_endpoints_status CHECK (status IN ('enabled', 'disabled'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- One event's delivery to one endpoint. A replica sends it under a lease
-- (leased_until), as the recoverer holds an attempt.
CREATE TABLE notify_deliveries (
    id               CHAR(36)      NOT NULL PRIMARY KEY,
    endpoint_id      CHAR(36)      NOT NULL,
    event_id         CHAR(36)      NOT NULL,
    order_id         CHAR(36)      NOT NULL,
    seq              BIGINT        NOT NULL,
    status           VARCHAR(16)   NOT NULL,
    attempts         INT           NOT NULL DEFAULT 0,
    next_attempt_at  DATETIME(6)   NOT NULL,
    leased_until     DATETIME(6)   NULL,
    last_status      INT           NOT NULL DEFAULT 0,
    last_error       VARCHAR(500)  NOT NULL DEFAULT '',
    delivered_at     DATETIME(6)   NULL,
    failed_at        DATETIME(6)   NULL,
    created_at       DATETIME(6)   NOT NULL,
    updated_at       DATETIME(6)   NOT NULL,
    UNIQUE KEY notify_deliveries_endpoint_event (endpoint_id, event_id),
    KEY notify_deliveries_due (status, next_attempt_at),
    KEY notify_deliveries_order (endpoint_id, order_id, seq),
    KEY notify_deliveries_event (event_id),
    CONSTRAINT notify_deliveries_status CHECK (status IN ('pending', 'delivered', 'failed'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Each request sent for a delivery, for the operators' delivery log.
CREATE TABLE notify_attempts (
    id            CHAR(36)      NOT NULL PRIMARY KEY,
    delivery_id   CHAR(36)      NOT NULL,
    n             INT           NOT NULL,
    started_at    DATETIME(6)   NOT NULL,
    duration_us   BIGINT        NOT NULL,
    status        INT           NOT NULL DEFAULT 0,
    error         VARCHAR(500)  NOT NULL DEFAULT '',
    request_head  TEXT          NOT NULL,
    response      TEXT          NOT NULL,
    UNIQUE KEY notify_attempts_delivery_n (delivery_id, n)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE notify_attempts;
DROP TABLE notify_deliveries;
DROP TABLE notify_endpoints;
DROP TABLE notify_events;
