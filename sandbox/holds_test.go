package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/sandbox"
	"github.com/payd/payd/sandbox/sandboxtest"
)

// holdReq is chargeReq with manual capture: 12.30 USD held.
func holdReq(key, method string) domain.ChargeRequest {
	r := chargeReq(key, method)
	r.CaptureMethod = domain.CaptureManual
	return r
}

func captureReq(key, chargeID, amount string) domain.CaptureRequest {
	r := domain.CaptureRequest{IdempotencyKey: key, ChargeID: chargeID, Currency: "USD"}
	if amount != "" {
		r.Amount = dec(amount)
	}
	return r
}

func voidReq(key, chargeID string) domain.VoidRequest {
	return domain.VoidRequest{IdempotencyKey: key, ChargeID: chargeID}
}

// pinned is a sandbox config whose clock the test moves, at noon of a
// fixed day, with holds lasting ttl.
func pinned(dbURL string, ttl time.Duration) (sandbox.Config, *clock) {
	clk := &clock{t: time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)}
	cfg := fastConfig(dbURL)
	cfg.Clock, cfg.AuthorizationTTL = clk.Now, ttl
	return cfg, clk
}

// eventTypes lists the types of the events queued about charge id, in order.
func eventTypes(t *testing.T, sb *sandboxtest.Sandbox, id string) []string {
	t.Helper()
	ds, err := sb.Deliveries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range ds {
		if strings.Contains(string(d.Payload), `"charge_id":"`+id+`"`) {
			out = append(out, d.Type)
		}
	}
	return out
}

func wantEvents(t *testing.T, sb *sandboxtest.Sandbox, id string, want ...string) {
	t.Helper()
	if got := eventTypes(t, sb, id); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("events of %s = %v, want %v", id, got, want)
	}
}

// A hold, then a partial capture: once, the rest released, the same answer
// to its key, refused under any other.
func TestHoldPartialCapture(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		cfg, clk := pinned(dbURL, 0)
		sb := sandboxtest.New(t, cfg)
		ctx := context.Background()
		held, err := sb.Client.Charge(ctx, holdReq("h1", "pm_ok"))
		if err != nil || held.Status != domain.ChargeAuthorized || held.Captured || !held.AmountCaptured.IsZero() ||
			held.CaptureMethod != domain.CaptureManual {
			t.Fatalf("Charge(manual pm_ok) = %+v, %v; want authorized, nothing captured", held, err)
		}
		if want := clk.Now().Add(sandbox.DefaultAuthorizationTTL); !held.CaptureBefore.Equal(want) {
			t.Errorf("CaptureBefore = %v, want %v (creation + 7 days)", held.CaptureBefore, want)
		}
		if !held.Settled().IsZero() {
			t.Errorf("Settled() of a hold = %v, want 0", held.Settled())
		}

		clk.Set(clk.Now().Add(time.Hour))
		got, err := sb.Client.Capture(ctx, captureReq("cap1", held.ID, "5.00"))
		if err != nil || got.Status != domain.ChargeSucceeded || !got.Captured || !got.AmountCaptured.Equal(dec("5.00")) ||
			!got.Amount.Equal(dec("12.30")) || !got.Settled().Equal(dec("5.00")) {
			t.Fatalf("Capture(5.00 of 12.30) = %+v, %v; want succeeded, 5.00 captured", got, err)
		}
		replay, err := sb.Client.Capture(ctx, captureReq("cap1", held.ID, "5.00"))
		if err != nil || replay.Status != got.Status || !replay.AmountCaptured.Equal(got.AmountCaptured) || replay.ID != got.ID {
			t.Errorf("Capture(cap1 again) = %+v, %v; want the same answer %+v", replay, err, got)
		}
		if _, err := sb.Client.Capture(ctx, captureReq("cap1", held.ID, "6.00")); !domain.IsProviderRequestError(err, "idempotency_key_reused") {
			t.Errorf("Capture(cap1, another amount) = %v, want idempotency_key_reused", err)
		}
		if _, err := sb.Client.Void(ctx, voidReq("cap1", held.ID)); !domain.IsProviderRequestError(err, "idempotency_key_reused") {
			t.Errorf("Void(cap1's key) = %v, want idempotency_key_reused", err)
		}
		if _, err := sb.Client.Capture(ctx, captureReq("cap2", held.ID, "1.00")); !domain.IsProviderRequestError(err, "charge_already_captured") {
			t.Errorf("Capture(cap2, a second capture) = %v, want charge_already_captured", err)
		}
		if _, err := sb.Client.Void(ctx, voidReq("void1", held.ID)); !domain.IsProviderRequestError(err, "charge_already_captured") {
			t.Errorf("Void(a captured hold) = %v, want charge_already_captured", err)
		}
		// Refunds are bounded by what was captured, not by what was held.
		if _, err := sb.Client.Refund(ctx, refundReq("r1", held.ID, "5.01")); !domain.IsProviderRequestError(err, "refund_exceeds_charge") {
			t.Errorf("Refund(5.01 of 5.00 captured) = %v, want refund_exceeds_charge", err)
		}
		if _, err := sb.Client.Refund(ctx, refundReq("r2", held.ID, "5.00")); err != nil {
			t.Errorf("Refund(5.00 captured) = %v", err)
		}
		wantEvents(t, sb, held.ID, "payment.authorized", "payment.captured", "refund.succeeded")

		// The settlement lists the capture, for what was captured, on its day.
		code, body := get(t, sb.URL+"/v1/settlements/2026-03-14.csv")
		if code != http.StatusOK || !strings.Contains(body, held.ID+",h1,ord-h1,charge,succeeded,5.00,USD,2026-03-14T13:00:00Z,") {
			t.Errorf("settlement = %d %s; want the capture of 5.00 at 13:00", code, body)
		}
		// payd's own parser reads it as a charge of what was captured.
		st, err := provider.ParseSettlement(strings.NewReader(body))
		if err != nil || len(st.Charges) != 1 || st.Charges[0].ID != held.ID || !st.Charges[0].Amount.Equal(dec("5.00")) {
			t.Errorf("ParseSettlement = %+v, %v; want the one capture of 5.00", st, err)
		}
	})
}

