-- +goose Up
-- Holds: a manual-capture charge that succeeds is authorized, its money
-- held until capture_before. One capture takes up to the held amount
-- (captured_minor; the rest is released), or a void (or the hold lapsing)
-- gives it all up: status authorized -> succeeded or voided, each by one
-- guarded UPDATE, so a capture and a void that race have one winner.
-- An automatic charge keeps captured_minor 0: it took its whole amount.
ALTER TABLE sandbox_charges
    ADD COLUMN capture_method VARCHAR(16) NOT NULL DEFAULT 'automatic',
    ADD COLUMN captured_minor BIGINT      NOT NULL DEFAULT 0,
    ADD COLUMN capture_before DATETIME(6) NULL,
    ADD KEY sandbox_charges_hold (status, capture_before);

-- Every capture and void request, once per idempotency key: a repeat of
-- the key answers the charge as it is now, another request under it is
-- refused (422 idempotency_key_reused).
CREATE TABLE sandbox_hold_actions (
    id               VARCHAR(64)  NOT NULL PRIMARY KEY,
    idempotency_key  VARCHAR(255) NOT NULL,
    charge_id        VARCHAR(64)  NOT NULL,
    kind             VARCHAR(16)  NOT NULL,
    amount_minor     BIGINT       NOT NULL,
    created_at       DATETIME(6)  NOT NULL,
    UNIQUE KEY sandbox_hold_actions_key (idempotency_key),
    KEY sandbox_hold_actions_charge (charge_id),
    CONSTRAINT sandbox_hold_actions_kind CHECK (kind IN ('capture', 'void')),
    CONSTRAINT sandbox_hold_actions_charge_fk FOREIGN KEY (charge_id) REFERENCES sandbox_charges (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE sandbox_hold_actions;
ALTER TABLE sandbox_charges
    DROP KEY sandbox_charges_hold,
    DROP COLUMN capture_before,
    DROP COLUMN captured_minor,
    DROP COLUMN capture_method;
