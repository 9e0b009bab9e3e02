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
    resume_key     CHAR(64)    NOT NULL PRIMARY KEY,
    run_id         CHAR(36)    NOT NULL,
    owner          CHAR(36)    NOT NULL,
    run_created_at DATETIME(6) NOT NULL,
    recorded_at    DATETIME(6) NULL,
    updated_at     DATETIME(6) NOT NULL,
    KEY idx_reconciliation_checkpoints_updated (updated_at)
);
-- A page's body is what the run learned from it (the keys of its
-- successful charges, how many matched, the charges that disagreed, to be
-- decided again on resuming), as JSON; after_page is the cursor of the
-- page that follows it, and last_page marks the final page.
CREATE TABLE reconciliation_checkpoint_pages (
    resume_key  CHAR(64)     NOT NULL,
    page        INT          NOT NULL,
    after_page  VARCHAR(255) NOT NULL,
    last_page   BOOLEAN      NOT NULL,
    body        MEDIUMTEXT   NOT NULL,
    PRIMARY KEY (resume_key, page),
    CHECK (page > 0)
);

-- +goose Down
DROP TABLE reconciliation_checkpoint_pages;
DROP TABLE reconciliation_checkpoints;