// A void releases the hold once; a capture after it is refused, and the
// settlement lists nothing for it.
func TestHoldVoid(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		cfg, _ := pinned(dbURL, time.Hour)
		sb := sandboxtest.New(t, cfg)
		ctx := context.Background()
		held, err := sb.Client.Charge(ctx, holdReq("h1", "pm_ok"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := sb.Client.Void(ctx, voidReq("v1", held.ID))
		if err != nil || got.Status != domain.ChargeVoided || got.VoidReason != domain.VoidRequested || got.Captured {
			t.Fatalf("Void = %+v, %v; want voided, requested", got, err)
		}
		if again, err := sb.Client.Void(ctx, voidReq("v1", held.ID)); err != nil || again.Status != domain.ChargeVoided {
			t.Errorf("Void(v1 again) = %+v, %v; want the voided charge", again, err)
		}
		if _, err := sb.Client.Void(ctx, voidReq("v2", held.ID)); !domain.IsProviderRequestError(err, "charge_voided") {
			t.Errorf("Void(v2, a second void) = %v, want charge_voided", err)
		}
		if _, err := sb.Client.Capture(ctx, captureReq("c1", held.ID, "")); !domain.IsProviderRequestError(err, "charge_voided") {
			t.Errorf("Capture(a voided hold) = %v, want charge_voided", err)
		}
		if _, err := sb.Client.Refund(ctx, refundReq("r1", held.ID, "1.00")); !domain.IsProviderRequestError(err, "charge_not_refundable") {
			t.Errorf("Refund(a voided hold) = %v, want charge_not_refundable", err)
		}
		wantEvents(t, sb, held.ID, "payment.authorized", "payment.voided")
		if _, body := get(t, sb.URL+"/v1/settlements/2026-03-14.csv"); strings.Contains(body, held.ID) {
			t.Errorf("settlement lists a voided hold: %s", body)
		}
	})
}

