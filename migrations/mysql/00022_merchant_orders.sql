-- +goose Up
-- Orders the merchant creates (ADR 0059). An order may have no customer
-- (a guest's, created by the merchant's server), so customer_id may be
-- NULL; creator is who created it, as an idempotency scope
-- ('customer:<id>' or 'merchant'), and a creation key is unique within
-- its creator, not within a customer: the merchant's key K and a
-- customer's key K are different requests. order_items.stock_taken is how
-- many of a line's units were taken from the product's counted stock when
-- the order was created: what a cancel or an expiry gives back, once. An
-- order stored before this keeps its customer, creator 'customer:<id>',
-- and lines that took nothing from stock.
ALTER TABLE orders MODIFY customer_id CHAR(36) NULL;
ALTER TABLE orders ADD COLUMN creator VARCHAR(80) NOT NULL DEFAULT '';
UPDATE orders SET creator = CONCAT('customer:', customer_id);
ALTER TABLE orders ALTER COLUMN creator DROP DEFAULT;
DROP INDEX orders_create_request_id ON orders;
CREATE UNIQUE INDEX orders_create_request_id ON orders (creator, create_request_id);
ALTER TABLE order_items ADD COLUMN stock_taken BIGINT NOT NULL DEFAULT 0,
    ADD CONSTRAINT order_items_stock_taken CHECK (stock_taken >= 0);

-- +goose Down
-- An order without a customer has no place in the schema before this:
-- going down fails while one exists, rather than losing it.
ALTER TABLE order_items DROP CONSTRAINT order_items_stock_taken, DROP COLUMN stock_taken;
DROP INDEX orders_create_request_id ON orders;
CREATE UNIQUE INDEX orders_create_request_id ON orders (customer_id, create_request_id);
ALTER TABLE orders DROP COLUMN creator;
ALTER TABLE orders MODIFY customer_id CHAR(36) NOT NULL;
