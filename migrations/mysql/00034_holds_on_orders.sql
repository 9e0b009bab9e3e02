-- +goose Up
-- Holds on the order (ADR 0060; 00033 made their actions): status
-- authorized, the money held until capture_before; hold_action is the
-- action that owns the hold (claimed by a guarded UPDATE, as a pay claims
-- an order); captured_minor is what a manual order's capture took.
ALTER TABLE orders DROP CONSTRAINT orders_status;
ALTER TABLE orders ADD CONSTRAINT orders_status CHECK (status IN ('pending', 'processing', 'authorized', 'paid', 'refunded', 'cancelled', 'expired')),
    ADD COLUMN capture_method VARCHAR(16) NOT NULL DEFAULT 'automatic',
    ADD COLUMN capture_before DATETIME(6) NULL,
    ADD COLUMN captured_minor BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN hold_action CHAR(36) NULL,
    ADD CONSTRAINT orders_capture_method CHECK (capture_method IN ('automatic', 'manual')),
    ADD CONSTRAINT orders_captured CHECK (captured_minor >= 0 AND captured_minor <= amount_minor),
    -- The job's work: authorized orders by when their hold lapses.
    ADD KEY orders_hold (status, capture_before);

-- The ledger records a hold (hold) and its end (hold_released), and the
-- merchant is told of an authorization (order.authorized).
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_kind;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_kind CHECK (kind IN ('charge', 'refund', 'outside_refund', 'dispute_opened', 'dispute_won', 'dispute_lost', 'refund_reversed', 'hold', 'hold_released'));
-- An event keeps the hold as the change left it, as it keeps the rest of
-- the order's moving columns.
ALTER TABLE notify_events ADD COLUMN captured_minor BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN capture_before DATETIME(6) NULL,
    ADD COLUMN authorized_minor BIGINT NOT NULL DEFAULT 0;
ALTER TABLE notify_events DROP CONSTRAINT notify_events_type;
ALTER TABLE notify_events ADD CONSTRAINT notify_events_type CHECK (type IN ('order.paid', 'order.payment_failed', 'order.cancelled', 'order.expired', 'order.refunded', 'order.disputed', 'order.dispute_closed', 'order.refund_reversed', 'order.shipped', 'order.authorized'));

-- +goose Down
-- The wider ledger and event CHECKs and the event's columns stay (as
-- 00032's did): a row of a new kind or type would make a narrow CHECK fail.
-- An order held or captured by hand has no status the older payd knows:
-- it cannot go down (the CHECK fails) until it is settled.
ALTER TABLE orders DROP CONSTRAINT orders_status;
ALTER TABLE orders ADD CONSTRAINT orders_status CHECK (status IN ('pending', 'processing', 'paid', 'refunded', 'cancelled', 'expired')),
    DROP KEY orders_hold,
    DROP CONSTRAINT orders_captured,
    DROP CONSTRAINT orders_capture_method,
    DROP COLUMN hold_action,
    DROP COLUMN captured_minor,
    DROP COLUMN capture_before,
    DROP COLUMN capture_method;
