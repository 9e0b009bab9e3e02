// Package cli is payd's command line: the subcommands and their help, the
// operators' admin verbs and the demo, the last two on the generated client.
package cli

import (
	"context"
	"errors"
	"flag"
	"io"
	"slices"
	"strings"

	"github.com/payd/payd/app"
)

// Main is payd's whole life: parse the command line, then serve, migrate,
// run the sandbox, the demo or an admin verb until ctx ends. End-to-end
// tests call it on port 0. Help that was asked for is a success, written
// on stdout; a usage written because of an error goes to stderr, and
// ExitStatus tells the caller the exit status of the error returned.
func Main(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	err := runCommand(ctx, args, getenv, stdout, stderr)
	if errors.Is(err, errHelpShown) {
		return nil
	}
	return err
}

func runCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub := "serve"
	if len(args) > 0 {
		switch a := args[0]; a {
		case "-h", "-help", "--help":
			if len(args) > 1 {
				return usagef("unexpected arguments after %s (run 'payd help COMMAND' for one command)", a)
			}
			printUsage(stdout)
			return nil
		case "-version", "--version":
			sub, args = "version", args[1:]
		default:
			if a == "" || a[0] != '-' {
				sub, args = a, args[1:]
			}
		}
	}
	switch sub {
	case "serve":
		cfg, err := loadConfig(sub, args, getenv, stdout)
		if err != nil {
			return err
		}
		return app.Run(ctx, cfg, stdout, stderr)
	case "migrate":
		return migrate(ctx, args, getenv, stdout, stderr)
	case "sandbox":
		cfg, err := loadConfig(sub, args, getenv, stdout)
		if err != nil {
			return err
		}
		return app.RunSandbox(ctx, cfg, stdout, stderr)
	case "demo":
		return demo(ctx, args, getenv, stdout)
	case "admin": // operators' CLI against a running payd (admin_cli.go)
		return adminCommand(ctx, args, getenv, stdout, stderr)
	case "merchant": // the merchant's CLI against a running payd (merchant_cli.go)
		return merchantCommand(ctx, args, getenv, stdout, stderr)
	case "healthcheck": // a container's HEALTHCHECK (healthcheck.go)
		return healthcheck(ctx, args, getenv, stdout)
	case "version":
		if err := parseFlags(flag.NewFlagSet("payd version", flag.ContinueOnError), sub, args, stdout); err != nil {
			return err
		}
		printVersion(stdout)
		return nil
	case "help":
		return help(ctx, args, getenv, stdout, stderr)
	}
	return usagef("unknown command %q: run 'payd help' for the list", sub)
}

// loadConfig reads the environment, then the flags of subcommand sub. -h
// describes sub on help and returns errHelpShown. A setting given as a
// flag is named by its flag in errors, which are then usage errors; one
// from the environment is named by its variable (exit 1).
func loadConfig(sub string, args []string, getenv func(string) string, help io.Writer) (app.Config, error) {
	cfg, err := app.LoadConfig(sub, getenv, func(fs *flag.FlagSet) error { return parseFlags(fs, sub, args, help) })
	if fe := (*app.FlagError)(nil); errors.As(err, &fe) {
		return cfg, usage(err)
	}
	return cfg, err
}

// migrate is `payd migrate up|status [flags]`; without up or status it
// writes its usage on stderr and fails as a usage error.
func migrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "up" || args[0] == "status") {
		cfg, err := loadConfig("migrate", args[1:], getenv, stdout)
		if err != nil {
			return err
		}
		return app.Migrate(ctx, args[0], cfg, stdout)
	}
	if verb := slices.IndexFunc(args, func(a string) bool { return a == "up" || a == "status" }); verb > 0 &&
		strings.HasPrefix(args[0], "-") && !slices.ContainsFunc(args[:verb], isHelp) {
		flagName, _, _ := strings.Cut(args[0], "=") // never its value: it may be a database URL
		return usagef("payd migrate takes flags after its verb: payd migrate %s %s ... (run 'payd help migrate')", args[verb], flagName)
	}
	if len(args) == 0 || args[0] == "" || args[0][0] == '-' { // -h, or flags before the verb
		if _, err := loadConfig("migrate", args, getenv, stdout); err != nil {
			return err
		}
	}
	printCommandUsage(stderr, "migrate", nil)
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		return usagef("unknown migrate command %q: want payd migrate up|status (run 'payd help migrate')", args[0])
	}
	return usagef("migrate needs up or status (the usage is above)")
}