// A hold not captured by capture_before lapses: capture and void are
// refused with authorization_expired, reads show it voided (lapsed), and
// payment.voided is told once, by whoever saw it first.
func TestHoldLapse(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		cfg, clk := pinned(dbURL, time.Minute)
		sb := sandboxtest.New(t, cfg)
		ctx := context.Background()
		h1, err1 := sb.Client.Charge(ctx, holdReq("h1", "pm_ok"))
		h2, err2 := sb.Client.Charge(ctx, holdReq("h2", "pm_ok"))
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		clk.Set(h1.CaptureBefore) // capture_before itself is too late
		if _, err := sb.Client.Capture(ctx, captureReq("c1", h1.ID, "")); !domain.IsProviderRequestError(err, "authorization_expired") {
			t.Errorf("Capture(at capture_before) = %v, want authorization_expired", err)
		}
		if _, err := sb.Client.Void(ctx, voidReq("v1", h1.ID)); !domain.IsProviderRequestError(err, "authorization_expired") {
			t.Errorf("Void(a lapsed hold) = %v, want authorization_expired", err)
		}
		got, err := sb.Client.FindCharge(ctx, h1.ID)
		if err != nil || got.Status != domain.ChargeVoided || got.VoidReason != domain.VoidLapsed || got.Captured {
			t.Errorf("FindCharge(lapsed) = %+v, %v; want voided, lapsed", got, err)
		}
		// The worker's pass lapses the hold nobody looked at, once.
		if n, err := sb.LapseHolds(ctx); n != 1 || err != nil {
			t.Errorf("LapseHolds = %d, %v; want 1 (h2)", n, err)
		}
		if n, err := sb.LapseHolds(ctx); n != 0 || err != nil {
			t.Errorf("LapseHolds again = %d, %v; want 0", n, err)
		}
		if got, err := sb.Client.GetCharge(ctx, domain.Attempt{ID: "h2"}); err != nil || got.VoidReason != domain.VoidLapsed {
			t.Errorf("GetCharge(h2) = %+v, %v; want lapsed", got, err)
		}
		wantEvents(t, sb, h1.ID, "payment.authorized", "payment.voided")
		wantEvents(t, sb, h2.ID, "payment.authorized", "payment.voided")
	})
}

// Every magic method works with manual capture: what succeeds is held,
// what fails holds nothing, and the failure modes stay what they are.
func TestHoldMagicMethods(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		sb := sandboxtest.New(t, fastConfig(dbURL))
		ctx := context.Background()
		tests := []struct {
			method string
			reply  domain.ChargeStatus // "" means the reply is an unknown outcome
			final  domain.ChargeStatus // after the async delay
		}{
			{"pm_ok", domain.ChargeAuthorized, domain.ChargeAuthorized},
			{"pm_declined", domain.ChargeFailed, domain.ChargeFailed},
			{"pm_insufficient_funds", domain.ChargeFailed, domain.ChargeFailed},
			{"pm_async", domain.ChargePending, domain.ChargeAuthorized},
			{"pm_async_fail", domain.ChargePending, domain.ChargeFailed},
			{"pm_timeout", "", domain.ChargeAuthorized},
			{"pm_error", "", domain.ChargeFailed},
			{"pm_dispute", domain.ChargeAuthorized, domain.ChargeAuthorized},
		}
		for _, tt := range tests {
			got, err := sb.Client.Charge(ctx, holdReq(tt.method, tt.method))
			if tt.reply == "" {
				if !errors.Is(err, domain.ErrProviderUnavailable) {
					t.Errorf("Charge(manual %s) = %+v, %v; want an unknown outcome", tt.method, got, err)
				}
			} else if err != nil || got.Status != tt.reply {
				t.Errorf("Charge(manual %s) = %+v, %v; want %s", tt.method, got, err, tt.reply)
			}
		}
		time.Sleep(30 * time.Millisecond)
		if _, err := sb.ResolvePending(ctx); err != nil {
			t.Fatal(err)
		}
		for _, tt := range tests {
			got, err := sb.Client.GetCharge(ctx, domain.Attempt{ID: tt.method})
			held := tt.final == domain.ChargeAuthorized
			if err != nil || got.Status != tt.final || got.CaptureBefore.IsZero() != !held || !got.AmountCaptured.IsZero() {
				t.Errorf("GetCharge(manual %s) = %+v, %v; want %s, capture_before set: %v", tt.method, got, err, tt.final, held)
			}
		}
		wantEvents(t, sb, mustID(t, sb, "pm_async"), "payment.authorized")
		wantEvents(t, sb, mustID(t, sb, "pm_error")) // a processor fault tells nothing

		// pm_dispute's dispute waits for the capture, and takes what it moved.
		if n, err := sb.OpenDisputes(ctx); n != 0 || err != nil {
			t.Errorf("OpenDisputes before the capture = %d, %v; want 0", n, err)
		}
		disputed := mustID(t, sb, "pm_dispute")
		if _, err := sb.Client.Capture(ctx, captureReq("cap-d", disputed, "2.00")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond)
		if n, err := sb.OpenDisputes(ctx); n != 1 || err != nil {
			t.Fatalf("OpenDisputes after the capture = %d, %v; want 1", n, err)
		}
		if ds, err := sb.Disputes(ctx); err != nil || len(ds) != 1 || !ds[0].Amount.Equal(dec("2.00")) {
			t.Errorf("Disputes = %+v, %v; want one of 2.00", ds, err)
		}
		// A capture of a pm_timeout hold is carried out, and its reply lost too.
		timeout := mustID(t, sb, "pm_timeout")
		if _, err := sb.Client.Capture(ctx, captureReq("cap-t", timeout, "")); !errors.Is(err, domain.ErrProviderUnavailable) {
			t.Errorf("Capture(pm_timeout) = %v, want an unknown outcome", err)
		}
		if got, err := sb.Client.FindCharge(ctx, timeout); err != nil || !got.Captured || !got.AmountCaptured.Equal(dec("12.30")) {
			t.Errorf("FindCharge(pm_timeout after capture) = %+v, %v; want all 12.30 captured", got, err)
		}
		// A hold that never was is not capturable.
		if _, err := sb.Client.Capture(ctx, captureReq("cap-f", mustID(t, sb, "pm_declined"), "")); !domain.IsProviderRequestError(err, "charge_not_capturable") {
			t.Errorf("Capture(declined) = %v, want charge_not_capturable", err)
		}
	})
}

