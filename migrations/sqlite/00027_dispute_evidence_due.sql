-- +goose Up
-- When the customer's bank wants the merchant's evidence, as the provider
-- says (Stripe's evidence_details.due_by): the operators' disputes view
-- shows what is due first. NULL while the provider has named no date.
ALTER TABLE disputes ADD COLUMN evidence_due_at TEXT NULL;

-- +goose Down
ALTER TABLE disputes DROP COLUMN evidence_due_at;
