package repository

import "testing"

// TestDerivedStatements writes out in full the guarded statements built
// once from domain's refund, discrepancy and idempotency record machines:
// what each sends, and a check that the text built from the tables is the
// text intended. A change to a machine's table that moves a guard fails
// here until the statement below is changed with it.
func TestDerivedStatements(t *testing.T) {
	for _, tc := range []struct{ name, got, want string }{
		{"replaceGoneRecord", replaceGoneRecord, `UPDATE idempotency_records
			SET method = ?, path = ?, fingerprint = ?, status = ?, response_status = 0, response_body = NULL,
				response_sealed = ?, order_id = ?, completed_by = NULL, locked_until = ?, created_at = ?, updated_at = ?, expires_at = ?
			WHERE scope = ? AND idem_key = ? AND expires_at < ? AND (status <> 'processing' OR locked_until < ?)`},
		{"takeOverRecord", takeOverRecord, `UPDATE idempotency_records SET locked_until = ?, updated_at = ?
			WHERE scope = ? AND idem_key = ? AND status IN ('processing') AND locked_until < ?`},
		{"releaseRecordLease", releaseRecordLease, `UPDATE idempotency_records SET locked_until = ?, updated_at = ?
			WHERE scope = ? AND idem_key = ? AND status IN ('processing') AND locked_until > ?`},
		{"retryRecord", retryRecord, `UPDATE idempotency_records
			SET status = 'processing', locked_until = ?, response_status = 0, response_body = NULL,
				response_sealed = ?, completed_by = NULL, updated_at = ?
			WHERE scope = ? AND idem_key = ? AND status IN ('failed')`},
		{"completeRecord", completeRecord, `UPDATE idempotency_records
			SET status = ?, response_status = ?, response_body = ?, response_sealed = ?, completed_by = ?, updated_at = ?
			WHERE scope = ? AND idem_key = ? AND status IN ('processing')`},
		{"completeRecordOfOrder", completeRecordOfOrder, `UPDATE idempotency_records
			SET status = ?, response_status = ?, response_body = ?, response_sealed = ?, completed_by = ?, updated_at = ?
			WHERE scope = ? AND idem_key = ? AND status IN ('processing') AND order_id = ?`},
		{"deleteRecord", deleteRecord, `DELETE FROM idempotency_records
			WHERE scope = ? AND idem_key = ? AND status IN ('processing')`},
		{"purgeRecord", purgeRecord, `DELETE FROM idempotency_records
			WHERE scope = ? AND idem_key = ? AND expires_at < ? AND (status <> 'processing' OR locked_until < ?)`},
		{"finishRefund", finishRefund, `UPDATE refunds
			SET status = ?, provider_refund_id = COALESCE(?, provider_refund_id), updated_at = ?
			WHERE id = ? AND status IN ('pending')`},
		{"recordRefundProviderID", recordRefundProviderID, `UPDATE refunds SET provider_refund_id = ?
			WHERE id = ? AND status IN ('pending') AND provider_refund_id IS NULL`},
		{"resolveDiscrepancy", resolveDiscrepancy, `UPDATE discrepancies
			SET status = 'resolved', resolution = ?, note = ?, resolved_at = ?
			WHERE id = ? AND status IN ('open')`},
		{"claimDiscrepancy", claimDiscrepancy, `UPDATE discrepancies SET status = 'resolving', resolution = ?
			WHERE id = ? AND status IN ('open')`},
		{"settleDiscrepancy", settleDiscrepancy, `UPDATE discrepancies SET status = 'resolved', note = ?, resolved_at = ?
			WHERE id = ? AND status IN ('resolving') AND resolution = ?`},
		{"unclaimDiscrepancy", unclaimDiscrepancy, `UPDATE discrepancies SET status = 'open', resolution = NULL
			WHERE id = ? AND status IN ('resolving') AND resolution = ?`},
	} {
		if oneLine(tc.got) != oneLine(tc.want) {
			t.Errorf("%s = %q\nwant %q", tc.name, oneLine(tc.got), oneLine(tc.want))
		}
	}
}
