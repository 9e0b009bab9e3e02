-- +goose Up
-- Holds (ADR 0060). A manual-capture order's pay only authorizes it; then
-- one hold action at a time (a capture, a cancel's void, the job's lapse)
-- owns the hold and asks the provider under its own key. hold_actions
-- records each, so a retry or the job asks again under that key before
-- anything else. payment_attempts.capture_method is what the attempt asked
-- the provider for: asking again about an attempt repeats its very
-- request. The order's own columns come with 00034.
ALTER TABLE payment_attempts ADD COLUMN capture_method TEXT NOT NULL DEFAULT 'automatic'
    CONSTRAINT payment_attempts_capture_method CHECK (capture_method IN ('automatic', 'manual'));

CREATE TABLE hold_actions (
    id            TEXT    NOT NULL PRIMARY KEY,
    order_id      TEXT    NOT NULL REFERENCES orders (id),
    kind          TEXT    NOT NULL CONSTRAINT hold_actions_kind CHECK (kind IN ('capture', 'void', 'lapse')),
    status        TEXT    NOT NULL CONSTRAINT hold_actions_status CHECK (status IN ('started', 'succeeded', 'failed', 'unknown')),
    amount_minor  INTEGER NOT NULL DEFAULT 0 CONSTRAINT hold_actions_amount CHECK (amount_minor >= 0),
    currency      TEXT    NOT NULL,
    request_id    TEXT    NULL,
    failure_code  TEXT    NULL,
    leased_until  TEXT    NULL,
    created_at    TEXT    NOT NULL,
    updated_at    TEXT    NOT NULL
);
CREATE INDEX hold_actions_order ON hold_actions (order_id, created_at);
CREATE INDEX hold_actions_unsettled ON hold_actions (status, leased_until);

-- +goose Down
DROP TABLE hold_actions;
ALTER TABLE payment_attempts DROP COLUMN capture_method;
