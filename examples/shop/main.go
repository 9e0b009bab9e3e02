// Command shop is a merchant's server in front of payd, small enough to
// start from, in the style of Stripe's sample integrations:
//
//   - it keeps its catalogue in payd (catalogue.go): at start it creates or
//     updates its products through the generated client with the merchant
//     key, idempotently, so a restart neither duplicates nor fails;
//   - it serves one page (static/) listing the products; when the page asks,
//     it creates the order with the merchant key, and hands the browser only
//     the order's id and client secret, with which the browser pays
//     (orders.go);
//   - it receives payd's order events at POST /webhooks/payd, verifies their
//     Standard Webhooks signature, and marks its orders paid, once per
//     webhook-id (webhooks.go).
//
// Configuration is by environment: PAYD_URL, PAYD_MERCHANT_KEY,
// PAYD_NOTIFY_SECRET and SHOP_ADDR (or -addr). See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "shop:", err)
		os.Exit(1)
	}
}

// config is the shop's settings.
type config struct {
	paydURL       string   // PAYD_URL
	merchantKey   string   // PAYD_MERCHANT_KEY: sk_...; never sent to the browser
	notifySecrets []string // PAYD_NOTIFY_SECRET: whsec_... (several, space-separated, while payd rotates it)
	addr          string   // SHOP_ADDR or -addr
}

func loadConfig(args []string, getenv func(string) string) (config, error) {
	addr := getenv("SHOP_ADDR")
	if addr == "" {
		addr = "127.0.0.1:4242"
	}
	fs := flag.NewFlagSet("shop", flag.ContinueOnError)
	fs.StringVar(&addr, "addr", addr, "listen address, also SHOP_ADDR (:0 picks a free port)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	c := config{paydURL: strings.TrimRight(getenv("PAYD_URL"), "/"), merchantKey: getenv("PAYD_MERCHANT_KEY"),
		notifySecrets: strings.Fields(getenv("PAYD_NOTIFY_SECRET")), addr: addr}
	if c.paydURL == "" {
		c.paydURL = "http://127.0.0.1:8080"
	}
	var missing []string
	if !strings.HasPrefix(c.merchantKey, "sk_") {
		missing = append(missing, "PAYD_MERCHANT_KEY must hold payd's merchant key (sk_..., printed in payd's development banner)")
	}
	if len(c.notifySecrets) == 0 {
		missing = append(missing, "PAYD_NOTIFY_SECRET must hold the whsec_... secret payd signs its events with")
	}
	if len(missing) > 0 {
		return config{}, errors.New(strings.Join(missing, "; "))
	}
	return c, nil
}

// run starts the shop: it listens first (so payd's events can arrive
// while it starts), then brings its catalogue into payd, retrying while
// payd is not up yet, and serves until ctx ends.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(args, getenv)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	hooks, err := newWebhooks(cfg.notifySecrets, log, stdout)
	if err != nil {
		return err
	}
	payd, err := newPayd(cfg.paydURL, cfg.merchantKey)
	if err != nil {
		return err
	}
	s := &shop{payd: payd, catalogue: catalogue, orders: newOrderBook(), hooks: hooks, log: log, out: stdout}
	hooks.orders = s.orders
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	synced := make(chan error, 1)
	go func() { synced <- s.syncUntilDone(ctx) }()

	select {
	case err := <-served:
		return err
	case err := <-synced:
		if err != nil && ctx.Err() == nil {
			_ = srv.Close()
			if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
				return errors.Join(err, serr)
			}
			return err
		}
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// syncUntilDone brings the catalogue into payd, retrying while payd cannot
// be reached or answers 429 or 5xx: started together, the shop is often up
// before payd (whose first build takes a while). A refusal (a wrong key, a
// product payd refuses) ends the shop.
func (s *shop) syncUntilDone(ctx context.Context) error {
	wait := 250 * time.Millisecond
	for {
		err := s.syncCatalogue(ctx)
		if err == nil {
			s.ready.Store(true)
			fmt.Fprintf(s.out, "catalogue in payd: %d products\n", len(s.catalogue))
			return nil
		}
		var refused *refusal
		if errors.As(err, &refused) {
			return fmt.Errorf("catalogue: %w", err)
		}
		s.log.Warn("catalogue not in payd yet, retrying", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}
