-- +goose Up
-- A job that must run on one replica at a time holds its row here
-- (repository/leases.go): the idempotency purge, whose batches from two
-- replicas at once deadlocked a request re-inserting a record the other
-- had just deleted. holder is the pass's own token, so a pass never
-- releases another's lease.
CREATE TABLE job_leases (
    name         TEXT NOT NULL PRIMARY KEY,
    holder       TEXT NULL,
    leased_until TEXT NULL
);
INSERT INTO job_leases (name) VALUES ('purge_idempotency');

-- +goose Down
DROP TABLE job_leases;
