package sandbox_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/sandbox/sandboxtest"
)

func manualReq(key, method string) domain.ChargeRequest {
	r := chargeReq(key, method)
	r.CaptureMethod = domain.CaptureManual
	return r
}

func captureReq(key, chargeID, amount string) domain.CaptureRequest {
	return domain.CaptureRequest{IdempotencyKey: key, ChargeID: chargeID, Amount: dec(amount), Currency: "USD"}
}

// TestHoldCapturedOnce: a manual charge only holds its money; one capture
// takes part of it, a repeat of its key answers the same capture, and
// nothing else can capture or void it after. Refunds are bounded by what
// was captured, and the settlement file lists the capture.
func TestHoldCapturedOnce(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		sb := sandboxtest.New(t, fastConfig(dbURL))
		ctx := context.Background()
		before := time.Now()
		held, err := sb.Client.Charge(ctx, manualReq("h1", "pm_ok"))
		if err != nil {
			t.Fatal(err)
		}
		if held.Status != domain.ChargeAuthorized || held.CaptureMethod != domain.CaptureManual || !held.AmountCaptured.IsZero() ||
			held.CaptureBefore.Before(before.Add(sandbox7d-time.Minute)) || held.CaptureBefore.After(time.Now().Add(sandbox7d)) {
			t.Fatalf("manual pm_ok = %+v; want authorized, nothing captured, capture_before in 7 days", held)
		}
		if again, err := sb.Client.Charge(ctx, manualReq("h1", "pm_ok")); err != nil || again.ID != held.ID {
			t.Errorf("the create again = %+v, %v; want the same hold", again, err)
		}
		if _, err := sb.Client.Charge(ctx, chargeReq("h1", "pm_ok")); !domain.IsProviderRequestError(err, "idempotency_key_reused") {
			t.Errorf("the key again as an automatic charge = %v; want idempotency_key_reused", err)
		}
		if _, err := sb.Client.Refund(ctx, refundReq("r0", held.ID, "1.00")); !domain.IsProviderRequestError(err, "charge_not_refundable") {
			t.Errorf("refund of a hold = %v; want charge_not_refundable", err)
		}
		if _, err := sb.Client.Capture(ctx, captureReq("k0", held.ID, "12.31")); !domain.IsProviderRequestError(err, domain.CaptureTooLarge) {
			t.Errorf("capture of 12.31 of 12.30 = %v; want %s", err, domain.CaptureTooLarge)
		}
		eur := captureReq("k0", held.ID, "1.00")
		eur.Currency = "EUR"
		if _, err := sb.Client.Capture(ctx, eur); !domain.IsProviderRequestError(err, "currency_mismatch") {
			t.Errorf("capture in EUR of USD = %v; want currency_mismatch", err)
		}

		got, err := sb.Client.Capture(ctx, captureReq("k1", held.ID, "10.00"))
		if err != nil || got.Status != domain.ChargeSucceeded || !got.AmountCaptured.Equal(dec("10.00")) || !got.Amount.Equal(dec("12.30")) {
			t.Fatalf("capture 10.00 = %+v, %v; want succeeded with 10.00 of 12.30 captured", got, err)
		}
		if again, err := sb.Client.Capture(ctx, captureReq("k1", held.ID, "10.00")); err != nil || !again.AmountCaptured.Equal(dec("10.00")) {
			t.Errorf("the capture again = %+v, %v; want the same 10.00", again, err)
		}
		if _, err := sb.Client.Capture(ctx, captureReq("k1", held.ID, "11.00")); !domain.IsProviderRequestError(err, "idempotency_key_reused") {
			t.Errorf("the capture's key for 11.00 = %v; want idempotency_key_reused", err)
		}
		if _, err := sb.Client.Capture(ctx, captureReq("k2", held.ID, "2.30")); !domain.IsProviderRequestError(err, domain.ChargeAlreadyCaptured) {
			t.Errorf("a second capture = %v; want %s", err, domain.ChargeAlreadyCaptured)
		}
		if _, err := sb.Client.Void(ctx, domain.VoidRequest{IdempotencyKey: "v1", ChargeID: held.ID}); !domain.IsProviderRequestError(err, domain.ChargeAlreadyCaptured) {
			t.Errorf("a void of a captured hold = %v; want %s", err, domain.ChargeAlreadyCaptured)
		}
		if _, err := sb.Client.Refund(ctx, refundReq("r1", held.ID, "10.01")); !domain.IsProviderRequestError(err, "refund_exceeds_charge") {
			t.Errorf("refund of 10.01 of 10.00 captured = %v; want refund_exceeds_charge", err)
		}
		if _, err := sb.Client.Refund(ctx, refundReq("r2", held.ID, "10.00")); err != nil {
			t.Errorf("refund of all that was captured = %v", err)
		}
		found, err := sb.Client.FindCharge(ctx, held.ID)
		if err != nil || !found.AmountCaptured.Equal(dec("10.00")) || !found.RefundedAmount.Equal(dec("10.00")) || !found.CaptureBefore.IsZero() {
			t.Errorf("FindCharge = %+v, %v; want 10.00 captured, 10.00 refunded, no capture_before", found, err)
		}

		code, csv := get(t, sb.URL+"/v1/settlements/"+time.Now().UTC().Format(time.DateOnly)+".csv")
		if code != 200 || !strings.Contains(csv, held.ID+",h1,ord-h1,charge,succeeded,10.00,USD") {
			t.Errorf("settlement = %d %s; want the capture's 10.00 on its charge line", code, csv)
		}
	})
}

