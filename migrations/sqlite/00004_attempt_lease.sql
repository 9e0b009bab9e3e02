-- +goose Up
-- Who works on an unsettled attempt right now: the recoverer of one replica,
-- or a request retrying its key. Until leased_until passes, nobody else may.
ALTER TABLE payment_attempts ADD COLUMN leased_until TEXT NULL;

-- +goose Down
ALTER TABLE payment_attempts DROP COLUMN leased_until;
