package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/payd/payd/internal/version"
)

// command is one of payd's subcommands, for `payd help`.
type command struct {
	name, args, summary, about string
}

// commands are payd's subcommands, as `payd help` lists them.
var commands = []command{
	{"serve", "[flags]", "run the HTTP API (the default command)",
		"Serves the HTTP API until interrupted, applying pending migrations first. Without\n" +
			"PAYD_PROVIDER_URL it starts the sandbox payment provider in-process. In development,\n" +
			"secrets not set are made up once and kept beside the database (ADR 12).\n" +
			"Tracing is configured by the OpenTelemetry OTEL_* variables alone (README, \"Traces\")."},
	{"migrate", "up|status [flags]", "apply pending database migrations, or list them",
		"up applies the pending migrations; status lists every migration and whether it is applied."},
	{"sandbox", "[flags]", "run the sandbox payment provider on its own",
		"Runs the sandbox provider (the provider API payd's PAYD_PROVIDER_URL points at), delivering\n" +
			"its webhooks to PAYD_SANDBOX_WEBHOOK_URL signed with PAYD_WEBHOOK_SECRET."},
	{"demo", "[flags]", "walk a running payd through register, order, pay, replay and /v1/requests/{key}",
		"Drives a running payd (start it first with `payd serve`) through the README's walkthrough\n" +
			"and prints each exchange: method, path, status and body. Tokens are shortened in the output."},
	// admin: the operators' CLI (admin_cli.go, admin_verbs.go).
	{"admin", "orders|reconcile|discrepancies|endpoints|events VERB [flags] | stats [flags]", "search orders, reconcile, resolve discrepancies, manage the shop's endpoints, see how payments go on a running payd", adminAbout},
	// merchant: the merchant's CLI (merchant_cli.go).
	{"merchant", "products|orders VERB [flags]", "list, create, reprice and stock the catalogue's products, and ship paid orders, on a running payd", merchantAbout},
	{"healthcheck", "[-url URL] [-timeout D]", "exit 0 if payd answers 2xx, 1 if not: a container's HEALTHCHECK", healthcheckAbout},
	{"version", "", "print payd's version and VCS revision (also payd --version, payd -version)", "Prints the version and revision the build stamped with -ldflags (the Dockerfile does), else\n" +
		"the build information Go recorded in the binary."},
	{"help", "[command]", "describe payd, or one command and its flags", "payd help COMMAND describes COMMAND and lists its flags only."},
}

// errHelpShown ends a command whose help was asked for: success, exit 0.
var errHelpShown = errors.New("help shown")

// printUsage describes payd and lists its commands.
func printUsage(w io.Writer) {
	fmt.Fprintln(w, "payd is a payment and order backend.\n\nusage: payd [command] [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nEvery flag of serve, migrate and sandbox has an environment variable (PAYD_LEASE → -lease).\nRun 'payd help COMMAND' for one command's flags.\n\n"+
		"Exit status: 0 on success (help asked for included), 1 on a failure, 2 on a command line payd\n"+
		"cannot take (an unknown command or flag, a flag's bad value, a missing or extra argument);\n"+
		"payd healthcheck exits 0 or 1 only.")
}

// printCommandUsage describes one command and the flags of fs, if any.
func printCommandUsage(w io.Writer, name string, fs *flag.FlagSet) {
	for _, c := range commands {
		if c.name != name {
			continue
		}
		fmt.Fprintf(w, "usage: payd %s %s\n\n%s\n\n%s\n", c.name, c.args, c.summary, c.about)
	}
	if fs == nil {
		return
	}
	fmt.Fprintln(w, "\nflags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// help is `payd help [command]`: what `payd COMMAND -h` prints, on
// stdout, defaults from the environment included.
func help(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	switch {
	case len(args) == 0:
		printUsage(stdout)
		return nil
	case len(args) > 1:
		return usagef("usage: payd help [command]")
	}
	switch name := args[0]; name {
	case "serve", "migrate", "sandbox", "demo", "healthcheck":
		err := runCommand(ctx, []string{name, "-h"}, getenv, stdout, stderr)
		if errors.Is(err, errHelpShown) {
			return nil
		}
		return err
	case "version", "help", "admin", "merchant":
		printCommandUsage(stdout, name, nil)
	default:
		return usagef("unknown command %q: run 'payd help' for the list", name)
	}
	return nil
}

// parseFlags parses args into fs: -h and --help describe the command on w
// (errHelpShown); a wrong flag or argument is a usage error that says where
// the right ones are listed.
func parseFlags(fs *flag.FlagSet, name string, args []string, w io.Writer) error {
	fs.SetOutput(io.Discard) // errors are returned, help goes to w
	fs.Usage = func() {}
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		printCommandUsage(w, name, fs)
		return errHelpShown
	}
	if err != nil {
		return usagef("%w (run 'payd help %s' for its flags)", err, name)
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments: %s (run 'payd help %s')", strings.Join(fs.Args(), " "), name)
	}
	return nil
}

// printVersion is `payd version`: the version and revision stamped at
// link time, else what Go recorded at build time (internal/version).
func printVersion(w io.Writer) {
	bi := version.Read()
	fmt.Fprintf(w, "payd %s\n  module    %s\n", bi.Version, bi.Module)
	if rev := bi.Revision; rev != "" {
		if bi.Modified {
			rev += " (with uncommitted changes)"
		}
		fmt.Fprintf(w, "  revision  %s\n", rev)
	} else {
		fmt.Fprintln(w, "  revision  unknown (built outside a git checkout, or with -buildvcs=false, and not stamped with -ldflags)")
	}
	if bi.Time != "" {
		fmt.Fprintf(w, "  committed %s\n", bi.Time)
	}
	fmt.Fprintf(w, "  go        %s\n", bi.Go)
}
