-- +goose Up
-- One row per window of scheduled reconciliation (PAYD_RECONCILE_EVERY,
-- ADR 0021), keyed by the window's end: inserting it claims the window for
-- one replica, the claim's lease lets another take over a window whose
-- claimer died, and run_id is set in the run's own transaction, guarded by
-- the claim, so each window is reconciled exactly once across replicas.
CREATE TABLE reconcile_windows (
    window_to     DATETIME(6)  NOT NULL PRIMARY KEY,
    window_from   DATETIME(6)  NOT NULL,
    claimed_by    CHAR(36)     NOT NULL,
    locked_until  DATETIME(6)  NOT NULL,
    claims        INT          NOT NULL DEFAULT 1,
    run_id        CHAR(36)     NULL,
    created_at    DATETIME(6)  NOT NULL,
    finished_at   DATETIME(6)  NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE reconcile_windows;
