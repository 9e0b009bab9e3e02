-- +goose Up
-- The idempotency key an order was created under (optional), so a repeated
-- creation resolves to the same order even after its idempotency record is
-- gone or its first execution died before storing the response.
ALTER TABLE orders ADD COLUMN create_request_id VARCHAR(255) NULL;
CREATE UNIQUE INDEX orders_create_request_id ON orders (customer_id, create_request_id);

-- +goose Down
DROP INDEX orders_create_request_id ON orders;
ALTER TABLE orders DROP COLUMN create_request_id;
