package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/repository"
)

// staged is a reconciliation scenario: one order for each kind of
// disagreement docs/guarantees.md#reconciliation-and-books names, made on purpose, and what a run must find.
type staged struct {
	want           map[string]string // "type reference" → the resolution that fits it
	matched        int               // provider charges payd's books agree with
	paid           string            // a control order, paid normally
	lost           string            // missing_local_payment with an attempt: resolved by apply
	stranger       string            // missing_local_payment without an attempt: refunded
	mismatch       string            // amount_mismatch: refunded
	mismatchCharge string            // its charge, for 12.00 where payd's books say 10.00
	dup            string            // duplicate_charge: refunded
	closed         string            // paid_after_close: refunded
	phantom        string            // missing_provider_charge: ignored
	stuck          string            // stuck_processing: resolved by apply
	refunded       []string          // provider charges a full refund must settle
	kept           []string          // provider charges no resolution may touch
}

// stage builds the scenario. The sandbox delivers no webhooks, so payd
// hears of each disagreement only through reconciliation, and PAYD_LEASE is
// long, so the recoverer leaves the unsettled payments alone. How each one
// is made:
//
//   - missing_local_payment, no attempt: a charge made directly at the
//     provider under a key payd never issued, for a real pending order.
//   - missing_local_payment, with an attempt: pm_timeout charges while the
//     reply is lost; then payd's books are edited as if it had concluded a
//     decline (attempt failed, order released to pending) — a misread timeout.
//   - duplicate_charge: the same misread timeout, then the customer pays
//     again with pm_ok: two successful charges, the order paid by the second.
//   - paid_after_close: the misread timeout, then the customer cancels.
//   - amount_mismatch: the sandbox refuses a key reused with another amount,
//     so the provider charge comes first: 12.00 under a chosen key K. Then
//     payd's books are written, through its own stores and guarded
//     transitions, as a payd that asked for 10.00 under K would have them:
//     order claimed, attempt K succeeded for 10.00 with that charge, paid.
//   - missing_provider_charge: the same bookkeeping for an attempt whose
//     charge the provider never made.
//   - stuck_processing: pm_async leaves the attempt unknown and the order
//     processing (its webhook is never delivered); the provider settles the
//     charge, and the order's updated_at is set an hour back, past the
//     lease. The attempt's own updated_at stays fresh, so the recoverer,
//     which leases attempts by theirs, does not settle it first.
func (s *stack) stage(tok string) staged {
	s.t.Helper()
	ctx := s.t.Context()
	st := staged{want: map[string]string{}, matched: 2}
	st.paid = s.paidOrder(tok, "10.00")
	st.kept = append(st.kept, s.sandboxCharge(st.paid, "succeeded"))

	st.stranger = s.order(tok, "5.00")
	ch := s.chargeDirectly(uuid.NewString(), st.stranger, "5.00")
	st.want["missing_local_payment "+ch.ID] = "refund"
	st.refunded = append(st.refunded, ch.ID)

	st.lost = s.order(tok, "7.00")
	_, c1 := s.loseOutcome(tok, st.lost)
	st.want["missing_local_payment "+c1] = "apply"

	st.dup = s.order(tok, "4.00")
	_, c3 := s.loseOutcome(tok, st.dup)
	if r := s.pay(tok, st.dup, uuid.NewString(), "pm_ok"); r.Status != http.StatusOK {
		s.t.Fatalf("second pay of %s = %d %s, want 200", st.dup, r.Status, r.Body)
	}
	st.want["duplicate_charge "+c3] = "refund"
	st.refunded = append(st.refunded, c3)
	for _, c := range s.sandboxCharges(st.dup, domain.ChargeSucceeded) {
		if c.ID != c3 {
			st.kept = append(st.kept, c.ID)
		}
	}

	st.closed = s.order(tok, "6.00")
	_, c4 := s.loseOutcome(tok, st.closed)
	if r := s.do(request{method: "POST", path: "/v1/orders/" + st.closed + "/cancel", token: tok, key: uuid.NewString()}); r.Status != http.StatusOK {
		s.t.Fatalf("cancel %s = %d %s, want 200", st.closed, r.Status, r.Body)
	}
	st.want["paid_after_close "+c4] = "refund"
	st.refunded = append(st.refunded, c4)

	st.mismatch = s.order(tok, "10.00")
	key := uuid.NewString()
	ch = s.chargeDirectly(key, st.mismatch, "12.00")
	s.bookPayment(ctx, st.mismatch, key, ch.ID, "10.00")
	st.want["amount_mismatch "+ch.ID] = "refund"
	st.mismatchCharge = ch.ID
	st.refunded = append(st.refunded, ch.ID)

	st.phantom = s.order(tok, "8.00")
	s.bookPayment(ctx, st.phantom, uuid.NewString(), "ch_never_made", "8.00")
	st.want["missing_provider_charge "+st.phantom] = "ignore"

	st.stuck = s.order(tok, "9.00")
	payKey := uuid.NewString()
	if r := s.pay(tok, st.stuck, payKey, "pm_async"); r.Status != http.StatusAccepted {
		s.t.Fatalf("pay pm_async = %d %s, want 202", r.Status, r.Body)
	}
	a6 := s.attemptIn(st.stuck, "unknown")
	if !within(20*time.Second, func() bool {
		c, err := s.directProvider().GetCharge(ctx, domain.Attempt{ID: a6})
		return err == nil && c.Status == domain.ChargeSucceeded
	}) {
		s.t.Fatalf("the sandbox did not settle the pm_async charge of %s", st.stuck)
	}
	s.exec("UPDATE orders SET updated_at = ? WHERE id = ? AND status = 'processing'",
		time.Now().UTC().Add(-time.Hour).Format("2006-01-02 15:04:05.000000"), st.stuck)
	st.want["stuck_processing "+st.stuck+"/"+payKey] = "apply"
	return st
}

