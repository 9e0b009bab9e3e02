-- +goose Up
-- Every status column holds only the statuses of its machine in domain
-- (ADR 0032), as disputes.status and the ledger's kind and source already
-- do: a row no machine knows cannot be written, whoever writes it. A test
-- holds these lists to domain's tables (TestStatusChecksMatchDomain).
-- MariaDB enforces CHECK, and checks the rows already there when one is added.

-- an order's status: domain's order machine
ALTER TABLE orders ADD CONSTRAINT orders_status CHECK (status IN ('pending', 'processing', 'paid', 'refunded', 'cancelled', 'expired'));

-- an attempt's status: domain's attempt machine
ALTER TABLE payment_attempts ADD CONSTRAINT payment_attempts_status CHECK (status IN ('started', 'succeeded', 'failed', 'unknown', 'held'));

-- an idempotency record's status: domain's record machine
ALTER TABLE idempotency_records ADD CONSTRAINT idempotency_records_status CHECK (status IN ('processing', 'succeeded', 'failed'));

-- a refund's status: domain's refund machine
ALTER TABLE refunds ADD CONSTRAINT refunds_status CHECK (status IN ('pending', 'succeeded', 'failed'));

-- a refund's kind
ALTER TABLE refunds ADD CONSTRAINT refunds_kind CHECK (kind IN ('manual', 'auto'));

-- a discrepancy's status: domain's discrepancy machine
ALTER TABLE discrepancies ADD CONSTRAINT discrepancies_status CHECK (status IN ('open', 'resolving', 'resolved'));

-- +goose Down
ALTER TABLE discrepancies DROP CONSTRAINT discrepancies_status;
ALTER TABLE refunds DROP CONSTRAINT refunds_kind;
ALTER TABLE refunds DROP CONSTRAINT refunds_status;
ALTER TABLE idempotency_records DROP CONSTRAINT idempotency_records_status;
ALTER TABLE payment_attempts DROP CONSTRAINT payment_attempts_status;
ALTER TABLE orders DROP CONSTRAINT orders_status;
