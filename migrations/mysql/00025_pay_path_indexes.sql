-- +goose Up
-- Two indexes of the pay path's event (repository/outbox.go, ADR 0053),
-- which every new pay writes (docs/performance.md, "The event's cost"):
--
-- The event carries the ledger's sums of its order, read by
-- ledger_entries_order. With each entry's currency, kind and amount in
-- the index, the read needs no row of the table. An order's entries keep
-- their order by created_at.
--
-- notify_events_created served no statement: fan-out, its backlog and
-- retention all read notify_events_fanout (fanned_out, created_at). It
-- was one more index to write for every event.
ALTER TABLE ledger_entries
    DROP INDEX ledger_entries_order,
    ADD INDEX ledger_entries_order (order_id, created_at, currency, kind, amount_minor);
DROP INDEX notify_events_created ON notify_events;

-- +goose Down
CREATE INDEX notify_events_created ON notify_events (created_at);
ALTER TABLE ledger_entries
    DROP INDEX ledger_entries_order,
    ADD INDEX ledger_entries_order (order_id, created_at);