// mustID is the sandbox id of the charge under key.
func mustID(t *testing.T, sb *sandboxtest.Sandbox, key string) string {
	t.Helper()
	ch, err := sb.Client.GetCharge(context.Background(), domain.Attempt{ID: key})
	if err != nil {
		t.Fatalf("GetCharge(%s) = %v", key, err)
	}
	return ch.ID
}

// Bad requests are refused with a code, and an automatic charge is no hold.
func TestHoldRefusals(t *testing.T) {
	sb := sandboxtest.New(t, fastConfig(sandboxtest.SQLiteURL(t)))
	ctx := context.Background()
	auto, err := sb.Client.Charge(ctx, chargeReq("a1", "pm_ok"))
	if err != nil || auto.CaptureMethod != "" || auto.Captured || !auto.CaptureBefore.IsZero() || !auto.Settled().Equal(dec("12.30")) {
		t.Fatalf("Charge(automatic) = %+v, %v; want no hold fields", auto, err)
	}
	if _, body := get(t, sb.URL+"/v1/charges/a1"); strings.Contains(body, "capture") {
		t.Errorf("an automatic charge's JSON names holds: %s", body)
	}
	if _, err := sb.Client.Capture(ctx, captureReq("c1", auto.ID, "")); !domain.IsProviderRequestError(err, "charge_not_capturable") {
		t.Errorf("Capture(automatic) = %v, want charge_not_capturable", err)
	}
	if _, err := sb.Client.Void(ctx, voidReq("v1", auto.ID)); !domain.IsProviderRequestError(err, "charge_not_capturable") {
		t.Errorf("Void(automatic) = %v, want charge_not_capturable", err)
	}
	if _, err := sb.Client.Capture(ctx, captureReq("c2", "ch_nope", "")); !errors.Is(err, domain.ErrChargeNotFound) {
		t.Errorf("Capture(unknown) = %v, want ErrChargeNotFound", err)
	}
	held, err := sb.Client.Charge(ctx, holdReq("h1", "pm_ok"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Client.Capture(ctx, captureReq("c3", held.ID, "12.31")); !domain.IsProviderRequestError(err, "amount_too_large") {
		t.Errorf("Capture(12.31 of 12.30) = %v, want amount_too_large", err)
	}
	eur := captureReq("c4", held.ID, "1.00")
	eur.Currency = "EUR"
	if _, err := sb.Client.Capture(ctx, eur); !domain.IsProviderRequestError(err, "currency_mismatch") {
		t.Errorf("Capture(EUR of USD) = %v, want currency_mismatch", err)
	}
	if _, err := sb.Client.Charge(ctx, chargeReq("h1", "pm_ok")); !domain.IsProviderRequestError(err, "idempotency_key_reused") {
		t.Errorf("Charge(h1 automatic, after manual) = %v, want idempotency_key_reused", err)
	}
	for _, tt := range []struct{ path, key, body, code string }{
		{"/v1/charges", "k1", `{"order_id":"o","amount":"1.00","currency":"USD","payment_method":"pm_ok","capture_method":"later"}`, "validation_failed"},
		{"/v1/charges/" + held.ID + "/capture", "", `{}`, "idempotency_key_missing"},
		{"/v1/charges/" + held.ID + "/capture", "k2", `{"amount":"-1.00"}`, "validation_failed"},
		{"/v1/charges/" + held.ID + "/capture", "k3", `{"amount":"1.00","tip":"1"}`, "invalid_json"},
	} {
		if code, body := post(t, sb.URL+tt.path, tt.key, "application/json", tt.body); code != http.StatusBadRequest || !strings.Contains(body, tt.code) {
			t.Errorf("POST %s %s = %d %s, want 400 %s", tt.path, tt.body, code, body, tt.code)
		}
	}
	// Nothing refused moved the hold: it captures whole, with no body.
	if code, body := post(t, sb.URL+"/v1/charges/"+held.ID+"/capture", "k4", "", ""); code != http.StatusOK || !strings.Contains(body, `"amount_captured":"12.30"`) {
		t.Errorf("POST capture without a body = %d %s, want all 12.30 captured", code, body)
	}
}

// 20 captures and voids of one hold, each under its own key, race: exactly
// one wins, every other is refused with what happened, and one event tells it.
func TestHoldRace(t *testing.T) {
	sandboxtest.ForEachDatabase(t, func(t *testing.T, dbURL string) {
		sb := sandboxtest.New(t, fastConfig(dbURL))
		ctx := context.Background()
		held, err := sb.Client.Charge(ctx, holdReq("h1", "pm_ok"))
		if err != nil {
			t.Fatal(err)
		}
		const n = 20
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			won     []domain.Charge
			refused = map[string]int{}
		)
		for i := range n {
			wg.Go(func() {
				var ch domain.Charge
				var err error
				if i%2 == 0 {
					ch, err = sb.Client.Capture(ctx, captureReq(fmt.Sprintf("cap-%d", i), held.ID, "10.00"))
				} else {
					ch, err = sb.Client.Void(ctx, voidReq(fmt.Sprintf("void-%d", i), held.ID))
				}
				mu.Lock()
				defer mu.Unlock()
				var re *domain.ProviderRequestError
				switch {
				case err == nil:
					won = append(won, ch)
				case errors.As(err, &re):
					refused[re.Code]++
				default:
					t.Errorf("request %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		if len(won) != 1 {
			t.Fatalf("%d of %d captures and voids won (refused: %v), want exactly 1", len(won), n, refused)
		}
		final, err := sb.Client.FindCharge(ctx, held.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantCode := "charge_voided"
		if final.Captured {
			wantCode = "charge_already_captured"
			if !final.AmountCaptured.Equal(dec("10.00")) || final.Status != domain.ChargeSucceeded {
				t.Errorf("captured hold = %+v, want 10.00 captured", final)
			}
		}
		if refused[wantCode] != n-1 {
			t.Errorf("refusals = %v, want %d × %s", refused, n-1, wantCode)
		}
		if won[0].Status != final.Status {
			t.Errorf("the winner's answer %s, the charge %s", won[0].Status, final.Status)
		}
		types := eventTypes(t, sb, held.ID)
		if len(types) != 2 {
			t.Errorf("events = %v, want payment.authorized and one of captured or voided", types)
		}
	})
}

// A hold's steps reach the webhook URL signed like every event, and payd
// reads each as an event it stores without applying (ADR 60: hints).
func TestHoldWebhooks(t *testing.T) {
	secret := sandboxtest.Secret(t)
	rcv := newReceiver(t, secret, 0)
	cfg := fastConfig(sandboxtest.SQLiteURL(t))
	cfg.WebhookURL, cfg.WebhookSecret = rcv.URL, secret
	sb := sandboxtest.Start(t, cfg)
	ctx := context.Background()
	h1, err1 := sb.Client.Charge(ctx, holdReq("h1", "pm_ok"))
	h2, err2 := sb.Client.Charge(ctx, holdReq("h2", "pm_async"))
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if _, err := sb.Client.Capture(ctx, captureReq("c1", h1.ID, "")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "h2 authorized", func() bool {
		ch, err := sb.Client.FindCharge(ctx, h2.ID)
		return err == nil && ch.Status == domain.ChargeAuthorized
	})
	if _, err := sb.Client.Void(ctx, voidReq("v1", h2.ID)); err != nil {
		t.Fatal(err)
	}
	got := rcv.waitAccepted(t, 4)
	want := map[string][]domain.ProviderEventType{
		"h1": {domain.EventPaymentAuthorized, domain.EventPaymentCaptured},
		"h2": {domain.EventPaymentAuthorized, domain.EventPaymentVoided},
	}
	for key, types := range want {
		evs := byKey(got, key)
		if len(evs) != len(types) {
			t.Fatalf("events of %s = %+v, want %v", key, evs, types)
		}
		for i, ev := range evs {
			if ev.Type != types[i] || ev.ChargeID == "" || ev.Type.Known() {
				t.Errorf("event %d of %s = %+v, want %s, with its charge, not applied by payd", i, key, ev, types[i])
			}
		}
	}
}
