-- +goose Up
-- The ledger: every movement of money of an order, whoever moved it,
-- appended once and never changed (ADR 0030). reference names the movement
-- at its source (charge:<id>, refund:<provider refund id>,
-- dispute:<id>:<step>); its unique index is what makes learning the same
-- movement twice record it once.
CREATE TABLE ledger_entries (
    id            CHAR(36)     NOT NULL PRIMARY KEY,
    order_id      CHAR(36)     NOT NULL,
    kind          VARCHAR(16)  NOT NULL,
    reference     VARCHAR(255) NOT NULL,
    charge_id     VARCHAR(64)  NOT NULL,
    currency      CHAR(3)      NOT NULL,
    amount_minor  BIGINT       NOT NULL,
    source        VARCHAR(16)  NOT NULL,
    actor         VARCHAR(64)  NOT NULL DEFAULT '',
    note          VARCHAR(500) NOT NULL DEFAULT '',
    created_at    DATETIME(6)  NOT NULL,
    UNIQUE KEY ledger_entries_reference (reference),
    KEY ledger_entries_order (order_id, created_at),
    CONSTRAINT ledger_entries_kind CHECK (kind IN ('charge', 'refund', 'outside_refund', 'dispute_opened', 'dispute_won', 'dispute_lost')),
    CONSTRAINT ledger_entries_source CHECK (source IN ('pay_reply', 'webhook', 'recoverer', 'reconciliation', 'operator')),
    CONSTRAINT ledger_entries_amount CHECK (amount_minor > 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Customers' disputes of charges. provider_dispute_id is unique: a dispute
-- is opened once however often the provider reports it; it closes once,
-- won or lost, by a guarded UPDATE (domain's dispute table).
CREATE TABLE disputes (
    id                   CHAR(36)     NOT NULL PRIMARY KEY,
    provider_dispute_id  VARCHAR(255) NOT NULL,
    order_id             CHAR(36)     NOT NULL,
    charge_id            VARCHAR(64)  NOT NULL,
    status               VARCHAR(8)   NOT NULL,
    currency             CHAR(3)      NOT NULL,
    amount_minor         BIGINT       NOT NULL,
    reason               VARCHAR(64)  NOT NULL DEFAULT '',
    opened_at            DATETIME(6)  NOT NULL,
    closed_at            DATETIME(6)  NULL,
    updated_at           DATETIME(6)  NOT NULL,
    UNIQUE KEY disputes_provider_id (provider_dispute_id),
    KEY disputes_order (order_id, opened_at),
    KEY disputes_charge (charge_id, status),
    KEY disputes_status (status),
    CONSTRAINT disputes_status CHECK (status IN ('open', 'won', 'lost'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE disputes;
DROP TABLE ledger_entries;
