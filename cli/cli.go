// Package cli is payd's command line: the subcommands and their help, the
// operators' admin verbs and the demo, the last two on the generated client.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/payd/payd/app"
)

// Main is payd's whole life: parse the command line, then serve, migrate,
// run the sandbox, the demo or an admin verb until ctx ends. End-to-end
// tests call it on port 0. Help that was asked for is a success.
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
		switch a := args[0]; {
		case a == "-h" || a == "-help" || a == "--help":
			printUsage(stdout)
			return nil
		case !strings.HasPrefix(a, "-"):
			sub, args = a, args[1:]
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
		return migrate(ctx, args, getenv, stdout)
	case "sandbox":
		cfg, err := loadConfig(sub, args, getenv, stdout)
		if err != nil {
			return err
		}
		return app.RunSandbox(ctx, cfg, stdout, stderr)
	case "demo":
		return demo(ctx, args, stdout)
	case "admin": // operators' CLI against a running payd (admin_cli.go)
		return adminCommand(ctx, args, getenv, stdout)
	case "healthcheck": // a container's HEALTHCHECK (healthcheck.go)
		return healthcheck(ctx, args, getenv, stdout)
	case "version":
		if err := parseFlags(flag.NewFlagSet("payd version", flag.ContinueOnError), sub, args, stdout); err != nil {
			return err
		}
		printVersion(stdout)
		return nil
	case "help":
		return help(args, stdout)
	}
	return fmt.Errorf("unknown command %q: run 'payd help' for the list", sub)
}

// loadConfig reads the environment, then the flags of subcommand sub. -h
// describes sub on help and returns errHelpShown.
func loadConfig(sub string, args []string, getenv func(string) string, help io.Writer) (app.Config, error) {
	return app.LoadConfig(sub, getenv, func(fs *flag.FlagSet) error { return parseFlags(fs, sub, args, help) })
}

func migrate(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) > 0 && (args[0] == "up" || args[0] == "status") {
		cfg, err := loadConfig("migrate", args[1:], getenv, stdout)
		if err != nil {
			return err
		}
		return app.Migrate(ctx, args[0], cfg, stdout)
	}
	if _, err := loadConfig("migrate", args, getenv, stdout); err != nil { // -h
		return err
	}
	return errors.New("usage: payd migrate up|status (run 'payd help migrate')")
}
