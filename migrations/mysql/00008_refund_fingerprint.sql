-- +goose Up
-- The fingerprint of the admin request that created a manual refund under
-- its key (ADR 0011), as orders and customers keep theirs (00006). Once the
-- idempotency record is gone the refund row is the key's only memory: a
-- repeated refund is answered from it only if the fingerprint is the same.
-- NULL on automatic refunds and on rows stored before this column.
ALTER TABLE refunds ADD COLUMN request_fingerprint CHAR(64) NULL;

-- +goose Down
ALTER TABLE refunds DROP COLUMN request_fingerprint;
