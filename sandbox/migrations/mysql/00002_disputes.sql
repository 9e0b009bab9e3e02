-- +goose Up
-- Disputes: a customer's bank takes a charge's money back while it decides
-- (open), then keeps it (lost) or gives it back (won). The charge keeps the
-- money its dispute holds, open and lost, so the one guarded UPDATE that
-- refunds a charge can also refuse a refund of disputed money.
-- dispute_at is when a pm_dispute charge's dispute is due to open: the
-- guarded UPDATE that clears it is what opens the dispute exactly once.
ALTER TABLE sandbox_charges
    ADD COLUMN dispute_at          DATETIME(6) NULL,
    ADD COLUMN dispute_open_minor  BIGINT      NOT NULL DEFAULT 0,
    ADD COLUMN dispute_lost_minor  BIGINT      NOT NULL DEFAULT 0,
    ADD KEY sandbox_charges_dispute (dispute_at);

CREATE TABLE sandbox_disputes (
    id               VARCHAR(64)  NOT NULL PRIMARY KEY,
    charge_id        VARCHAR(64)  NOT NULL,
    currency         CHAR(3)      NOT NULL,
    amount_minor     BIGINT       NOT NULL,
    status           VARCHAR(8)   NOT NULL,
    reason           VARCHAR(64)  NOT NULL,
    created_at       DATETIME(6)  NOT NULL,
    closed_at        DATETIME(6)  NULL,
    updated_at       DATETIME(6)  NOT NULL,
    -- A charge is disputed at most once.
    UNIQUE KEY sandbox_disputes_charge (charge_id),
    KEY sandbox_disputes_created (created_at),
    CONSTRAINT sandbox_disputes_charge_fk FOREIGN KEY (charge_id) REFERENCES sandbox_charges (id),
    CONSTRAINT sandbox_disputes_status CHECK (status IN ('open', 'won', 'lost'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE sandbox_disputes;
ALTER TABLE sandbox_charges
    DROP KEY sandbox_charges_dispute,
    DROP COLUMN dispute_lost_minor,
    DROP COLUMN dispute_open_minor,
    DROP COLUMN dispute_at;
