-- +goose Up
-- Holds: a manual-capture charge that succeeds is authorized, its money
-- held until capture_before. One capture takes up to the held amount
-- (captured_minor; the rest is released), or a void (or the hold lapsing)
-- gives it all up: status authorized -> succeeded or voided, each by one
-- guarded UPDATE, so a capture and a void that race have one winner.
-- An automatic charge keeps captured_minor 0: it took its whole amount.
ALTER TABLE sandbox_charges ADD COLUMN capture_method TEXT NOT NULL DEFAULT 'automatic';
ALTER TABLE sandbox_charges ADD COLUMN captured_minor INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sandbox_charges ADD COLUMN capture_before TEXT NULL;
CREATE INDEX sandbox_charges_hold ON sandbox_charges (status, capture_before);

-- Every capture and void request, once per idempotency key: a repeat of
-- the key answers the charge as it is now, another request under it is
-- refused (422 idempotency_key_reused).
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
DROP INDEX sandbox_charges_hold;
ALTER TABLE sandbox_charges DROP COLUMN capture_before;
ALTER TABLE sandbox_charges DROP COLUMN captured_minor;
ALTER TABLE sandbox_charges DROP COLUMN capture_method;
