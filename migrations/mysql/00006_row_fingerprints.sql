-- +goose Up
-- The fingerprint (SHA-256 over method, path and canonical body, as the
-- idempotency record has it) of the request that created the row under a
-- key. Once the record has expired or been purged, the row is the only
-- memory of that key: a repeated request is answered from the row only if
-- its fingerprint is the same. NULL on rows stored before this column:
-- unknown, so a fallback compares what it can (an order's cart) and never
-- hands out a customer's token.
ALTER TABLE orders ADD COLUMN create_fingerprint CHAR(64) NULL;
ALTER TABLE customers ADD COLUMN request_fingerprint CHAR(64) NULL;

-- +goose Down
ALTER TABLE customers DROP COLUMN request_fingerprint;
ALTER TABLE orders DROP COLUMN create_fingerprint;
