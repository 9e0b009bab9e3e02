-- +goose Up
-- The operators' overview (GET /v1/admin/stats) counts the attempts and the
-- ledger entries created in a window: these indexes serve its range of
-- created_at, so it reads the window, not the whole table. The attempts'
-- index holds the status too, so their count reads the index alone.
CREATE INDEX payment_attempts_created ON payment_attempts (created_at, status);
CREATE INDEX ledger_entries_created ON ledger_entries (created_at);

-- +goose Down
DROP INDEX ledger_entries_created ON ledger_entries;
DROP INDEX payment_attempts_created ON payment_attempts;
