-- +goose Up
-- The operators' discrepancy list (GET /v1/admin/discrepancies) pages
-- newest first by id within a status or a type; these indexes serve those
-- pages without a sort of every discrepancy ever found.
CREATE INDEX discrepancies_status_id ON discrepancies (status, id);
CREATE INDEX discrepancies_type_id ON discrepancies (type, id);

-- +goose Down
DROP INDEX discrepancies_type_id ON discrepancies;
DROP INDEX discrepancies_status_id ON discrepancies;
