-- +goose Up
-- Shipments (ADR 0060): a paid order ships in one or more parcels. The
-- order's fulfillment_status is a machine of its own beside its status
-- (domain.FulfillmentMachine), and each line counts what was shipped of
-- it: a shipment raises a line's shipped by a guarded statement, and the
-- CHECK holds it to the line's quantity whatever the code does. A
-- shipment never changes once written. It keeps the idempotency key it
-- was made under and the request's fingerprint: a request that runs
-- again after its answer was lost (a takeover, a kill after COMMIT)
-- finds it, and ships nothing twice. The event that tells the shop of
-- a shipment names it (shipment_id), and every event carries the order's
-- fulfillment_status as the change left it: every event written before
-- this migration was of an order nothing had been shipped of.
ALTER TABLE orders ADD COLUMN fulfillment_status VARCHAR(20) NOT NULL DEFAULT 'unfulfilled',
    ADD CONSTRAINT orders_fulfillment_status CHECK (fulfillment_status IN ('unfulfilled', 'partially_shipped', 'shipped'));

ALTER TABLE order_items ADD COLUMN shipped BIGINT NOT NULL DEFAULT 0,
    ADD CONSTRAINT order_items_shipped CHECK (shipped >= 0 AND shipped <= quantity);

CREATE TABLE shipments (
    id               CHAR(36)     NOT NULL PRIMARY KEY,
    order_id         CHAR(36)     NOT NULL,
    carrier          VARCHAR(200) NOT NULL DEFAULT '',
    tracking_number  VARCHAR(200) NOT NULL DEFAULT '',
    request_key      VARCHAR(255) NULL,
    request_fingerprint CHAR(64)  NULL,
    created_at       DATETIME(6)  NOT NULL,
    KEY shipments_order (order_id, created_at),
    UNIQUE KEY shipments_request (order_id, request_key),
    CONSTRAINT shipments_order_fk FOREIGN KEY (order_id) REFERENCES orders (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE shipment_items (
    shipment_id  CHAR(36)    NOT NULL,
    position     INT         NOT NULL,
    sku          VARCHAR(64) NOT NULL,
    quantity     BIGINT      NOT NULL,
    PRIMARY KEY (shipment_id, position),
    CONSTRAINT shipment_items_quantity CHECK (quantity > 0),
    CONSTRAINT shipment_items_shipment_fk FOREIGN KEY (shipment_id) REFERENCES shipments (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

ALTER TABLE notify_events ADD COLUMN fulfillment_status VARCHAR(20) NOT NULL DEFAULT 'unfulfilled',
    ADD COLUMN shipment_id CHAR(36) NULL;
ALTER TABLE notify_events DROP CONSTRAINT notify_events_type;
ALTER TABLE notify_events ADD CONSTRAINT notify_events_type CHECK (type IN ('order.paid', 'order.payment_failed', 'order.cancelled', 'order.expired', 'order.refunded', 'order.disputed', 'order.dispute_closed', 'order.refund_reversed', 'order.shipped'));

-- +goose Down
-- The wider type CHECK stays: a row of the new type would make the narrow
-- one fail.
ALTER TABLE notify_events DROP COLUMN shipment_id, DROP COLUMN fulfillment_status;
DROP TABLE shipment_items;
DROP TABLE shipments;
ALTER TABLE order_items DROP CONSTRAINT order_items_shipped, DROP COLUMN shipped;
ALTER TABLE orders DROP CONSTRAINT orders_fulfillment_status, DROP COLUMN fulfillment_status;
