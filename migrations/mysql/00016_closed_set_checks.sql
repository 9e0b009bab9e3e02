-- +goose Up
-- Three more columns hold closed sets that domain lists in one place, and
-- get a CHECK as the statuses did (00015): an inbox event's outcome
-- (domain.WebhookOutcomes), a discrepancy's type (domain.DiscrepancyTypes)
-- and who stored an idempotency record's answer (domain.RecordCompleters).
-- A value payd does not know cannot be written. Every value an earlier
-- version of payd wrote is in these lists: none was ever renamed or
-- dropped. An outcome is NULL until its event is applied and completed_by
-- while its record is processing; a CHECK lets NULL through.
-- TestStatusChecksMatchDomain holds these lists to domain's.

-- how a provider event was handled
ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_outcome CHECK (outcome IN ('applied', 'duplicate', 'ignored', 'discrepancy'));

-- a discrepancy's type
ALTER TABLE discrepancies ADD CONSTRAINT discrepancies_type CHECK (type IN ('missing_local_payment', 'missing_provider_charge', 'amount_mismatch', 'duplicate_charge', 'stuck_processing', 'paid_after_close', 'disputed', 'refund_missing_locally', 'refund_missing_at_provider', 'refund_amount_mismatch', 'unconfirmed_payment'));

-- who stored an idempotency record's answer
ALTER TABLE idempotency_records ADD CONSTRAINT idempotency_records_completed_by CHECK (completed_by IN ('request', 'background'));

-- +goose Down
ALTER TABLE idempotency_records DROP CONSTRAINT idempotency_records_completed_by;
ALTER TABLE discrepancies DROP CONSTRAINT discrepancies_type;
ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_outcome;
