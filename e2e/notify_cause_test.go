package e2e

import (
	"net/http"
	"testing"

	"github.com/google/uuid"
)

// TestNotifyCancelCauseIsRequestKey: a customer's cancel tells its
// order.cancelled as caused by the customer, the ref its request key (as
// domain.CauseCustomer says), not the customer's ID.
func TestNotifyCancelCauseIsRequestKey(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		_, token := s.register("cause@example.com")
		id := s.order(token, "5.00")
		key := uuid.NewString()
		if r := s.do(request{method: "POST", path: "/v1/orders/" + id + "/cancel", token: token, key: key}); r.Status != http.StatusOK {
			t.Fatalf("cancel = %d %s, want 200", r.Status, r.Body)
		}
		var cause, ref string
		scanRows(t, s.db, &cause, `SELECT cause FROM notify_events WHERE order_id = ? AND type = 'order.cancelled'`, id)
		scanRows(t, s.db, &ref, `SELECT cause_ref FROM notify_events WHERE order_id = ? AND type = 'order.cancelled'`, id)
		if cause != "customer" || ref != key {
			t.Errorf("order.cancelled caused by %s %q, want customer %q (the request key)", cause, ref, key)
		}
	})
}
