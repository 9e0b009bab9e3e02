package app

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/payd/payd/handler"
)

// operatorConfig is the operators' settings (ADR 0021): named
// admin tokens beside PAYD_ADMIN_TOKEN, and scheduled reconciliation.
type operatorConfig struct {
	AdminTokens    string        // PAYD_ADMIN_TOKENS: name:token,name:token
	ReconcileEvery time.Duration // PAYD_RECONCILE_EVERY: 0 = never

	operators []handler.Operator // AdminTokens, parsed by checkOperators
	// sandboxURL is where the in-process sandbox listens, once started:
	// the banner prints it (empty with PAYD_PROVIDER_URL).
	sandboxURL string
}

func (c *Config) operatorSettings() []setting {
	return []setting{
		{"PAYD_ADMIN_TOKENS", "admin-tokens", "", "named operators name:token,name:token beside PAYD_ADMIN_TOKEN; the audit's actor is the name", &c.AdminTokens, nil},
		{"PAYD_RECONCILE_EVERY", "reconcile-every", "0", "scheduled reconciliation period such as 1h; each window covers the last two periods; 0 = never", nil, &c.ReconcileEvery},
	}
}

// operatorName is what a named operator may be called: short, printable
// in an audit trail and a log, never mistaken for the shared token's actor.
var operatorName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$`)

// The schedule's bounds: windows of two periods must fit the 31 days a
// run may cover, and a period under a second would only load the provider.
const (
	minReconcileEvery = time.Second
	maxReconcileEvery = 15 * 24 * time.Hour
)

// checkOperators parses PAYD_ADMIN_TOKENS and checks the schedule. Errors
// name an entry by its position and its operator, never its token. In
// production every named token must be as strong as PAYD_ADMIN_TOKEN, and
// in every environment two operators may not share a token (the audit
// could not tell them apart), nor share one with PAYD_ADMIN_TOKEN.
func (c *Config) checkOperators(sub string) error {
	if c.ReconcileEvery != 0 && (c.ReconcileEvery < minReconcileEvery || c.ReconcileEvery > maxReconcileEvery) {
		return fmt.Errorf("PAYD_RECONCILE_EVERY must be 0 (never) or from %v to %v, not %v", minReconcileEvery, maxReconcileEvery, c.ReconcileEvery)
	}
	if sub == "sandbox" || sub == "migrate" || strings.TrimSpace(c.AdminTokens) == "" {
		return nil
	}
	names := map[string]bool{}
	tokens := map[string]string{c.AdminToken: "PAYD_ADMIN_TOKEN"}
	entries := strings.Split(c.AdminTokens, ",")
	for i, entry := range entries {
		name, token, ok := strings.Cut(strings.TrimSpace(entry), ":")
		where := fmt.Sprintf("PAYD_ADMIN_TOKENS entry %d of %d", i+1, len(entries))
		switch {
		case !ok || !operatorName.MatchString(name):
			return fmt.Errorf("%s must be name:token with a name of 1-32 letters, digits, '.', '_' or '-'", where)
		case strings.EqualFold(name, handler.SharedOperator):
			return fmt.Errorf("%s: the name %q is the actor of PAYD_ADMIN_TOKEN; choose another", where, name)
		case names[strings.ToLower(name)]:
			return fmt.Errorf("%s: operator %q is named twice", where, name)
		case token == "" || strings.ContainsAny(token, " \t,:"):
			return fmt.Errorf("%s (%s) has an empty token or one with spaces, commas or colons", where, name)
		case tokens[token] != "":
			return fmt.Errorf("%s (%s) has the same token as %s: each operator needs their own", where, name, tokens[token])
		}
		if c.Env == "production" && (weakSecret(token) || lowEntropy([]byte(token))) {
			return fmt.Errorf("%s (%s) must be a strong token (24+ random characters, not a placeholder or a repeated pattern) when PAYD_ENV=production", where, name)
		}
		names[strings.ToLower(name)] = true
		tokens[token] = "operator " + name
		c.operators = append(c.operators, handler.Operator{Name: name, Token: token})
	}
	return nil
}
