-- +goose Up
-- Every status column holds only the statuses of its machine in domain
-- (ADR 0032), as disputes.status and the ledger's kind and source already
-- do: a row no machine knows cannot be written, whoever writes it. A test
-- holds these lists to domain's tables (TestStatusChecksMatchDomain).
-- SQLite cannot add a CHECK to a table that exists, and rebuilding a
-- table its neighbours' foreign keys name is not safe inside a migration's
-- transaction: the same rule is a pair of triggers per column, refusing an
-- INSERT or an UPDATE that writes another value, with the error a CHECK
-- gives ("CHECK constraint failed: <name>"). The rows already there are
-- left as they are (payd never wrote any other value).

-- an order's status: domain's order machine (insert)
-- +goose StatementBegin
CREATE TRIGGER orders_status_insert BEFORE INSERT ON orders
WHEN NEW.status IS NULL OR NEW.status NOT IN ('pending', 'processing', 'paid', 'refunded', 'cancelled', 'expired')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: orders_status');
END;
-- +goose StatementEnd

-- an order's status: domain's order machine (update)
-- +goose StatementBegin
CREATE TRIGGER orders_status_update BEFORE UPDATE OF status ON orders
WHEN NEW.status IS NULL OR NEW.status NOT IN ('pending', 'processing', 'paid', 'refunded', 'cancelled', 'expired')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: orders_status');
END;
-- +goose StatementEnd

-- an attempt's status: domain's attempt machine (insert)
-- +goose StatementBegin
CREATE TRIGGER payment_attempts_status_insert BEFORE INSERT ON payment_attempts
WHEN NEW.status IS NULL OR NEW.status NOT IN ('started', 'succeeded', 'failed', 'unknown', 'held')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: payment_attempts_status');
END;
-- +goose StatementEnd

-- an attempt's status: domain's attempt machine (update)
-- +goose StatementBegin
CREATE TRIGGER payment_attempts_status_update BEFORE UPDATE OF status ON payment_attempts
WHEN NEW.status IS NULL OR NEW.status NOT IN ('started', 'succeeded', 'failed', 'unknown', 'held')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: payment_attempts_status');
END;
-- +goose StatementEnd

-- an idempotency record's status: domain's record machine (insert)
-- +goose StatementBegin
CREATE TRIGGER idempotency_records_status_insert BEFORE INSERT ON idempotency_records
WHEN NEW.status IS NULL OR NEW.status NOT IN ('processing', 'succeeded', 'failed')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: idempotency_records_status');
END;
-- +goose StatementEnd

-- an idempotency record's status: domain's record machine (update)
-- +goose StatementBegin
CREATE TRIGGER idempotency_records_status_update BEFORE UPDATE OF status ON idempotency_records
WHEN NEW.status IS NULL OR NEW.status NOT IN ('processing', 'succeeded', 'failed')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: idempotency_records_status');
END;
-- +goose StatementEnd

-- a refund's status: domain's refund machine (insert)
-- +goose StatementBegin
CREATE TRIGGER refunds_status_insert BEFORE INSERT ON refunds
WHEN NEW.status IS NULL OR NEW.status NOT IN ('pending', 'succeeded', 'failed')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: refunds_status');
END;
-- +goose StatementEnd

-- a refund's status: domain's refund machine (update)
-- +goose StatementBegin
CREATE TRIGGER refunds_status_update BEFORE UPDATE OF status ON refunds
WHEN NEW.status IS NULL OR NEW.status NOT IN ('pending', 'succeeded', 'failed')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: refunds_status');
END;
-- +goose StatementEnd

-- a refund's kind (insert)
-- +goose StatementBegin
CREATE TRIGGER refunds_kind_insert BEFORE INSERT ON refunds
WHEN NEW.kind IS NULL OR NEW.kind NOT IN ('manual', 'auto')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: refunds_kind');
END;
-- +goose StatementEnd

-- a refund's kind (update)
-- +goose StatementBegin
CREATE TRIGGER refunds_kind_update BEFORE UPDATE OF kind ON refunds
WHEN NEW.kind IS NULL OR NEW.kind NOT IN ('manual', 'auto')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: refunds_kind');
END;
-- +goose StatementEnd

-- a discrepancy's status: domain's discrepancy machine (insert)
-- +goose StatementBegin
CREATE TRIGGER discrepancies_status_insert BEFORE INSERT ON discrepancies
WHEN NEW.status IS NULL OR NEW.status NOT IN ('open', 'resolving', 'resolved')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: discrepancies_status');
END;
-- +goose StatementEnd

-- a discrepancy's status: domain's discrepancy machine (update)
-- +goose StatementBegin
CREATE TRIGGER discrepancies_status_update BEFORE UPDATE OF status ON discrepancies
WHEN NEW.status IS NULL OR NEW.status NOT IN ('open', 'resolving', 'resolved')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: discrepancies_status');
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER discrepancies_status_update;
DROP TRIGGER discrepancies_status_insert;
DROP TRIGGER refunds_kind_update;
DROP TRIGGER refunds_kind_insert;
DROP TRIGGER refunds_status_update;
DROP TRIGGER refunds_status_insert;
DROP TRIGGER idempotency_records_status_update;
DROP TRIGGER idempotency_records_status_insert;
DROP TRIGGER payment_attempts_status_update;
DROP TRIGGER payment_attempts_status_insert;
DROP TRIGGER orders_status_update;
DROP TRIGGER orders_status_insert;
