-- +goose Up
-- Confirmed money apart from reservations (ADR 0055). refunded_minor is
-- from now on only what the provider confirmed given back;
-- refund_reserved_minor is what payd's refunds in flight reserved. Until
-- now a reservation was added to refunded_minor, so an order with a
-- refund in flight read as refunded before the provider had said so.
ALTER TABLE orders ADD COLUMN refund_reserved_minor BIGINT NOT NULL DEFAULT 0,
    ADD CONSTRAINT orders_refund_reserved CHECK (refund_reserved_minor >= 0);

-- The reservations of the refunds still in flight move to their column;
-- an order that read refunded only by them is paid again. status is
-- assigned first: MariaDB assigns left to right, so its CASE reads the
-- old refunded_minor.
UPDATE orders SET refund_reserved_minor = (
    SELECT COALESCE(SUM(r.amount_minor), 0) FROM refunds r
    WHERE r.order_id = orders.id AND r.kind = 'manual' AND r.status = 'pending');
UPDATE orders
    SET status = CASE WHEN status = 'refunded' AND refunded_minor - refund_reserved_minor < amount_minor THEN 'paid' ELSE status END,
        refunded_minor = GREATEST(refunded_minor - refund_reserved_minor, 0)
    WHERE refund_reserved_minor > 0;

-- A refund the provider took back after confirming it, and the reports
-- of books repaired and of disputes larger than what was left.
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_kind;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_kind CHECK (kind IN ('charge', 'refund', 'outside_refund', 'dispute_opened', 'dispute_won', 'dispute_lost', 'refund_reversed'));
ALTER TABLE discrepancies DROP CONSTRAINT discrepancies_type;
ALTER TABLE discrepancies ADD CONSTRAINT discrepancies_type CHECK (type IN ('missing_local_payment', 'missing_provider_charge', 'amount_mismatch', 'duplicate_charge', 'stuck_processing', 'paid_after_close', 'disputed', 'refund_missing_locally', 'refund_missing_at_provider', 'refund_amount_mismatch', 'unconfirmed_payment', 'refund_reversed', 'order_books_repaired', 'dispute_exceeds_remaining'));
ALTER TABLE notify_events DROP CONSTRAINT notify_events_type;
ALTER TABLE notify_events ADD CONSTRAINT notify_events_type CHECK (type IN ('order.paid', 'order.payment_failed', 'order.cancelled', 'order.expired', 'order.refunded', 'order.disputed', 'order.dispute_closed', 'order.refund_reversed'));

-- +goose Down
ALTER TABLE notify_events DROP CONSTRAINT notify_events_type;
ALTER TABLE notify_events ADD CONSTRAINT notify_events_type CHECK (type IN ('order.paid', 'order.payment_failed', 'order.cancelled', 'order.expired', 'order.refunded', 'order.disputed', 'order.dispute_closed'));
ALTER TABLE discrepancies DROP CONSTRAINT discrepancies_type;
ALTER TABLE discrepancies ADD CONSTRAINT discrepancies_type CHECK (type IN ('missing_local_payment', 'missing_provider_charge', 'amount_mismatch', 'duplicate_charge', 'stuck_processing', 'paid_after_close', 'disputed', 'refund_missing_locally', 'refund_missing_at_provider', 'refund_amount_mismatch', 'unconfirmed_payment'));
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_kind;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_kind CHECK (kind IN ('charge', 'refund', 'outside_refund', 'dispute_opened', 'dispute_won', 'dispute_lost'));
UPDATE orders
    SET status = CASE WHEN status = 'paid' AND refunded_minor + refund_reserved_minor >= amount_minor THEN 'refunded' ELSE status END,
        refunded_minor = LEAST(refunded_minor + refund_reserved_minor, amount_minor);
ALTER TABLE orders DROP CONSTRAINT orders_refund_reserved, DROP COLUMN refund_reserved_minor;
