-- +goose Up
-- A reconciliation run that payd did not finish resumes from here
-- (ADR 0068): one row per run in progress, found again by its resume key
-- (a hash of the request's idempotency key and fingerprint, or of the
-- scheduled window), and one row per page of charges it has decided.
-- owner is the process running it now: taking the run over moves it, and
-- the run that lost it writes no more pages and records nothing.
-- recorded_at is set, and the pages deleted, in the transaction that
-- records the run: asked again, the run answers what it recorded.
CREATE TABLE reconciliation_checkpoints (
    resume_key     TEXT NOT NULL PRIMARY KEY,
    run_id         TEXT NOT NULL,
    owner          TEXT NOT NULL,
    run_created_at TEXT NOT NULL,
    recorded_at    TEXT NULL,
    updated_at     TEXT NOT NULL
);
CREATE INDEX idx_reconciliation_checkpoints_updated ON reconciliation_checkpoints (updated_at);
-- A page's body is what the run learned from it (the keys of its
-- successful charges, how many matched, the charges that disagreed, to be
-- decided again on resuming), as JSON; after_page is the cursor of the
-- page that follows it, and last_page marks the final page.
CREATE TABLE reconciliation_checkpoint_pages (
    resume_key  TEXT    NOT NULL,
    page        INTEGER NOT NULL CHECK (page > 0),
    after_page  TEXT    NOT NULL,
    last_page   INTEGER NOT NULL CHECK (last_page IN (0, 1)),
    body        TEXT    NOT NULL,
    PRIMARY KEY (resume_key, page)
);

-- +goose Down
DROP TABLE reconciliation_checkpoint_pages;
DROP TABLE reconciliation_checkpoints;
