package app

import (
	"flag"
	"io"
)

// testWebhookSecret is a Standard Webhooks secret for settings tests.
const testWebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// loadConfig is LoadConfig with args parsed as the command line parses
// them, help and errors discarded.
func loadConfig(sub string, args []string, getenv func(string) string, _ io.Writer) (Config, error) {
	return LoadConfig(sub, getenv, func(fs *flag.FlagSet) error {
		fs.SetOutput(io.Discard)
		return fs.Parse(args)
	})
}
