-- +goose Up
-- One row per window of scheduled reconciliation (PAYD_RECONCILE_EVERY,
-- ADR 0021), keyed by the window's end: inserting it claims the window for
-- one replica, the claim's lease lets another take over a window whose
-- claimer died, and run_id is set in the run's own transaction, guarded by
-- the claim, so each window is reconciled exactly once across replicas.
CREATE TABLE reconcile_windows (
    window_to     TEXT     NOT NULL PRIMARY KEY,
    window_from   TEXT     NOT NULL,
    claimed_by    TEXT     NOT NULL,
    locked_until  TEXT     NOT NULL,
    claims        INTEGER  NOT NULL DEFAULT 1,
    run_id        TEXT     NULL,
    created_at    TEXT     NOT NULL,
    finished_at   TEXT     NULL
);

-- +goose Down
DROP TABLE reconcile_windows;
