-- +goose Up
-- The operators' reads stay one page of work however many orders there
-- are (docs/performance.md, "As the data grows"):
--
-- orders_created pages a time window newest first (OrderStore.List): the
-- window's first page reads its newest rows, not every order since.
-- payment_attempts_status_order pages the orders that have an attempt of
-- one status (attempt=failed) from the attempts, newest order first.
-- ledger_entries_created holds the kind, currency and amount, so the
-- overview's money is read from the index alone.
-- notify_deliveries_endpoint_created and _status list an endpoint's
-- deliveries, of every status or of one, newest first, without a sort.
-- orders_paid_at and refunds_succeeded page a reconciliation's window
-- by time, then ID (ListPaidBetween, ListSucceededBetween).
CREATE INDEX orders_created ON orders (created_at, id);
CREATE INDEX payment_attempts_status_order ON payment_attempts (status, order_id);
ALTER TABLE ledger_entries
    DROP INDEX ledger_entries_created,
    ADD INDEX ledger_entries_created (created_at, kind, currency, amount_minor);
CREATE INDEX notify_deliveries_endpoint_created ON notify_deliveries (endpoint_id, created_at, seq, id);
CREATE INDEX notify_deliveries_endpoint_status ON notify_deliveries (endpoint_id, status, created_at, seq, id);
ALTER TABLE orders
    DROP INDEX orders_paid_at,
    ADD INDEX orders_paid_at (paid_at, id);
CREATE INDEX refunds_succeeded ON refunds (status, created_at, id);

-- +goose Down
DROP INDEX refunds_succeeded ON refunds;
ALTER TABLE orders
    DROP INDEX orders_paid_at,
    ADD INDEX orders_paid_at (paid_at);
DROP INDEX notify_deliveries_endpoint_status ON notify_deliveries;
DROP INDEX notify_deliveries_endpoint_created ON notify_deliveries;
ALTER TABLE ledger_entries
    DROP INDEX ledger_entries_created,
    ADD INDEX ledger_entries_created (created_at);
DROP INDEX payment_attempts_status_order ON payment_attempts;
DROP INDEX orders_created ON orders;
