-- +goose Up
-- A change the merchant's server made with its key (a cancel) is told to
-- the shop as the merchant's doing: cause 'merchant' (ADR 0059).
ALTER TABLE notify_events DROP CONSTRAINT notify_events_cause;
ALTER TABLE notify_events ADD CONSTRAINT notify_events_cause CHECK (cause IN ('pay_request', 'webhook', 'operator', 'recoverer', 'expiry', 'reconciliation', 'customer', 'merchant'));

-- +goose Down
-- The wider CHECK stays: a row of the new cause would make the narrow one
-- fail.
SELECT 1;
