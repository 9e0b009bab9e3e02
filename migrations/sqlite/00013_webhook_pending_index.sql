-- +goose Up
-- Events stored but not yet applied (processed_at NULL) are the webhook
-- backlog the metrics export (payd_webhook_events_pending, ADR 0022): this
-- index lets the scrape count them without reading the whole inbox.
CREATE INDEX webhook_events_pending ON webhook_events (processed_at);

-- +goose Down
DROP INDEX webhook_events_pending;
