-- +goose Up
-- Money is stored as integer minor units (cents) so neither database ever
-- does float arithmetic on it. Timestamps are UTC with microseconds.
CREATE TABLE customers (
    id          CHAR(36)     NOT NULL PRIMARY KEY,
    email       VARCHAR(254) NOT NULL,
    name        VARCHAR(200) NOT NULL,
    token_hash  CHAR(64)     NOT NULL,
    -- the idempotency key of the registration, so a repeated registration
    -- resolves to this customer even after its idempotency record expired
    request_id  VARCHAR(255) NULL,
    created_at  DATETIME(6)  NOT NULL,
    UNIQUE KEY customers_email (email),
    UNIQUE KEY customers_token_hash (token_hash)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE orders (
    id              CHAR(36)     NOT NULL PRIMARY KEY,
    customer_id     CHAR(36)     NOT NULL,
    status          VARCHAR(16)  NOT NULL,
    currency        CHAR(3)      NOT NULL,
    amount_minor    BIGINT       NOT NULL,
    refunded_minor  BIGINT       NOT NULL DEFAULT 0,
    pay_request_id  VARCHAR(255) NULL,
    version         BIGINT       NOT NULL DEFAULT 1,
    paid_at         DATETIME(6)  NULL,
    expires_at      DATETIME(6)  NOT NULL,
    created_at      DATETIME(6)  NOT NULL,
    updated_at      DATETIME(6)  NOT NULL,
    KEY orders_customer (customer_id, id),
    KEY orders_status_expires (status, expires_at),
    KEY orders_status_id (status, id),
    CONSTRAINT orders_customer_fk FOREIGN KEY (customer_id) REFERENCES customers (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE order_items (
    order_id          CHAR(36)     NOT NULL,
    position          INT          NOT NULL,
    sku               VARCHAR(64)  NOT NULL,
    name              VARCHAR(200) NOT NULL,
    quantity          BIGINT       NOT NULL,
    unit_price_minor  BIGINT       NOT NULL,
    PRIMARY KEY (order_id, position),
    CONSTRAINT order_items_order_fk FOREIGN KEY (order_id) REFERENCES orders (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE payment_attempts (
    id                  CHAR(36)     NOT NULL PRIMARY KEY,
    order_id            CHAR(36)     NOT NULL,
    request_id          VARCHAR(255) NOT NULL,
    status              VARCHAR(16)  NOT NULL,
    payment_method      VARCHAR(64)  NOT NULL,
    provider_charge_id  VARCHAR(64)  NULL,
    failure_code        VARCHAR(64)  NULL,
    currency            CHAR(3)      NOT NULL,
    amount_minor        BIGINT       NOT NULL,
    created_at          DATETIME(6)  NOT NULL,
    updated_at          DATETIME(6)  NOT NULL,
    KEY payment_attempts_order (order_id, created_at),
    KEY payment_attempts_status (status, updated_at),
    CONSTRAINT payment_attempts_order_fk FOREIGN KEY (order_id) REFERENCES orders (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The idempotency record: inserting it is the lock (primary key on scope and
-- key), its lease is locked_until, and its stored response is replayed.
CREATE TABLE idempotency_records (
    scope            VARCHAR(64)  NOT NULL,
    idem_key         VARCHAR(255) NOT NULL,
    method           VARCHAR(8)   NOT NULL,
    path             VARCHAR(512) NOT NULL,
    fingerprint      CHAR(64)     NOT NULL,
    status           VARCHAR(16)  NOT NULL,
    response_status  INT          NOT NULL DEFAULT 0,
    response_body    MEDIUMBLOB   NULL,
    response_sealed  BOOLEAN      NOT NULL DEFAULT FALSE,
    order_id         CHAR(36)     NULL,
    locked_until     DATETIME(6)  NOT NULL,
    created_at       DATETIME(6)  NOT NULL,
    updated_at       DATETIME(6)  NOT NULL,
    expires_at       DATETIME(6)  NOT NULL,
    PRIMARY KEY (scope, idem_key),
    KEY idempotency_records_expires (expires_at),
    KEY idempotency_records_order (order_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE idempotency_records;
DROP TABLE payment_attempts;
DROP TABLE order_items;
DROP TABLE orders;
DROP TABLE customers;
