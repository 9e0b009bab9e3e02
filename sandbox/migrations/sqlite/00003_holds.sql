-- +goose Up
-- Holds (manual capture, ADR 0060): a manual charge that succeeds is only
-- authorized; one capture moves up to its amount and releases the rest; a
-- void, or capture_before passing, releases all of it. Every change of a
-- hold is one UPDATE guarded by status = 'authorized', so of concurrent
-- captures, voids and the lapse exactly one wins. An automatic charge keeps
-- capture_method 'automatic' and never uses the other columns.
ALTER TABLE sandbox_charges ADD COLUMN capture_method TEXT NOT NULL DEFAULT 'automatic'
    CHECK (capture_method IN ('automatic', 'manual'));
ALTER TABLE sandbox_charges ADD COLUMN captured_minor INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sandbox_charges ADD COLUMN capture_before TEXT NULL;
ALTER TABLE sandbox_charges ADD COLUMN captured_at TEXT NULL;
ALTER TABLE sandbox_charges ADD COLUMN voided_at TEXT NULL;
ALTER TABLE sandbox_charges ADD COLUMN void_reason TEXT NOT NULL DEFAULT '';
CREATE INDEX sandbox_charges_hold ON sandbox_charges (status, capture_before);
CREATE INDEX sandbox_charges_captured ON sandbox_charges (captured_at);

-- One row per capture or void that succeeded, under its own idempotency
-- key: the unique index makes a key act once, and a replay answers the
-- charge it acted on.
CREATE TABLE sandbox_hold_actions (
    id               TEXT    NOT NULL PRIMARY KEY,
    idempotency_key  TEXT    NOT NULL UNIQUE,
    charge_id        TEXT    NOT NULL REFERENCES sandbox_charges (id),
    kind             TEXT    NOT NULL CHECK (kind IN ('capture', 'void')),
    amount_minor     INTEGER NOT NULL,
    created_at       TEXT    NOT NULL
);
CREATE INDEX sandbox_hold_actions_charge ON sandbox_hold_actions (charge_id);

-- +goose Down
DROP TABLE sandbox_hold_actions;
DROP INDEX sandbox_charges_captured;
DROP INDEX sandbox_charges_hold;
ALTER TABLE sandbox_charges DROP COLUMN void_reason;
ALTER TABLE sandbox_charges DROP COLUMN voided_at;
ALTER TABLE sandbox_charges DROP COLUMN captured_at;
ALTER TABLE sandbox_charges DROP COLUMN capture_before;
ALTER TABLE sandbox_charges DROP COLUMN captured_minor;
ALTER TABLE sandbox_charges DROP COLUMN capture_method;
