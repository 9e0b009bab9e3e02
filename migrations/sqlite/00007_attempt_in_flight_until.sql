-- +goose Up
-- Until when a charge request sent under the attempt's key may still reach
-- the provider: its deadline (sent at + PAYD_PROVIDER_TIMEOUT) plus the
-- sender's margin (ADR 9). Until then the provider's "not found" proves
-- nothing. NULL on attempts from before this column: updated_at plus the
-- timeout and margin of whoever looks stands in.
ALTER TABLE payment_attempts ADD COLUMN in_flight_until TEXT NULL;

-- +goose Down
ALTER TABLE payment_attempts DROP COLUMN in_flight_until;
