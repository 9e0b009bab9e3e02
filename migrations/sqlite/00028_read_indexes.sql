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
DROP INDEX ledger_entries_created;
CREATE INDEX ledger_entries_created ON ledger_entries (created_at, kind, currency, amount_minor);
CREATE INDEX notify_deliveries_endpoint_created ON notify_deliveries (endpoint_id, created_at, seq, id);
CREATE INDEX notify_deliveries_endpoint_status ON notify_deliveries (endpoint_id, status, created_at, seq, id);
DROP INDEX orders_paid_at;
CREATE INDEX orders_paid_at ON orders (paid_at, id);
CREATE INDEX refunds_succeeded ON refunds (status, created_at, id);

-- +goose Down
DROP INDEX refunds_succeeded;
DROP INDEX orders_paid_at;
CREATE INDEX orders_paid_at ON orders (paid_at);
DROP INDEX notify_deliveries_endpoint_status;
DROP INDEX notify_deliveries_endpoint_created;
DROP INDEX ledger_entries_created;
CREATE INDEX ledger_entries_created ON ledger_entries (created_at);
DROP INDEX payment_attempts_status_order;
DROP INDEX orders_created;
