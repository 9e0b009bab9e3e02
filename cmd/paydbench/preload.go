package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os/exec"
	"time"

	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/internal/preload"
)

// preloadFor migrates db with payd's own migrate command (bin) and
// preloads n orders into it, unless a kept database holds them already.
func preloadFor(ctx context.Context, bin string, db *database, n int, progress io.Writer) (*preload.Stats, error) {
	cmd := exec.CommandContext(ctx, bin, "migrate", "up", "-database-url", db.URL)
	cmd.Env = paydEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("payd migrate: %w\n%s", err, out)
	}
	write, read, err := db.open(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		_ = write.Close()
		if read != write {
			_ = read.Close()
		}
	}()
	mysqlDB := db.Dialect == "mysql"
	fmt.Fprintf(progress, "paydbench: preloading %d orders\n", n)
	st, err := preload.Load(ctx, write, mysqlDB, n, time.Now(), progress)
	if err != nil {
		return nil, err
	}
	if st.Bytes, err = preload.Bytes(ctx, write, mysqlDB); err != nil {
		return nil, err
	}
	// A kept database was used by another run's payd, with another
	// PAYD_SECRET_KEY: payd refuses a key other than the one the database
	// has seen (its check row), and could not unseal the endpoint's
	// secret. This run's payd takes the database over: the check row goes
	// (payd writes its own), the secret is sealed anew. Tokens of earlier
	// runs' customers stop working, which no run needs.
	if _, err := write.ExecContext(ctx, "DELETE FROM secret_key_check"); err != nil {
		return nil, fmt.Errorf("let this run's payd take the preload over: %w", err)
	}
	sealer, err := idempotency.NewSealer(secretKey)
	if err != nil {
		return nil, err
	}
	sealed, err := sealer.Seal([]byte("whsec_" + base64.StdEncoding.EncodeToString(randomBytes())))
	if err != nil {
		return nil, err
	}
	if _, err := write.ExecContext(ctx, "UPDATE notify_endpoints SET secret_sealed = ? WHERE id = ?", sealed, preload.Endpoint); err != nil {
		return nil, fmt.Errorf("seal the preloaded endpoint's secret: %w", err)
	}
	return &st, nil
}

// rollupWait bounds how long waitRollup waits.
const rollupWait = 20 * time.Minute

// waitRollup waits until payd's overview rollup (ADR 0065) has counted
// the preload's hours: a payd that has run for a while has, and its first
// passes over 90 days of history would otherwise run beside the pays
// measured.
func waitRollup(ctx context.Context, db *database, progress io.Writer) error {
	write, read, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer func() {
		_ = write.Close()
		if read != write {
			_ = read.Close()
		}
	}()
	start := time.Now()
	fmt.Fprintln(progress, "paydbench: waiting for payd to roll the preload's hours up for the overview")
	for {
		var through string
		if err := write.QueryRowContext(ctx, "SELECT "+textOf(db.Dialect, "rolled_through")+" FROM stats_rollup WHERE id = 1").Scan(&through); err != nil {
			return fmt.Errorf("read the overview's rollup: %w", err)
		}
		if through >= ts(time.Now().Add(-2*time.Hour)) {
			fmt.Fprintf(progress, "paydbench: rolled up in %s\n", time.Since(start).Round(time.Second))
			return nil
		}
		if time.Since(start) > rollupWait {
			return fmt.Errorf("payd's overview rollup reached only %s in %s", through, rollupWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// textOf is column read as payd's time text on the dialect.
func textOf(dialect, column string) string {
	if dialect == "mysql" {
		return "DATE_FORMAT(" + column + ", '%Y-%m-%d %H:%i:%s.%f')"
	}
	return column
}
