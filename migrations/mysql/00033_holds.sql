-- +goose Up
-- Holds (ADR 0060). A manual-capture order's pay only authorizes it; then
-- one hold action at a time (a capture, a cancel's void, the job's lapse)
-- owns the hold and asks the provider under its own key. hold_actions
-- records each, so a retry or the job asks again under that key before
-- anything else. payment_attempts.capture_method is what the attempt asked
-- the provider for: asking again about an attempt repeats its very
-- request. The order's own columns come with 00034.
ALTER TABLE payment_attempts ADD COLUMN capture_method VARCHAR(16) NOT NULL DEFAULT 'automatic',
    ADD CONSTRAINT payment_attempts_capture_method CHECK (capture_method IN ('automatic', 'manual'));

CREATE TABLE hold_actions (
    id            CHAR(36)     NOT NULL PRIMARY KEY,
    order_id      CHAR(36)     NOT NULL,
    kind          VARCHAR(16)  NOT NULL,
    status        VARCHAR(16)  NOT NULL,
    amount_minor  BIGINT       NOT NULL DEFAULT 0,
    currency      CHAR(3)      NOT NULL,
    request_id    VARCHAR(255) NULL,
    failure_code  VARCHAR(64)  NULL,
    leased_until  DATETIME(6)  NULL,
    created_at    DATETIME(6)  NOT NULL,
    updated_at    DATETIME(6)  NOT NULL,
    KEY hold_actions_order (order_id, created_at),
    KEY hold_actions_unsettled (status, leased_until),
    CONSTRAINT hold_actions_kind CHECK (kind IN ('capture', 'void', 'lapse')),
    CONSTRAINT hold_actions_status CHECK (status IN ('started', 'succeeded', 'failed', 'unknown')),
    CONSTRAINT hold_actions_amount CHECK (amount_minor >= 0),
    CONSTRAINT hold_actions_order_fk FOREIGN KEY (order_id) REFERENCES orders (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE hold_actions;
ALTER TABLE payment_attempts DROP CONSTRAINT payment_attempts_capture_method, DROP COLUMN capture_method;
