-- +goose Up
-- Retention (PAYD_RETENTION, ADR 0062) deletes the deliveries that ended
-- longer ago than the retention, oldest first: this index finds them
-- without reading every delivery.
CREATE INDEX notify_deliveries_finished ON notify_deliveries (status, updated_at);

-- +goose Down
DROP INDEX notify_deliveries_finished ON notify_deliveries;
