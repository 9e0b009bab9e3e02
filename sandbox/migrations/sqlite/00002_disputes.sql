-- +goose Up
-- Disputes: a customer's bank takes a charge's money back while it decides
-- (open), then keeps it (lost) or gives it back (won). The charge keeps the
-- money its dispute holds, open and lost, so the one guarded UPDATE that
-- refunds a charge can also refuse a refund of disputed money.
-- dispute_at is when a pm_dispute charge's dispute is due to open: the
-- guarded UPDATE that clears it is what opens the dispute exactly once.
ALTER TABLE sandbox_charges ADD COLUMN dispute_at TEXT NULL;
ALTER TABLE sandbox_charges ADD COLUMN dispute_open_minor INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sandbox_charges ADD COLUMN dispute_lost_minor INTEGER NOT NULL DEFAULT 0;
CREATE INDEX sandbox_charges_dispute ON sandbox_charges (dispute_at);

CREATE TABLE sandbox_disputes (
    id               TEXT    NOT NULL PRIMARY KEY,
    -- A charge is disputed at most once.
    charge_id        TEXT    NOT NULL UNIQUE REFERENCES sandbox_charges (id),
    currency         TEXT    NOT NULL,
    amount_minor     INTEGER NOT NULL,
    status           TEXT    NOT NULL CHECK (status IN ('open', 'won', 'lost')),
    reason           TEXT    NOT NULL,
    created_at       TEXT    NOT NULL,
    closed_at        TEXT    NULL,
    updated_at       TEXT    NOT NULL
);
CREATE INDEX sandbox_disputes_created ON sandbox_disputes (created_at);

-- +goose Down
DROP TABLE sandbox_disputes;
DROP INDEX sandbox_charges_dispute;
ALTER TABLE sandbox_charges DROP COLUMN dispute_lost_minor;
ALTER TABLE sandbox_charges DROP COLUMN dispute_open_minor;
ALTER TABLE sandbox_charges DROP COLUMN dispute_at;
