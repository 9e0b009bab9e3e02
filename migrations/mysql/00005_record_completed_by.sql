-- +goose Up
-- Who stored a record's answer: the request itself ('request'), or a later
-- settlement of its payment by webhook or recoverer ('background'). A
-- decline the customer never saw (the request answered 202) is replayed as
-- the truth; a decline the request answered itself may be retried.
ALTER TABLE idempotency_records ADD COLUMN completed_by VARCHAR(16) NULL;

-- +goose Down
ALTER TABLE idempotency_records DROP COLUMN completed_by;