// sandbox7d is the sandbox's default hold.
const sandbox7d = 7 * 24 * time.Hour

// TestHoldVoidedOrLapsed: a void ends a hold and a capture after it is
// refused; a hold past capture_before cannot be captured even before the
// sweep voids it, and the sweep says it lapsed.
func TestHoldVoidedOrLapsed(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		clk := &clock{}
		clk.Set(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
		cfg := fastConfig(dbURL)
		cfg.Clock, cfg.AuthorizationTTL = clk.Now, time.Hour
		sb := sandboxtest.New(t, cfg)
		ctx := context.Background()

		voided, err := sb.Client.Charge(ctx, manualReq("v", "pm_ok"))
		if err != nil {
			t.Fatal(err)
		}
		void := domain.VoidRequest{IdempotencyKey: "v-void", ChargeID: voided.ID}
		if got, err := sb.Client.Void(ctx, void); err != nil || got.Status != domain.ChargeVoided || !got.AmountCaptured.IsZero() {
			t.Fatalf("void = %+v, %v; want voided", got, err)
		}
		if got, err := sb.Client.Void(ctx, void); err != nil || got.Status != domain.ChargeVoided {
			t.Errorf("the void again = %+v, %v; want voided", got, err)
		}
		if _, err := sb.Client.Capture(ctx, captureReq("v-cap", voided.ID, "1.00")); !domain.IsProviderRequestError(err, domain.ChargeAlreadyVoided) {
			t.Errorf("capture of a voided hold = %v; want %s", err, domain.ChargeAlreadyVoided)
		}

		lapsing, err := sb.Client.Charge(ctx, manualReq("l", "pm_ok"))
		if err != nil || !lapsing.CaptureBefore.Equal(clk.Now().Add(time.Hour)) {
			t.Fatalf("hold = %+v, %v; want capture_before an hour on", lapsing, err)
		}
		clk.Set(lapsing.CaptureBefore)
		if _, err := sb.Client.Capture(ctx, captureReq("l-cap", lapsing.ID, "1.00")); !domain.IsProviderRequestError(err, domain.HoldLapsed) {
			t.Errorf("capture at capture_before = %v; want %s", err, domain.HoldLapsed)
		}
		if n, err := sb.LapseHolds(ctx); err != nil || n != 1 {
			t.Fatalf("LapseHolds = %d, %v; want 1", n, err)
		}
		if n, err := sb.LapseHolds(ctx); err != nil || n != 0 {
			t.Errorf("LapseHolds again = %d, %v; want 0", n, err)
		}
		got, err := sb.Client.FindCharge(ctx, lapsing.ID)
		if err != nil || got.Status != domain.ChargeVoided || got.FailureCode != domain.HoldLapsed {
			t.Errorf("lapsed hold = %+v, %v; want voided, %s", got, err, domain.HoldLapsed)
		}
		if _, err := sb.Client.Void(ctx, domain.VoidRequest{IdempotencyKey: "l-void", ChargeID: lapsing.ID}); !domain.IsProviderRequestError(err, domain.HoldLapsed) {
			t.Errorf("void of a lapsed hold = %v; want %s", err, domain.HoldLapsed)
		}

		auto, err := sb.Client.Charge(ctx, chargeReq("a", "pm_ok"))
		if err != nil || auto.CaptureMethod != domain.CaptureAutomatic || !auto.AmountCaptured.Equal(auto.Amount) {
			t.Fatalf("automatic charge = %+v, %v; want all of it captured", auto, err)
		}
		if _, err := sb.Client.Capture(ctx, captureReq("a-cap", auto.ID, "1.00")); !domain.IsProviderRequestError(err, domain.ChargeNotCapturable) {
			t.Errorf("capture of an automatic charge = %v; want %s", err, domain.ChargeNotCapturable)
		}
		if _, err := sb.Client.Void(ctx, domain.VoidRequest{IdempotencyKey: "a-void", ChargeID: auto.ID}); !domain.IsProviderRequestError(err, domain.ChargeNotCapturable) {
			t.Errorf("void of an automatic charge = %v; want %s", err, domain.ChargeNotCapturable)
		}
	})
}

