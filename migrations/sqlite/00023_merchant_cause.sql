-- +goose Up
-- A change the merchant's server made with its key (a cancel) is told to
-- the shop as the merchant's doing: cause 'merchant' (ADR 0059). SQLite
-- cannot change a CHECK in place: notify_events is built again, as 00020
-- did.
CREATE TABLE notify_events_new (
    id                      TEXT     NOT NULL PRIMARY KEY,
    order_id                TEXT     NOT NULL,
    seq                     INTEGER  NOT NULL,
    type                    TEXT     NOT NULL,
    cause                   TEXT     NOT NULL,
    cause_ref               TEXT     NOT NULL DEFAULT '',
    order_status            TEXT     NOT NULL,
    pay_request_id          TEXT     NULL,
    paid_at                 TEXT     NULL,
    refunded_minor          INTEGER  NOT NULL,
    order_updated_at        TEXT     NOT NULL,
    charged_minor           INTEGER  NOT NULL,
    books_refunded_minor    INTEGER  NOT NULL,
    disputed_minor          INTEGER  NOT NULL,
    lost_minor              INTEGER  NOT NULL,
    body                    BLOB     NULL,
    fanned_out              INTEGER  NOT NULL DEFAULT 0,
    created_at              TEXT     NOT NULL,
    CONSTRAINT notify_events_type CHECK (type IN ('order.paid', 'order.payment_failed', 'order.cancelled', 'order.expired', 'order.refunded', 'order.disputed', 'order.dispute_closed', 'order.refund_reversed')),
    CONSTRAINT notify_events_cause CHECK (cause IN ('pay_request', 'webhook', 'operator', 'recoverer', 'expiry', 'reconciliation', 'customer', 'merchant'))
);

INSERT INTO notify_events_new (id, order_id, seq, type, cause, cause_ref, order_status, pay_request_id, paid_at, refunded_minor, order_updated_at, charged_minor, books_refunded_minor, disputed_minor, lost_minor, body, fanned_out, created_at)
    SELECT id, order_id, seq, type, cause, cause_ref, order_status, pay_request_id, paid_at, refunded_minor, order_updated_at, charged_minor, books_refunded_minor, disputed_minor, lost_minor, body, fanned_out, created_at FROM notify_events;

DROP TABLE notify_events;
ALTER TABLE notify_events_new RENAME TO notify_events;

CREATE UNIQUE INDEX notify_events_order_seq ON notify_events (order_id, seq);
CREATE INDEX notify_events_fanout ON notify_events (fanned_out, created_at);
CREATE INDEX notify_events_created ON notify_events (created_at);

-- +goose Down
-- The wider CHECK stays: a row of the new cause would make the narrow one
-- fail.
SELECT 1;
