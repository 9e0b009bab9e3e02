-- +goose Up
-- Holds (manual capture, ADR 0060): a manual charge that succeeds is only
-- authorized; one capture moves up to its amount and releases the rest; a
-- void, or capture_before passing, releases all of it. Every change of a
-- hold is one UPDATE guarded by status = 'authorized', so of concurrent
-- captures, voids and the lapse exactly one wins. An automatic charge keeps
-- capture_method 'automatic' and never uses the other columns.
ALTER TABLE sandbox_charges
    ADD COLUMN capture_method  VARCHAR(16) NOT NULL DEFAULT 'automatic',
    ADD COLUMN captured_minor  BIGINT      NOT NULL DEFAULT 0,
    ADD COLUMN capture_before  DATETIME(6) NULL,
    ADD COLUMN captured_at     DATETIME(6) NULL,
    ADD COLUMN voided_at       DATETIME(6) NULL,
    ADD COLUMN void_reason     VARCHAR(16) NOT NULL DEFAULT '',
    ADD KEY sandbox_charges_hold (status, capture_before),
    ADD KEY sandbox_charges_captured (captured_at),
    ADD CONSTRAINT sandbox_charges_capture_method CHECK (capture_method IN ('automatic', 'manual'));

-- One row per capture or void that succeeded, under its own idempotency
-- key: the unique index makes a key act once, and a replay answers the
-- charge it acted on.
CREATE TABLE sandbox_hold_actions (
    id               VARCHAR(64)  NOT NULL PRIMARY KEY,
    idempotency_key  VARCHAR(255) NOT NULL,
    charge_id        VARCHAR(64)  NOT NULL,
    kind             VARCHAR(8)   NOT NULL,
    amount_minor     BIGINT       NOT NULL,
    created_at       DATETIME(6)  NOT NULL,
    UNIQUE KEY sandbox_hold_actions_key (idempotency_key),
    KEY sandbox_hold_actions_charge (charge_id),
    CONSTRAINT sandbox_hold_actions_charge_fk FOREIGN KEY (charge_id) REFERENCES sandbox_charges (id),
    CONSTRAINT sandbox_hold_actions_kind CHECK (kind IN ('capture', 'void'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE sandbox_hold_actions;
ALTER TABLE sandbox_charges
    DROP CONSTRAINT sandbox_charges_capture_method,
    DROP KEY sandbox_charges_captured,
    DROP KEY sandbox_charges_hold,
    DROP COLUMN void_reason,
    DROP COLUMN voided_at,
    DROP COLUMN captured_at,
    DROP COLUMN capture_before,
    DROP COLUMN captured_minor,
    DROP COLUMN capture_method;