// TestHoldRace: 20 captures and voids of one hold at once, each under its
// own key, on both databases: exactly one ends it, every other is refused
// for what the winner did, and one webhook says so.
func TestHoldRace(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		secret := sandboxtest.Secret(t)
		rcv := newReceiver(t, secret, 0)
		cfg := fastConfig(dbURL)
		cfg.WebhookURL, cfg.WebhookSecret = rcv.URL, secret
		sb := sandboxtest.Start(t, cfg)
		ctx := context.Background()
		held, err := sb.Client.Charge(ctx, manualReq("race", "pm_ok"))
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			capture bool
			ch      domain.Charge
			err     error
		}
		results := make([]result, 20)
		var wg sync.WaitGroup
		for i := range results {
			wg.Go(func() {
				key := fmt.Sprintf("race-%d", i)
				if i%2 == 0 {
					ch, err := sb.Client.Capture(ctx, captureReq(key, held.ID, "5.00"))
					results[i] = result{true, ch, err}
				} else {
					ch, err := sb.Client.Void(ctx, domain.VoidRequest{IdempotencyKey: key, ChargeID: held.ID})
					results[i] = result{false, ch, err}
				}
			})
		}
		wg.Wait()
		var won []result
		var said []string
		for _, r := range results {
			if r.err == nil {
				won = append(won, r)
				said = append(said, string(r.ch.Status))
			}
		}
		if len(won) != 1 {
			t.Fatalf("%d captures and voids succeeded (%v), want 1", len(won), said)
		}
		refusedFor := domain.ChargeAlreadyVoided
		if won[0].capture {
			refusedFor = domain.ChargeAlreadyCaptured
		}
		for _, r := range results {
			if r.err != nil && !domain.IsProviderRequestError(r.err, refusedFor) {
				t.Errorf("a loser = %v; want %s", r.err, refusedFor)
			}
		}
		final, err := sb.Client.FindCharge(ctx, held.ID)
		wantStatus, wantCaptured := domain.ChargeVoided, "0"
		if won[0].capture {
			wantStatus, wantCaptured = domain.ChargeSucceeded, "5.00"
		}
		if err != nil || final.Status != wantStatus || !final.AmountCaptured.Equal(dec(wantCaptured)) {
			t.Errorf("the hold after = %+v, %v; want %s with %s captured", final, err, wantStatus, wantCaptured)
		}
		evs := rcv.waitAccepted(t, 2) // payment.authorized, then the winner's
		time.Sleep(100 * time.Millisecond)
		evs = rcv.waitAccepted(t, len(evs))
		var types []domain.ProviderEventType
		for _, e := range byKey(evs, "race") {
			types = append(types, e.Type)
		}
		want := domain.EventPaymentVoided
		if won[0].capture {
			want = domain.EventPaymentCaptured
		}
		if len(types) != 2 || types[0] != domain.EventPaymentAuthorized || types[1] != want {
			t.Errorf("events = %v; want [%s %s]", types, domain.EventPaymentAuthorized, want)
		}
	})
}

// TestHoldMagicMethods: every magic method works with manual capture: an
// asynchronous one authorizes when it resolves, a lost reply still
// authorized, a decline holds nothing, and a disputed one is disputed
// only once captured, for what was captured.
func TestHoldMagicMethods(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		sb := sandboxtest.New(t, fastConfig(dbURL))
		ctx := context.Background()

		pending, err := sb.Client.Charge(ctx, manualReq("async", "pm_async"))
		if err != nil || pending.Status != domain.ChargePending || !pending.CaptureBefore.IsZero() {
			t.Fatalf("manual pm_async = %+v, %v; want pending", pending, err)
		}
		time.Sleep(30 * time.Millisecond)
		if n, err := sb.ResolvePending(ctx); err != nil || n != 1 {
			t.Fatalf("ResolvePending = %d, %v", n, err)
		}
		if got, err := sb.Client.GetCharge(ctx, domain.Attempt{ID: "async"}); err != nil || got.Status != domain.ChargeAuthorized || got.CaptureBefore.IsZero() {
			t.Errorf("resolved manual pm_async = %+v, %v; want authorized with capture_before", got, err)
		}

		if _, err := sb.Client.Charge(ctx, manualReq("lost", "pm_timeout")); err == nil {
			t.Error("manual pm_timeout answered; want the reply lost")
		}
		if got, err := sb.Client.GetCharge(ctx, domain.Attempt{ID: "lost"}); err != nil || got.Status != domain.ChargeAuthorized {
			t.Errorf("manual pm_timeout asked after = %+v, %v; want authorized", got, err)
		}
		if got, err := sb.Client.Charge(ctx, manualReq("no", "pm_declined")); err != nil || got.Status != domain.ChargeFailed {
			t.Errorf("manual pm_declined = %+v, %v; want failed", got, err)
		}

		disputed, err := sb.Client.Charge(ctx, manualReq("disp", "pm_dispute"))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond)
		if n, err := sb.OpenDisputes(ctx); err != nil || n != 0 {
			t.Errorf("OpenDisputes before the capture = %d, %v; want 0", n, err)
		}
		if _, err := sb.Client.Capture(ctx, captureReq("disp-cap", disputed.ID, "7.00")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond)
		if n, err := sb.OpenDisputes(ctx); err != nil || n != 1 {
			t.Fatalf("OpenDisputes after the capture = %d, %v; want 1", n, err)
		}
		if got, err := sb.Client.FindCharge(ctx, disputed.ID); err != nil || !got.DisputedAmount.Equal(dec("7.00")) {
			t.Errorf("disputed capture = %+v, %v; want 7.00 disputed", got, err)
		}
	})
}
