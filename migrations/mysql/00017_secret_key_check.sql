-- +goose Up
-- The secret key's check value: HMAC-SHA256 of PAYD_SECRET_KEY over a label
-- of its own, never the key. The key seals the answers stored under
-- idempotency keys and derives customer tokens, so payd refuses to start
-- with a key that is not the one this database was made with, instead of
-- answering 410 to every replay (ADR 0042). One row: id is always 1, and
-- the first payd to start records its key's value; every later one
-- compares.
CREATE TABLE secret_key_check (
    id           TINYINT      NOT NULL PRIMARY KEY CHECK (id = 1),
    check_value  CHAR(64)     NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE secret_key_check;
