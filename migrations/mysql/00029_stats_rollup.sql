-- +goose Up
-- The overview's rollup (repository/stats_rollup.go, ADR 0065): for each
-- UTC hour that is over, its attempts by status and its ledger entries by
-- kind and currency, so that 90 days by day read some 10,000 rows instead
-- of every attempt and entry of the 90 days. The overview reads the hours
-- rolled from here and the rest from the tables.
CREATE TABLE stats_attempt_hours (
    hour   DATETIME(6) NOT NULL,
    status VARCHAR(16) NOT NULL,
    n      BIGINT NOT NULL,
    PRIMARY KEY (hour, status)
);
CREATE TABLE stats_ledger_hours (
    hour         DATETIME(6) NOT NULL,
    kind         VARCHAR(32) NOT NULL,
    currency     CHAR(3) NOT NULL,
    n            BIGINT NOT NULL,
    amount_minor BIGINT NOT NULL,
    PRIMARY KEY (hour, kind, currency)
);
-- One row: every hour before rolled_through is in the tables above;
-- attempts changed before changes_seen (less a margin) have been rolled
-- again; leased_until is the lease of the replica rolling now.
CREATE TABLE stats_rollup (
    id             TINYINT NOT NULL PRIMARY KEY,
    rolled_through DATETIME(6) NOT NULL,
    changes_seen   DATETIME(6) NOT NULL,
    leased_until   DATETIME(6) NULL,
    CONSTRAINT stats_rollup_one CHECK (id = 1)
);
INSERT INTO stats_rollup (id, rolled_through, changes_seen) VALUES (1, '1970-01-01 00:00:00', '1970-01-01 00:00:00');
-- An attempt's status changes after its hour is rolled (a lost reply
-- resolved, a late charge adopted): the rollup finds the attempts changed
-- since its last pass, and their hours, in this index alone.
ALTER TABLE payment_attempts
    DROP INDEX payment_attempts_status,
    ADD INDEX payment_attempts_status (status, updated_at, created_at);

-- +goose Down
ALTER TABLE payment_attempts
    DROP INDEX payment_attempts_status,
    ADD INDEX payment_attempts_status (status, updated_at);
DROP TABLE stats_rollup;
DROP TABLE stats_ledger_hours;
DROP TABLE stats_attempt_hours;
