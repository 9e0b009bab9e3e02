-- +goose Up
-- The merchant's catalogue (ADR 0058). Prices are integer minor units of
-- the product's currency, as every amount payd stores. stock NULL is
-- unlimited; a counted stock never goes below 0: the CHECK holds it, and
-- every change is one guarded UPDATE (stock + ? >= 0) judged by its
-- matched rows. active 0 hides a product from buyers.
CREATE TABLE products (
    sku               TEXT     NOT NULL PRIMARY KEY,
    name              TEXT     NOT NULL,
    unit_price_minor  INTEGER  NOT NULL CONSTRAINT products_unit_price CHECK (unit_price_minor > 0),
    currency          TEXT     NOT NULL,
    stock             INTEGER  NULL CONSTRAINT products_stock CHECK (stock >= 0),
    active            INTEGER  NOT NULL DEFAULT 1,
    created_at        TEXT     NOT NULL,
    updated_at        TEXT     NOT NULL
);

-- The storefront's list: active products, by SKU.
CREATE INDEX products_active_sku ON products (active, sku);

-- +goose Down
DROP TABLE products;