// loseOutcome pays orderID with pm_timeout — the provider charges, the
// reply is lost — then edits payd's books as if it had concluded a decline:
// the attempt failed, the order released to pending. It returns the
// attempt's ID and the provider's charge.
func (s *stack) loseOutcome(tok, orderID string) (string, string) {
	s.t.Helper()
	if r := s.pay(tok, orderID, uuid.NewString(), "pm_timeout"); r.Status != http.StatusAccepted {
		s.t.Fatalf("pay pm_timeout = %d %s, want 202", r.Status, r.Body)
	}
	a := s.attemptIn(orderID, "unknown")
	ch, err := s.directProvider().GetCharge(s.t.Context(), domain.Attempt{ID: a})
	if err != nil || ch.Status != domain.ChargeSucceeded {
		s.t.Fatalf("GetCharge(%s) = %+v, %v; want succeeded", a, ch, err)
	}
	s.exec("UPDATE payment_attempts SET status = 'failed', failure_code = 'card_declined' WHERE id = ? AND status = 'unknown'", a)
	s.exec("UPDATE orders SET status = 'pending', pay_request_id = NULL, version = version + 1 WHERE id = ? AND status = 'processing'", orderID)
	return a, ch.ID
}

// bookPayment writes into payd's books, through its stores, that orderID
// was paid by attempt attemptID for amount with provider charge chargeID.
func (s *stack) bookPayment(ctx context.Context, orderID, attemptID, chargeID, amount string) {
	s.t.Helper()
	orders, attempts := repository.NewOrderStore(s.db), repository.NewAttemptStore(s.db)
	now, requestID := time.Now().UTC(), uuid.NewString()
	if ok, err := orders.Claim(ctx, orderID, requestID, domain.AnyVersion, now); err != nil || !ok {
		s.t.Fatalf("Claim(%s) = %v, %v; want true", orderID, ok, err)
	}
	err := attempts.Create(ctx, domain.Attempt{ID: attemptID, OrderID: orderID, RequestID: requestID, Status: domain.AttemptSucceeded,
		PaymentMethod: "pm_ok", ProviderChargeID: chargeID, Amount: decimal.RequireFromString(amount), Currency: "USD", CreatedAt: now, UpdatedAt: now})
	if err != nil {
		s.t.Fatal(err)
	}
	if ok, err := orders.MarkPaid(ctx, orderID, requestID, domain.Cause{Kind: domain.CauseOperator}, now); err != nil || !ok {
		s.t.Fatalf("MarkPaid(%s) = %v, %v; want true", orderID, ok, err)
	}
}

// attemptIn returns the ID of orderID's one attempt in status.
func (s *stack) attemptIn(orderID, status string) string {
	s.t.Helper()
	var ids []string
	if err := s.db.Gorm().Raw("SELECT id FROM payment_attempts WHERE order_id = ? AND status = ?", orderID, status).Scan(&ids).Error; err != nil {
		s.t.Fatal(err)
	}
	if len(ids) != 1 {
		s.t.Fatalf("attempts of %s in %s = %v, want one", orderID, status, ids)
	}
	return ids[0]
}

// settlementCSV is the sandbox's settlement for yesterday and today (UTC),
// as one file: every charge and refund a test made, even across midnight.
func (s *stack) settlementCSV() string {
	s.t.Helper()
	var out strings.Builder
	now := time.Now().UTC()
	for i, day := range []time.Time{now.AddDate(0, 0, -1), now} {
		url := fmt.Sprintf("http://%s/v1/settlements/%s.csv", s.sandboxL.Addr(), day.Format(time.DateOnly))
		resp, err := http.Get(url)
		if err != nil {
			s.t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			s.t.Fatalf("GET %s = %d %v", url, resp.StatusCode, err)
		}
		body := string(b)
		if i > 0 { // one header line
			_, body, _ = strings.Cut(body, "\n")
		}
		out.WriteString(body)
	}
	return out.String()
}
