-- +goose Up
-- The merchant's catalogue (ADR 0058). Prices are integer minor units of
-- the product's currency, as every amount payd stores. stock NULL is
-- unlimited; a counted stock never goes below 0: the CHECK holds it, and
-- every change is one guarded UPDATE (stock + ? >= 0) judged by its
-- matched rows. active FALSE hides a product from buyers.
CREATE TABLE products (
    sku               VARCHAR(64)   NOT NULL PRIMARY KEY,
    name              VARCHAR(200)  NOT NULL,
    unit_price_minor  BIGINT        NOT NULL,
    currency          CHAR(3)       NOT NULL,
    stock             BIGINT        NULL,
    active            BOOLEAN       NOT NULL DEFAULT TRUE,
    created_at        DATETIME(6)   NOT NULL,
    updated_at        DATETIME(6)   NOT NULL,
    KEY products_active_sku (active, sku),
    CONSTRAINT products_unit_price CHECK (unit_price_minor > 0),
    CONSTRAINT products_stock CHECK (stock >= 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE products;
