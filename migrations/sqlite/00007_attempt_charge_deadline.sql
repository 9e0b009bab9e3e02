-- +goose Up
-- When the last charge request sent under an attempt's key gives up at the
-- latest (its send time plus the provider timeout). Until then, and a margin
-- after, the charge may still reach the provider, so its "not found" proves
-- nothing. NULL on attempts from before this column: their sender's deadline
-- is taken as updated_at plus the provider timeout.
ALTER TABLE payment_attempts ADD COLUMN charge_deadline TEXT NULL;

-- +goose Down
ALTER TABLE payment_attempts DROP COLUMN charge_deadline;
