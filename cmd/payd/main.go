// Command payd is the payment/order backend: `payd serve` (the default)
// runs the HTTP API, `payd migrate up|status` manages the schema, `payd
// sandbox` runs the sandbox payment provider on its own, `payd demo` walks a
// running payd through a payment, `payd healthcheck` probes a running payd
// (a container's HEALTHCHECK) and `payd version` prints the build; `payd
// help COMMAND` describes each. It exits 0, 1 on a failure, or 2 on a
// command line it cannot take (cli.ExitStatus, ADR 41).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/payd/payd/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cli.Main(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "payd:", err)
		os.Exit(cli.ExitStatus(err))
	}
}
