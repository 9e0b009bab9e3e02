package sandbox_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/sandbox"
	"github.com/payd/payd/sandbox/sandboxtest"
)

// Serve is how payd runs the sandbox (in-process and as `payd sandbox`):
// it answers the API, runs the workers, and returns nil once ctx ends.
func TestServeRunsWorkersAndStops(t *testing.T) {
	secret := sandboxtest.Secret(t)
	rcv := newReceiver(t, secret, 0)
	cfg := fastConfig(sandboxtest.SQLiteURL(t))
	cfg.WebhookURL, cfg.WebhookSecret, cfg.Logger = rcv.URL, secret, slog.New(slog.DiscardHandler)
	srv, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()

	client := provider.NewClient("http://" + ln.Addr().String())
	ch, err := client.Charge(ctx, chargeReq("k", "pm_async"))
	if err != nil || ch.Status != domain.ChargePending {
		t.Fatalf("Charge(pm_async) = %+v, %v; want pending", ch, err)
	}
	if ev := rcv.waitAccepted(t, 1)[0].event; ev.Type != domain.EventPaymentSucceeded || ev.ChargeID != ch.ID {
		t.Fatalf("event = %+v, want payment.succeeded for %s", ev, ch.ID)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve = %v, want nil after ctx ends", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after ctx ended")
	}
}

func TestConfigRefusals(t *testing.T) {
	dir := t.TempDir()
	for name, cfg := range map[string]sandbox.Config{
		"bad database URL":   {DatabaseURL: "postgres://x"},
		"url without secret": {DatabaseURL: "sqlite://" + dir + "/a.db", WebhookURL: "http://127.0.0.1:1/hook"},
		"secret not whsec":   {DatabaseURL: "sqlite://" + dir + "/b.db", WebhookSecret: "hunter2"},
		"secret not base64":  {DatabaseURL: "sqlite://" + dir + "/c.db", WebhookSecret: "whsec_***"},
		"relative webhook":   {DatabaseURL: "sqlite://" + dir + "/d.db", WebhookURL: "/hook", WebhookSecret: sandboxtest.Secret(t)},
		"mysql without db":   {DatabaseURL: "mysql://root:@127.0.0.1:3306/"},
	} {
		srv, err := sandbox.New(cfg)
		if err == nil {
			srv.Close()
			t.Errorf("New(%s) = nil error, want a refusal", name)
			continue
		}
		if len(cfg.WebhookSecret) > len("whsec_") && strings.Contains(err.Error(), cfg.WebhookSecret) {
			t.Errorf("New(%s) error echoes the secret: %v", name, err)
		}
	}
}
