package app

import (
	"fmt"
	"io"
	"strings"
)

// printWelcome tells a developer how to try payd, with the secrets made up
// for this run. In production nothing secret is printed.
func printWelcome(w io.Writer, cfg Config, base string) {
	fmt.Fprintf(w, "payd listening on %s\n", base)
	if cfg.Env == "production" {
		if cfg.sandboxURL != "" {
			fmt.Fprintf(w, "sandbox provider (in-process) listening on %s\n", cfg.sandboxURL)
		}
		return
	}
	for _, name := range cfg.generated {
		val := map[string]string{"PAYD_ADMIN_TOKEN": cfg.AdminToken, "PAYD_WEBHOOK_SECRET": cfg.WebhookSecret, "PAYD_SECRET_KEY": cfg.SecretKey,
			"PAYD_MERCHANT_KEY": cfg.MerchantKey}[name]
		if cfg.secretsFile == "" {
			fmt.Fprintf(w, "  %s=%s  (made up for this run; set it to keep it)\n", name, val)
			continue
		}
		fmt.Fprintf(w, "  %s=%s\n", name, val)
	}
	if cfg.secretsFile != "" {
		fmt.Fprintf(w, "  (development secrets kept in %s, mode 0600, and reused at every start; a variable set wins)\n", cfg.secretsFile)
	}
	provider := "sandbox in-process (pay with pm_ok, pm_declined, pm_insufficient_funds, pm_async, pm_async_fail, pm_timeout, pm_error, pm_dispute)"
	if cfg.sandboxURL != "" {
		// Where the sandbox listens: its charges, and the settlement file
		// an operator may upload to a reconciliation, can be fetched there.
		provider = fmt.Sprintf("sandbox in-process at %s (pay with pm_ok, pm_declined, pm_insufficient_funds, pm_async, pm_async_fail, pm_timeout, pm_error, pm_dispute;\n            settlement file: %s/v1/settlements/YYYY-MM-DD.csv)", cfg.sandboxURL, cfg.sandboxURL)
	}
	if cfg.ProviderURL != "" {
		provider = redactURL(cfg.ProviderURL)
	}
	if cfg.Stripe.Provider == "stripe" { // the key is never printed
		provider = "Stripe (pay with pm_card_visa, pm_card_chargeDeclined, ... in test mode; webhooks at " + base + "/v1/webhooks/stripe)"
	}
	fmt.Fprintf(w, "  database: %s\n  provider: %s\n  start page: %s/ (links the pages below, the OpenAPI document and the problem types)\n  checkout page: %s/checkout\n  operators' console: %s/admin (sign in with an admin token)\n\n", redactURL(cfg.DatabaseURL), provider, base, base, base)
	fmt.Fprint(w, strings.NewReplacer("@URL@", base, "@MERCHANT_KEY@", cfg.MerchantKey).Replace(walkthrough))
}

// walkthrough runs as pasted into a POSIX shell with curl (sed picks the
// token and the order id out of the replies), as often as pasted: the
// registration key is the README's, which replays the same customer and
// token (after a restart too, ADR 12), and the payment key is made from the
// new order's id, so each paste pays its own order once.
const walkthrough = `Try it: payd demo -url @URL@ (from the source tree: go run ./cmd/payd demo -url @URL@)
runs the walkthrough below and prints each exchange, or paste:

  BASE=@URL@
  # register (the key makes a retry safe: the same key returns the same customer and token)
  REPLY=$(curl -s -X POST $BASE/v1/customers -H 'Content-Type: application/json' \
       -H 'Idempotency-Key: demo-register-1' -d '{"email":"ada@example.com","name":"Ada"}'); echo "$REPLY"
  TOKEN=$(echo "$REPLY" | sed -n 's/.*"token":"\([^"]*\)".*/\1/p')

  # the merchant's server puts green tea in the catalogue: only the merchant sets a price
  curl -s -X POST $BASE/v1/products -H 'Authorization: Bearer @MERCHANT_KEY@' -H 'Content-Type: application/json' \
       -H 'Idempotency-Key: demo-product-tea' -d '{"sku":"tea","name":"Green tea","unit_price":"4.95","currency":"USD"}'; echo

  # the buyer orders two by SKU; payd prices them from the catalogue
  REPLY=$(curl -s -X POST $BASE/v1/orders -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
       -d '{"items":[{"sku":"tea","quantity":2}]}'); echo "$REPLY"
  ORDER=$(echo "$REPLY" | sed -n 's/^{"id":"\([^"]*\)".*/\1/p')

  # pay it, then send the very same request again: same answer, Idempotent-Replayed: true, one charge
  KEY=pay-$ORDER   # a new key for each payment, made from the order id
  curl -si -X POST $BASE/v1/orders/$ORDER/pay -H "Authorization: Bearer $TOKEN" \
       -H 'Content-Type: application/json' -H "Idempotency-Key: $KEY" -d '{"payment_method":"pm_ok"}'; echo
  curl -si -X POST $BASE/v1/orders/$ORDER/pay -H "Authorization: Bearer $TOKEN" \
       -H 'Content-Type: application/json' -H "Idempotency-Key: $KEY" -d '{"payment_method":"pm_ok"}'; echo

  # what became of that request
  curl -s $BASE/v1/requests/$KEY -H "Authorization: Bearer $TOKEN"; echo

`
