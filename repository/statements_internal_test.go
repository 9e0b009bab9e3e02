package repository

import (
	"testing"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/migrations"
)

// TestDerivedStatements writes out in full the guarded statements built
// once, when payd starts, from domain's order, attempt, dispute, refund,
// discrepancy and idempotency record machines (and the packets' forms):
// what each sends, and a check that the text built from the tables is the
// text intended. A change to a machine's table that moves a guard fails
// here until the statement below is changed with it.
func TestDerivedStatements(t *testing.T) {
	if len(adoptAttempt) != len(domain.AttemptChargedLate.From()) || len(closeDispute) != len(domain.DisputeMachine.Events()) {
		t.Errorf("adoptAttempt has %d statements, closeDispute %d: one for each status and event, written out below", len(adoptAttempt), len(closeDispute))
	}
	for _, tc := range []struct{ name, got, want string }{
		{"claimOrder", claimOrder, `UPDATE orders SET status = 'processing', pay_request_id = ?, version = version + 1, updated_at = ?
			WHERE id = ? AND status IN ('pending') AND expires_at > ?`},
		{"claimOrderAt", claimOrderAt, `UPDATE orders SET status = 'processing', pay_request_id = ?, version = version + 1, updated_at = ?
			WHERE id = ? AND status IN ('pending') AND expires_at > ? AND version = ?`},
		{"markPaid", markPaid, `UPDATE orders SET status = 'paid', paid_at = ?, version = version + 1, updated_at = ?
			WHERE id = ? AND status IN ('processing') AND pay_request_id = ?`},
		{"markPaidIfBooked", markPaidIfBooked, `UPDATE orders SET status = 'paid', paid_at = ?, version = version + 1, updated_at = ?
			WHERE id = ? AND status IN ('processing') AND pay_request_id = ? AND ROW_COUNT() = 1`},
		{"markPaidAt", markPaidAt, `UPDATE orders SET status = 'paid', paid_at = ?, version = version + 1, updated_at = ?
			WHERE id = ? AND status IN ('processing') AND pay_request_id = ? AND version = ?`},
		{"markPaidAtIfBooked", markPaidAtIfBooked, `UPDATE orders SET status = 'paid', paid_at = ?, version = version + 1, updated_at = ?
			WHERE id = ? AND status IN ('processing') AND pay_request_id = ? AND version = ? AND ROW_COUNT() = 1`},
		{"releaseOrder", releaseOrder, `UPDATE orders SET status = 'pending', pay_request_id = NULL, version = version + 1, updated_at = ?
			WHERE id = ? AND status IN ('processing') AND pay_request_id = ?`},
		{"cancelOrder", cancelOrder, `UPDATE orders SET status = 'cancelled', version = version + 1, updated_at = ?
			WHERE id = ? AND status IN ('pending')`},
		{"expireOrder", expireOrder, `UPDATE orders SET status = 'expired', version = version + 1, updated_at = ?
			WHERE id = ? AND status IN ('pending') AND expires_at <= ?`},
		{"refundMoves[reserve]", refundMoves[domain.MoveReserve], `UPDATE orders
			SET refund_reserved_minor = refund_reserved_minor + ?, version = version + 1, updated_at = ?
			WHERE id = ? AND status IN ('paid') AND (CASE WHEN capture_method = 'manual' AND captured_minor > 0 THEN captured_minor ELSE amount_minor END) - refunded_minor - refund_reserved_minor >= ?`},
		{"refundMoves[settle]", refundMoves[domain.MoveSettle], `UPDATE orders
			SET status = CASE WHEN (CASE WHEN capture_method = 'manual' AND captured_minor > 0 THEN captured_minor ELSE amount_minor END) - refunded_minor = ? THEN 'refunded' ELSE 'paid' END,
				refunded_minor = refunded_minor + ?, refund_reserved_minor = refund_reserved_minor - ?, version = version + 1, updated_at = ?
			WHERE id = ? AND status IN ('paid') AND refund_reserved_minor >= ? AND (CASE WHEN capture_method = 'manual' AND captured_minor > 0 THEN captured_minor ELSE amount_minor END) - refunded_minor >= ?`},
		{"refundMoves[count]", refundMoves[domain.MoveCount], `UPDATE orders
			SET status = CASE WHEN (CASE WHEN capture_method = 'manual' AND captured_minor > 0 THEN captured_minor ELSE amount_minor END) - refunded_minor = ? THEN 'refunded' ELSE 'paid' END,
				refunded_minor = refunded_minor + ?, version = version + 1, updated_at = ?
			WHERE id = ? AND status IN ('paid') AND (CASE WHEN capture_method = 'manual' AND captured_minor > 0 THEN captured_minor ELSE amount_minor END) - refunded_minor >= ?`},
		{"refundMoves[release]", refundMoves[domain.MoveRelease], `UPDATE orders
			SET refund_reserved_minor = refund_reserved_minor - ?, version = version + 1, updated_at = ?
			WHERE id = ? AND status IN ('paid', 'refunded') AND refund_reserved_minor >= ?`},
		{"refundMoves[reverse]", refundMoves[domain.MoveReverse], `UPDATE orders
			SET status = 'paid', refunded_minor = refunded_minor - ?, version = version + 1, updated_at = ?
			WHERE id = ? AND status IN ('paid', 'refunded') AND refunded_minor >= ?`},
		{"markAuthorized", markAuthorized, `UPDATE orders SET status = 'authorized', capture_before = ?, version = version + 1, updated_at = ?
			WHERE id = ? AND status IN ('processing') AND pay_request_id = ?`},
		{"claimHold", claimHold, `UPDATE orders SET hold_action = ?, version = version + 1, updated_at = ?
			WHERE id = ? AND status IN ('authorized') AND hold_action IS NULL`},
		{"claimCapture", claimCapture, `UPDATE orders SET hold_action = ?, version = version + 1, updated_at = ?
			WHERE id = ? AND status IN ('authorized') AND hold_action IS NULL AND capture_before > ?`},
		{"captureOrder", captureOrder, `UPDATE orders SET status = 'paid', captured_minor = ?, paid_at = ?, hold_action = NULL, version = version + 1, updated_at = ?
			WHERE id = ? AND status IN ('authorized') AND hold_action = ? AND ? <= amount_minor`},
		{"voidOrder", voidOrder, `UPDATE orders SET status = 'cancelled', hold_action = NULL, version = version + 1, updated_at = ?
			WHERE id = ? AND status IN ('authorized') AND hold_action = ?`},
		{"lapseOrder", lapseOrder, `UPDATE orders SET status = 'expired', hold_action = NULL, version = version + 1, updated_at = ?
			WHERE id = ? AND status IN ('authorized') AND hold_action = ?`},
		{"unclaimHold", unclaimHold, `UPDATE orders SET hold_action = NULL, version = version + 1, updated_at = ?
			WHERE id = ? AND hold_action = ?`},
		{"repairBooks", repairBooks, `UPDATE orders
			SET status = ?, refunded_minor = ?, version = version + 1, updated_at = ?
			WHERE id = ? AND version = ? AND status IN ('paid', 'refunded')`},
		{"reverseRefund", reverseRefund, `UPDATE refunds SET status = 'failed', updated_at = ?
			WHERE id = ? AND status IN ('succeeded')`},
		{"markUnknownAttempt", markUnknownAttempt, `UPDATE payment_attempts
			SET status = 'unknown', provider_charge_id = COALESCE(?, provider_charge_id), failure_code = ?, updated_at = ?
			WHERE id = ? AND status IN ('started')`},
		{"succeedAttempt", succeedAttempt, `UPDATE payment_attempts
			SET status = 'succeeded', provider_charge_id = COALESCE(?, provider_charge_id), failure_code = ?, updated_at = ?
			WHERE id = ? AND status IN ('started', 'unknown')`},
		{"failAttempt", failAttempt, `UPDATE payment_attempts
			SET status = 'failed', provider_charge_id = COALESCE(?, provider_charge_id), failure_code = ?, updated_at = ?
			WHERE id = ? AND status IN ('started', 'unknown')`},
		{"holdAttempt", holdAttempt, `UPDATE payment_attempts
			SET status = 'held', provider_charge_id = COALESCE(?, provider_charge_id), failure_code = ?, updated_at = ?
			WHERE id = ? AND status IN ('started', 'unknown')`},
		{"applyAttempt", applyAttempt, `UPDATE payment_attempts
			SET status = 'succeeded', provider_charge_id = COALESCE(?, provider_charge_id), failure_code = ?, updated_at = ?
			WHERE id = ? AND status IN ('started', 'unknown', 'failed')`},
		{"rejectAttempt", rejectAttempt, `UPDATE payment_attempts
			SET status = 'failed', provider_charge_id = COALESCE(?, provider_charge_id), failure_code = ?, updated_at = ?
			WHERE id = ? AND status IN ('held')`},
		{"adoptAttempt[failed]", adoptAttempt[domain.AttemptFailed], `UPDATE payment_attempts
			SET status = 'succeeded', provider_charge_id = COALESCE(?, provider_charge_id), failure_code = ?, updated_at = ?
			WHERE id = ? AND status IN ('failed')`},
		{"adoptAttempt[held]", adoptAttempt[domain.AttemptHeld], `UPDATE payment_attempts
			SET status = 'succeeded', provider_charge_id = COALESCE(?, provider_charge_id), failure_code = ?, updated_at = ?
			WHERE id = ? AND status IN ('held')`},
		{"recordChargeID", recordChargeID, `UPDATE payment_attempts SET provider_charge_id = ?
			WHERE id = ? AND provider_charge_id IS NULL AND status IN ('started', 'unknown')`},
		{"leaseAttempt", leaseAttempt, `UPDATE payment_attempts SET leased_until = ?
			WHERE id = ? AND status IN ('started', 'unknown') AND (leased_until IS NULL OR leased_until < ?)`},
		{"resendAttempt", resendAttempt, `UPDATE payment_attempts SET in_flight_until = ?, leased_until = ?
			WHERE id = ? AND status IN ('started', 'unknown') AND leased_until = ?`},
		{"closeDispute[win]", closeDispute[domain.DisputeEventWin], `UPDATE disputes SET status = 'won', closed_at = ?, updated_at = ?
			WHERE id = ? AND status IN ('open')`},
		{"closeDispute[lose]", closeDispute[domain.DisputeEventLose], `UPDATE disputes SET status = 'lost', closed_at = ?, updated_at = ?
			WHERE id = ? AND status IN ('open')`},
		{"replaceGoneRecord", replaceGoneRecord, `UPDATE idempotency_records
			SET method = ?, path = ?, fingerprint = ?, status = ?, response_status = 0, response_body = NULL,
				response_sealed = ?, order_id = ?, completed_by = NULL, locked_until = ?, created_at = ?, updated_at = ?, expires_at = ?
			WHERE scope = ? AND idem_key = ? AND expires_at < ? AND (status <> 'processing' OR locked_until < ?)`},
		{"takeOverRecord", takeOverRecord, `UPDATE idempotency_records SET locked_until = ?, updated_at = ?
			WHERE scope = ? AND idem_key = ? AND status IN ('processing') AND locked_until < ?`},
		{"releaseRecordLease", releaseRecordLease, `UPDATE idempotency_records SET locked_until = ?, updated_at = ?
			WHERE scope = ? AND idem_key = ? AND status IN ('processing') AND locked_until > ?`},
		{"releaseOwnRecordLease", releaseOwnRecordLease, `UPDATE idempotency_records SET locked_until = ?, updated_at = ?
			WHERE scope = ? AND idem_key = ? AND status IN ('processing') AND locked_until > ? AND locked_until = ?`},
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
		{"purgeRecords(2)", purgeRecords(2), `DELETE FROM idempotency_records WHERE (scope, idem_key) IN ((?, ?), (?, ?))
			AND expires_at < ? AND (status <> 'processing' OR locked_until < ?)`},
		{"retention's inbox batch (MySQL)", batchDelete(migrations.MySQL, "webhook_events", inboxGone, "processed_at"),
			`DELETE FROM webhook_events WHERE processed_at IS NOT NULL AND processed_at < ?
			AND NOT EXISTS (SELECT 1 FROM discrepancies d WHERE d.order_id = webhook_events.order_id AND d.status <> 'resolved')
			ORDER BY processed_at LIMIT ?`},
		{"retention's event batch (SQLite)", batchDelete(migrations.SQLite, "notify_events", eventGone, "created_at"),
			`DELETE FROM notify_events WHERE rowid IN (SELECT rowid FROM notify_events WHERE fanned_out = 1 AND created_at < ?
			AND NOT EXISTS (SELECT 1 FROM notify_deliveries d WHERE d.event_id = notify_events.id) ORDER BY created_at LIMIT ?)`},
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
		{"claimDelivery", claimDelivery, `UPDATE notify_deliveries SET leased_until = ?, attempts = attempts + 1, updated_at = ?
			WHERE id = ? AND status = 'pending' AND next_attempt_at <= ? AND (leased_until IS NULL OR leased_until < ?)`},
		{"deliverDelivery", deliverDelivery, `UPDATE notify_deliveries SET status = 'delivered', leased_until = NULL, last_status = ?, last_error = '',
			delivered_at = ?, updated_at = ? WHERE id = ? AND status IN ('pending') AND leased_until = ?`},
		{"retryDelivery", retryDelivery, `UPDATE notify_deliveries SET status = 'pending', leased_until = NULL, last_status = ?, last_error = ?,
			next_attempt_at = ?, updated_at = ? WHERE id = ? AND status IN ('pending') AND leased_until = ?`},
		{"giveUpDelivery", giveUpDelivery, `UPDATE notify_deliveries SET status = 'failed', leased_until = NULL, last_status = ?, last_error = ?,
			failed_at = ?, updated_at = ? WHERE id = ? AND status IN ('pending') AND leased_until = ?`},
		{"giveUpEndpointPending", giveUpEndpointPending, `UPDATE notify_deliveries SET status = 'failed', leased_until = NULL, failed_at = ?, updated_at = ?, last_error = ?
			WHERE endpoint_id = ? AND status IN ('pending')`},
		{"redeliverEvent", redeliverEvent, `UPDATE notify_deliveries SET status = 'pending', next_attempt_at = ?, leased_until = NULL,
			delivered_at = NULL, failed_at = NULL, updated_at = ? WHERE event_id = ? AND status IN ('delivered', 'failed')
			  AND endpoint_id IN (SELECT id FROM notify_endpoints)`},
	} {
		if oneLine(tc.got) != oneLine(tc.want) {
			t.Errorf("%s = %q\nwant %q", tc.name, oneLine(tc.got), oneLine(tc.want))
		}
	}
}
