package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"

	"github.com/payd/payd/sandbox"
)

// sandboxKnobs parses PAYD_SANDBOX_DUPLICATES and PAYD_SANDBOX_REORDER
// (checked at start by check, used by sandboxConfig).
func sandboxKnobs(cfg *Config) (dups int, reorder bool, err error) {
	dups, err = strconv.Atoi(cfg.SandboxDuplicates)
	if err != nil || dups < 1 || dups > 10 {
		return 0, false, fmt.Errorf("PAYD_SANDBOX_DUPLICATES must be a whole number from 1 to 10, not %q", cfg.SandboxDuplicates)
	}
	reorder, err = strconv.ParseBool(cfg.SandboxReorder)
	if err != nil {
		return 0, false, fmt.Errorf("PAYD_SANDBOX_REORDER must be true or false, not %q", cfg.SandboxReorder)
	}
	return dups, reorder, nil
}

// sandboxConfig turns payd's settings into the sandbox's.
func sandboxConfig(cfg Config, webhookURL string, log *slog.Logger) (sandbox.Config, error) {
	dups, reorder, err := sandboxKnobs(&cfg)
	if err != nil {
		return sandbox.Config{}, err
	}
	return sandbox.Config{
		DatabaseURL: cfg.SandboxDatabaseURL, WebhookURL: webhookURL, WebhookSecret: webhookSecrets(cfg.WebhookSecret)[0],
		AsyncDelay: cfg.SandboxAsyncDelay, AuthorizationTTL: cfg.SandboxAuthorizationTTL, Duplicates: dups, Reorder: reorder, Logger: log,
	}, nil
}

// startSandbox runs the sandbox in-process on ln (bound by Build on
// PAYD_SANDBOX_ADDR: loopback, a free port by default) and returns how to
// stop it and where it listens. The sandbox owns ln from here on.
func startSandbox(ctx context.Context, cfg Config, ln net.Listener, webhookURL string, log *slog.Logger) (func(), string, error) {
	sc, err := sandboxConfig(cfg, webhookURL, log)
	if err != nil {
		return nil, "", err
	}
	sb, err := sandbox.New(sc)
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := sb.Serve(ctx, ln); err != nil {
			log.Error("sandbox stopped", "err", err)
		}
	}()
	stop := func() {
		cancel()
		<-done
		sb.Close()
	}
	log.Info("sandbox listening", "addr", ln.Addr().String())
	return stop, ln.Addr().String(), nil
}

// RunSandbox is `payd sandbox`: the provider on its own, delivering
// webhooks to PAYD_SANDBOX_WEBHOOK_URL.
func RunSandbox(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	log := newLogger(cfg, stderr)
	sc, err := sandboxConfig(cfg, cfg.SandboxWebhookURL, log)
	if err != nil {
		return err
	}
	// Bound before the sandbox opens its database: a wrong address or a
	// port in use creates no file. A database this start created is
	// removed if the sandbox cannot open it.
	ln, err := net.Listen("tcp", cfg.SandboxAddr)
	if err != nil {
		return err
	}
	defer ln.Close()
	var files startFiles
	files.createDB(cfg.SandboxDatabaseURL)
	sb, err := sandbox.New(sc)
	if err != nil {
		files.remove()
		return err
	}
	defer sb.Close()
	fmt.Fprintf(stdout, "payd sandbox listening on http://%s\n", ln.Addr())
	if len(cfg.generated) > 0 && cfg.Env != "production" {
		fmt.Fprintf(stdout, "  PAYD_WEBHOOK_SECRET=%s  (made up for this run; give payd the same one)\n", cfg.WebhookSecret)
	}
	return sb.Serve(ctx, ln)
}
