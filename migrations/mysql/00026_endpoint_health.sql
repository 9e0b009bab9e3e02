-- +goose Up
-- An endpoint's health, as the operators' list of endpoints shows it
-- (repository.NotifyStore.EndpointHealth): its last attempted delivery is
-- found walking this index back from the newest change.
CREATE INDEX notify_deliveries_endpoint_updated ON notify_deliveries (endpoint_id, updated_at);

-- +goose Down
DROP INDEX notify_deliveries_endpoint_updated ON notify_deliveries;
