package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
)

// TestStubHonoursKeys talks to the stub through payd's own provider
// client: the same key is the same charge, other parameters under it are
// refused, and an unknown key is the provider's "not found".
func TestStubHonoursKeys(t *testing.T) {
	s, err := startStub()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, ctx := provider.NewClient(s.URL), context.Background()
	req := domain.ChargeRequest{IdempotencyKey: "k1", OrderID: "o1", Amount: decimal.RequireFromString("9.99"), Currency: "USD", PaymentMethod: "pm_ok"}
	first, err := c.Charge(ctx, req)
	if err != nil || first.Status != domain.ChargeSucceeded {
		t.Fatalf("Charge(k1) = %+v, %v, want succeeded", first, err)
	}
	again, err := c.Charge(ctx, req)
	if err != nil || again.ID != first.ID {
		t.Errorf("Charge(k1) again = %q, %v, want the same charge %q", again.ID, err, first.ID)
	}
	other := req
	other.Amount = decimal.RequireFromString("1.00")
	if _, err := c.Charge(ctx, other); !domain.IsProviderRequestError(err, "idempotency_key_reused") {
		t.Errorf("Charge(k1, other amount) = %v, want idempotency_key_reused", err)
	}
	if got, err := c.GetCharge(ctx, domain.Attempt{ID: "k1"}); err != nil || got.ID != first.ID {
		t.Errorf("GetCharge(k1) = %q, %v, want %q", got.ID, err, first.ID)
	}
	if _, err := c.GetCharge(ctx, domain.Attempt{ID: "nope"}); !errors.Is(err, domain.ErrChargeNotFound) {
		t.Errorf("GetCharge(nope) = %v, want domain.ErrChargeNotFound", err)
	}
}

// TestStubLists: the stub lists its charges, the adopted ones among those
// it made, in payd's client's pages, oldest first, within the window, and
// the adopted refunds.
func TestStubLists(t *testing.T) {
	s, err := startStub()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, ctx := provider.NewClient(s.URL), context.Background()
	made, err := c.Charge(ctx, domain.ChargeRequest{IdempotencyKey: "k-now", OrderID: "o-now", Amount: decimal.RequireFromString("9.99"), Currency: "USD", PaymentMethod: "pm_ok"})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	var old []*charge
	for i := range 1200 { // three of payd's pages of 500
		at := t0.Add(time.Duration(i) * time.Millisecond)
		old = append(old, &charge{ID: fmt.Sprintf("ch_old_%04d", i), IdempotencyKey: fmt.Sprintf("k-old-%04d", i), OrderID: "o-old",
			Amount: "1.00", Currency: "USD", Status: "succeeded", RefundedAmount: "0", CreatedAt: at.Format(time.RFC3339Nano), created: at})
	}
	s.adopt(old, []refund{{ID: "re_1", ChargeID: "ch_old_0001", Amount: "1.00", Currency: "USD", Status: "succeeded", CreatedAt: t0.Format(time.RFC3339Nano), created: t0}})
	all, err := provider.AllCharges(ctx, c, t0.Add(time.Millisecond), time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1200 || all[0].ID != "ch_old_0001" || all[1198].ID != "ch_old_1199" || all[1199].ID != made.ID {
		t.Fatalf("listed %d charges, want 1200 from ch_old_0001 to the one made now", len(all))
	}
	refunds, err := c.ListRefunds(ctx, t0, t0.Add(time.Second))
	if err != nil || len(refunds) != 1 || refunds[0].ID != "re_1" {
		t.Errorf("ListRefunds = %+v, %v, want re_1", refunds, err)
	}
}

// TestStubClosesWaitingConnections: closeIdle closes a connection that
// carried a charge and waits for the next, and one that never carried a
// request (a dial payd's transport ended up not needing), however young.
func TestStubClosesWaitingConnections(t *testing.T) {
	s, err := startStub()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr := strings.TrimPrefix(s.URL, "http://")
	used, unused := dial(t, addr), dial(t, addr)
	if _, err := io.WriteString(used, "GET /v1/charges/nope HTTP/1.1\r\nHost: stub\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(used)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// The server marks a connection idle just after it answered.
	for deadline := time.Now().Add(5 * time.Second); s.waitingConns() < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections waiting for a request, want 2", s.waitingConns())
		}
		time.Sleep(time.Millisecond)
	}
	s.closeIdle()
	for name, r := range map[string]io.Reader{"used": br, "unused": unused} {
		if _, err := r.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Errorf("%s connection after closeIdle: read = %v, want EOF", name, err)
		}
	}
}

// dial connects to addr; reads on the connection give up after 3 seconds.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	return c
}
