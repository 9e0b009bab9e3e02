-- +goose Up
-- The ledger: every movement of money of an order, whoever moved it,
-- appended once and never changed (ADR 0030). reference names the movement
-- at its source (charge:<id>, refund:<provider refund id>,
-- dispute:<id>:<step>); its unique index is what makes learning the same
-- movement twice record it once.
CREATE TABLE ledger_entries (
    id            TEXT    NOT NULL PRIMARY KEY,
    order_id      TEXT    NOT NULL,
    kind          TEXT    NOT NULL CHECK (kind IN ('charge', 'refund', 'outside_refund', 'dispute_opened', 'dispute_won', 'dispute_lost')),
    reference     TEXT    NOT NULL,
    charge_id     TEXT    NOT NULL,
    currency      TEXT    NOT NULL,
    amount_minor  INTEGER NOT NULL CHECK (amount_minor > 0),
    source        TEXT    NOT NULL CHECK (source IN ('pay_reply', 'webhook', 'recoverer', 'reconciliation', 'operator')),
    actor         TEXT    NOT NULL DEFAULT '',
    note          TEXT    NOT NULL DEFAULT '',
    created_at    TEXT    NOT NULL
);
CREATE UNIQUE INDEX ledger_entries_reference ON ledger_entries (reference);
CREATE INDEX ledger_entries_order ON ledger_entries (order_id, created_at);

-- Customers' disputes of charges. provider_dispute_id is unique: a dispute
-- is opened once however often the provider reports it; it closes once,
-- won or lost, by a guarded UPDATE (domain's dispute table).
CREATE TABLE disputes (
    id                   TEXT    NOT NULL PRIMARY KEY,
    provider_dispute_id  TEXT    NOT NULL,
    order_id             TEXT    NOT NULL,
    charge_id            TEXT    NOT NULL,
    status               TEXT    NOT NULL CHECK (status IN ('open', 'won', 'lost')),
    currency             TEXT    NOT NULL,
    amount_minor         INTEGER NOT NULL,
    reason               TEXT    NOT NULL DEFAULT '',
    opened_at            TEXT    NOT NULL,
    closed_at            TEXT    NULL,
    updated_at           TEXT    NOT NULL
);
CREATE UNIQUE INDEX disputes_provider_id ON disputes (provider_dispute_id);
CREATE INDEX disputes_order ON disputes (order_id, opened_at);
CREATE INDEX disputes_charge ON disputes (charge_id, status);
CREATE INDEX disputes_status ON disputes (status);

-- +goose Down
DROP TABLE disputes;
DROP TABLE ledger_entries;
