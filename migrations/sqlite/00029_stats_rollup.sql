-- +goose Up
-- The overview's rollup (repository/stats_rollup.go, ADR 0065): for each
-- UTC hour that is over, its attempts by status and its ledger entries by
-- kind and currency, so that 90 days by day read some 10,000 rows instead
-- of every attempt and entry of the 90 days. The overview reads the hours
-- rolled from here and the rest from the tables.
CREATE TABLE stats_attempt_hours (
    hour   TEXT NOT NULL,
    status TEXT NOT NULL,
    n      INTEGER NOT NULL,
    PRIMARY KEY (hour, status)
);
CREATE TABLE stats_ledger_hours (
    hour         TEXT NOT NULL,
    kind         TEXT NOT NULL,
    currency     TEXT NOT NULL,
    n            INTEGER NOT NULL,
    amount_minor INTEGER NOT NULL,
    PRIMARY KEY (hour, kind, currency)
);
-- One row: every hour before rolled_through is in the tables above;
-- attempts changed before changes_seen (less a margin) have been rolled
-- again; leased_until is the lease of the replica rolling now.
CREATE TABLE stats_rollup (
    id             INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    rolled_through TEXT NOT NULL,
    changes_seen   TEXT NOT NULL,
    leased_until   TEXT NULL
);
INSERT INTO stats_rollup (id, rolled_through, changes_seen) VALUES (1, '1970-01-01 00:00:00.000000', '1970-01-01 00:00:00.000000');
-- An attempt's status changes after its hour is rolled (a lost reply
-- resolved, a late charge adopted): the rollup finds the attempts changed
-- since its last pass, and their hours, in this index alone.
DROP INDEX payment_attempts_status;
CREATE INDEX payment_attempts_status ON payment_attempts (status, updated_at, created_at);

-- +goose Down
DROP INDEX payment_attempts_status;
CREATE INDEX payment_attempts_status ON payment_attempts (status, updated_at);
DROP TABLE stats_rollup;
DROP TABLE stats_ledger_hours;
DROP TABLE stats_attempt_hours;
