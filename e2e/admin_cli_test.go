package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/payd/payd/client"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// adminCLI runs `payd admin ARGS` in-process against the stack, with
// PAYD_URL and PAYD_ADMIN_TOKEN set as an operator's shell would.
func (s *stack) adminCLI(token string, args ...string) (string, error) {
	s.t.Helper()
	e := env{"PAYD_URL": s.base, "PAYD_ADMIN_TOKEN": token}
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"admin"}, args...), e.get, &out, &errOut)
	return out.String(), err
}

// mustCLI is adminCLI with the test's operator token, failing on an error.
func (s *stack) mustCLI(args ...string) string {
	s.t.Helper()
	out, err := s.adminCLI(testAdminToken, args...)
	if err != nil {
		s.t.Fatalf("payd admin %s = %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// wantLines fails unless out has, for each want, a line matching it.
func wantLines(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !regexp.MustCompile(`(?m)` + w).MatchString(out) {
			t.Errorf("%s printed:\n%s\nwant a line matching %q", what, out, w)
		}
	}
}

// TestAdminCLI drives `payd admin` against a running payd: it searches
// orders, shows a timeline, reconciles (charge list and settlement file),
// finds the staged discrepancy and resolves it, in tables and in -json;
// a repeated -key replays; and each refusal (401, 404, 400, bad flags)
// is a clear error (a non-zero exit, see TestAdminCLIExitCodes). A named
// operator's token (PAYD_ADMIN_TOKENS) acts under their name.
func TestAdminCLI(t *testing.T) {
	const alice = "op-Xc4Vb8Nm2Lk6Jh0Gf3Ds7Aq1Wz5Er9Ty"
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m", "PAYD_ADMIN_TOKENS": "alice:" + alice}), tuned(silentSandbox))
		cust, tok := s.register("cli@example.com")
		paid := s.paidOrder(tok, "10.00")
		lost := s.order(tok, "7.00")
		_, charge := s.loseOutcome(tok, lost)

		out := s.mustCLI("orders", "search", "-customer", cust)
		wantLines(t, "orders search", out, `^ORDER\s+STATUS\s+AMOUNT`, paid+`\s+paid\s+10.00 USD`, lost+`\s+pending\s+7.00 USD`)
		var page struct{ Data []struct{ ID string } }
		if err := json.Unmarshal([]byte(s.mustCLI("orders", "search", "-status", "paid", "-json")), &page); err != nil || len(page.Data) != 1 || page.Data[0].ID != paid {
			t.Errorf("orders search -status paid -json = %+v, %v; want the paid order only", page, err)
		}
		out = s.mustCLI("orders", "search", "-customer", "cli@example.com")
		wantLines(t, "orders search by email", out, paid+`\s+paid`, lost+`\s+pending`)
		out = s.mustCLI("orders", "search", "-limit", "1", "-customer", cust)
		wantLines(t, "orders search -limit 1", out, `^more: -cursor \S+`)

		out = s.mustCLI("orders", "show", lost)
		wantLines(t, "orders show", out, `^order\s+`+lost, `^status\s+pending`, `attempt\s+failed\s+payment attempt`)

		out = s.mustCLI("reconcile", "run", "-from", "1h", "-dry-run")
		wantLines(t, "reconcile run -dry-run", out, `^run\s+dry run`, `^found\s+1 \(0 new\)`, `missing_local_payment\s+open\s+`+lost+`\s+`+charge)
		if n := s.count("reconciliation_runs"); n != 0 {
			t.Errorf("runs after a dry run = %d, want 0", n)
		}
		var run struct {
			ID            string
			New           int
			Discrepancies []struct{ ID, Type string }
		}
		if err := json.Unmarshal([]byte(s.mustCLI("reconcile", "run", "-from", "1h", "-json")), &run); err != nil || run.New != 1 || len(run.Discrepancies) != 1 {
			t.Fatalf("reconcile run -json = %+v, %v; want one new discrepancy", run, err)
		}
		did := run.Discrepancies[0].ID
		out = s.mustCLI("reconcile", "show", run.ID)
		wantLines(t, "reconcile show", out, `^run\s+`+run.ID, `^source\s+provider`, did+`\s+missing_local_payment\s+open`)

		out = s.mustCLI("discrepancies", "list")
		wantLines(t, "discrepancies list", out, `^DISCREPANCY\s+TYPE\s+STATUS`, did+`\s+missing_local_payment\s+open\s+`+lost+`\s+`+charge+`\s+7.00\s+7.00\s+`+run.ID)
		wantLines(t, "discrepancies list -type amount_mismatch", s.mustCLI("discrepancies", "list", "-type", "amount_mismatch"), `^no discrepancy$`)
		var listed struct{ Data []struct{ ID string } }
		if err := json.Unmarshal([]byte(s.mustCLI("discrepancies", "list", "-order", lost, "-json")), &listed); err != nil || len(listed.Data) != 1 || listed.Data[0].ID != did {
			t.Errorf("discrepancies list -order -json = %+v, %v; want %s", listed, err, did)
		}
		out = s.mustCLI("reconcile", "list")
		wantLines(t, "reconcile list", out, `^RUN\s+SOURCE`, `^`+run.ID+`\s+provider\s+.*\s+1\s+1\s+1\s+`)

		csv := filepath.Join(t.TempDir(), "settlement.csv")
		if err := os.WriteFile(csv, []byte(s.settlementCSV()), 0o600); err != nil {
			t.Fatal(err)
		}
		out = s.mustCLI("reconcile", "run", "-from", "1h", "-file", csv, "-dry-run")
		wantLines(t, "reconcile run -file", out, `^source\s+csv`, `^found\s+1 \(0 new\)`)

		key := uuid.NewString()
		out, err := s.adminCLI(alice, "discrepancies", "resolve", did, "-action", "apply", "-note", "seen at the provider", "-key", key) // by its ID alone
		if err != nil {
			t.Fatalf("resolve as alice = %v\n%s", err, out)
		}
		wantLines(t, "discrepancies resolve", out, `^discrepancy `+did+` \(missing_local_payment \S+\) resolved: apply$`)
		out = s.mustCLI("discrepancies", "resolve", did, "-action", "apply", "-note", "seen at the provider", "-key", key)
		wantLines(t, "discrepancies resolve, same key", out, `resolved: apply \(payd replayed its earlier answer to this key\)$`)
		if n := s.count("discrepancies WHERE id = ? AND status = 'resolved' AND note = ?", did, "seen at the provider"); n != 1 {
			t.Errorf("discrepancy %s is not resolved with the note", did)
		}
		wantLines(t, "discrepancies list after resolving", s.mustCLI("discrepancies", "list"), `^no discrepancy$`)
		wantLines(t, "discrepancies list -status resolved", s.mustCLI("discrepancies", "list", "-status", "resolved"), did+`\s+missing_local_payment\s+resolved: apply`)
		out = s.mustCLI("orders", "show", lost)
		wantLines(t, "orders show after apply", out, `^status\s+paid`, `attempt\s+succeeded`, `discrepancy\s+resolved: apply`,
			`audit\s+200\s+alice resolve_discrepancy: 200 \(succeeded\)`)
		if n := s.count("audit_log WHERE action = 'resolve_discrepancy' AND request_id = ? AND result = 200", key); n != 2 {
			t.Errorf("audit rows for the resolution and its replay = %d, want 2", n)
		}

		// Refusals: payd's problem in plain words, nothing done.
		for _, tt := range []struct {
			token string
			args  []string
			want  string
		}{
			{"adm_wrong_0123456789abcdef012345", []string{"orders", "search"}, "refused the operator token (401"},
			{"", []string{"orders", "search"}, "no operator token: set PAYD_ADMIN_TOKEN"},
			{tok, []string{"orders", "search"}, "payd answered 403 forbidden"}, // a customer's token
			{testAdminToken, []string{"orders", "show", uuid.NewString()}, "payd answered 404 order_not_found"},
			{testAdminToken, []string{"orders", "show", "not-an-id"}, `ORDER_ID "not-an-id" is not an ID`}, // refused before sending
			{testAdminToken, []string{"reconcile", "show", uuid.NewString()}, "payd answered 404 reconciliation_not_found"},
			{testAdminToken, []string{"discrepancies", "resolve", did, "-run", run.ID, "-action", "delete"}, `-action "delete": want apply, refund, ignore`},
			{testAdminToken, []string{"discrepancies", "resolve", did, "-run", run.ID, "-action", "refund"}, "409 discrepancy_already_resolved"},
			{testAdminToken, []string{"discrepancies", "resolve", did, "-run", run.ID}, "-action is required"},
			{testAdminToken, []string{"discrepancies", "resolve", uuid.NewString(), "-action", "ignore"}, "payd answered 404 discrepancy_not_found"},
			{testAdminToken, []string{"discrepancies", "resolve", did, "-run", uuid.NewString(), "-action", "apply"}, "payd answered 404 reconciliation_not_found"},
			{testAdminToken, []string{"discrepancies", "list", "-status", "closed"}, `-status "closed": want open, resolving, resolved`},
			{testAdminToken, []string{"reconcile", "list", "-limit", "0"}, "-limit 0: want a whole number from 1 to 100"},
			{testAdminToken, []string{"reconcile", "run"}, "-from is required"},
			{testAdminToken, []string{"reconcile", "run", "-from", "yesterday"}, `-from "yesterday": want an RFC 3339 time`},
			{testAdminToken, []string{"reconcile", "run", "-from", "1h", "-file", "/no/such.csv"}, "-file: open /no/such.csv"},
			{testAdminToken, []string{"orders", "search", "-bogus"}, "flag provided but not defined: -bogus"},
			{testAdminToken, []string{"orders", "show"}, "usage: payd admin orders show ORDER_ID"},
			{testAdminToken, []string{"orders", "delete", "x"}, `unknown admin command "orders delete"`},
		} {
			out, err := s.adminCLI(tt.token, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("payd admin %s = %v (printed %q), want an error saying %q", strings.Join(tt.args, " "), err, out, tt.want)
			}
		}
		if n := s.count("refunds"); n != 0 {
			t.Errorf("refunds after the refusals = %d, want 0", n)
		}
	})
}

// TestAdminCLIExitCodes runs the shipped binary: a refusal prints payd's
// words on stderr and exits 1, a command line it cannot take exits 2,
// success exits 0, help exits 0.
func TestAdminCLIExitCodes(t *testing.T) {
	exe := shippedExecutable(t)
	s := start(t, on("sqlite"))
	tests := []struct {
		token  string
		args   []string
		exit   int
		stdout string
		stderr string
	}{
		{testAdminToken, []string{"admin", "orders", "search"}, 0, "no order matches", ""},
		{testAdminToken, []string{"admin", "orders", "show", uuid.NewString()}, 1, "", "payd answered 404 order_not_found"},
		{"adm_wrong_0123456789abcdef012345", []string{"admin", "orders", "search"}, 1, "", "401"},
		{testAdminToken, []string{"admin", "reconcile", "run", "-from", "soon"}, 2, "", "want an RFC 3339 time"},
		{testAdminToken, []string{"admin", "orders", "search", "-x"}, 2, "", "flag provided but not defined: -x"},
		{testAdminToken, []string{"admin", "orders"}, 2, "", "usage: payd admin"},
		{testAdminToken, []string{"admin", "discrepancies", "resolve", "X", "-action", "nope"}, 2, "", `-action "nope": want apply, refund, ignore`},
		{testAdminToken, []string{"admin", "discrepancies", "resolve", "X", "-action", "ignore"}, 2, "", `DISCREPANCY_ID "X" is not an ID`},
		{testAdminToken, []string{"admin", "orders", "search", "-status", "weird"}, 2, "", `-status "weird": want pending,`},
		{"", []string{"admin", "orders", "search", "-status", "weird"}, 2, "", `-status "weird"`}, // before the token is looked for
		{testAdminToken, []string{"admin", "orders", "search", "-url", "http://127.0.0.1:1"}, 1, "", "(is it running? check -url)"},
		{testAdminToken, []string{"admin", "endpoints", "update", uuid.NewString()}, 2, "", "nothing to change"},
		{testAdminToken, []string{"admin", "endpoints", "delete", "X"}, 2, "", `ENDPOINT_ID "X" is not an ID`},
		{testAdminToken, []string{"admin", "endpoints", "delete", uuid.NewString()}, 1, "", "payd answered 404 endpoint_not_found"},
		{"", []string{"help", "admin"}, 0, "payd admin discrepancies resolve", ""},
		{"", []string{"help", "admin"}, 0, "payd admin endpoints update ENDPOINT_ID", ""},
		{"", []string{"help", "admin"}, 0, "payd admin endpoints delete ENDPOINT_ID", ""},
		{"", []string{"admin", "orders", "search", "-h"}, 0, "-customer", ""},
	}
	for _, tt := range tests {
		cmd := exec.Command(exe, tt.args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "PAYD_URL=" + s.base, "PAYD_ADMIN_TOKEN=" + tt.token}
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		_ = cmd.Run()
		name := "payd " + strings.Join(tt.args, " ")
		if got := cmd.ProcessState.ExitCode(); got != tt.exit {
			t.Errorf("%s exited %d, want %d\nstdout:\n%s\nstderr:\n%s", name, got, tt.exit, out.String(), errOut.String())
		}
		if !strings.Contains(out.String(), tt.stdout) || !strings.Contains(errOut.String(), tt.stderr) {
			t.Errorf("%s printed\nstdout:\n%s\nstderr:\n%s\nwant %q on stdout and %q on stderr", name, out.String(), errOut.String(), tt.stdout, tt.stderr)
		}
		if tt.token != "" && strings.Contains(out.String()+errOut.String(), tt.token) {
			t.Errorf("%s printed the operator token", name)
		}
	}
}

// TestAdminCLIResolvesOutsideRun: a discrepancy payd found outside any run
// (a pay reply reporting another amount) is listed with no run and
// resolved by its ID while no run exists.
func TestAdminCLIResolvesOutsideRun(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), throughHostile(), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		h := s.hostile
		_, tok := s.register("outside@example.com")
		order := s.order(tok, "500.00")
		h.set(order, hostileRule{Amount: "0.01"})
		if r := s.pay(tok, order, uuid.NewString(), "pm_ok"); r.Status != http.StatusBadGateway {
			t.Fatalf("pay with another amount = %d %s, want 502", r.Status, r.Body)
		}
		var page client.DiscrepancyPage
		if err := json.Unmarshal([]byte(s.mustCLI("discrepancies", "list", "-order", order, "-type", "amount_mismatch", "-json")), &page); err != nil ||
			len(page.Data) != 1 || page.Data[0].RunId != nil {
			t.Fatalf("discrepancies list -json = %+v, %v; want one amount_mismatch found outside a run", page, err)
		}
		did := page.Data[0].Id
		wantLines(t, "discrepancies list", s.mustCLI("discrepancies", "list"), did+`\s+amount_mismatch\s+open\s+`+order+`\s+.*-$`)

		out := s.mustCLI("discrepancies", "resolve", did, "-action", "ignore", "-note", "customer refunded by hand")
		wantLines(t, "resolve with no run", out, `^discrepancy `+did+` \(amount_mismatch \S+\) resolved: ignore$`)
		if n := s.count("reconciliation_runs"); n != 0 {
			t.Errorf("runs = %d, want none: the discrepancy needs no run", n)
		}
		if n := s.count("discrepancies WHERE id = ? AND status = 'resolved' AND resolution = 'ignore'", did); n != 1 {
			t.Errorf("discrepancy %s is not resolved by ignore", did)
		}
	})
}

// TestAdminCLIRefund: `payd admin orders refund` refunds part of a paid
// order and then the rest, through the provider, under its idempotency
// key: the same -key again replays the first answer and refunds nothing
// more; a refund larger than what remains, or of an unpaid order, is
// payd's 409 and changes nothing.
func TestAdminCLIRefund(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), tuned(silentSandbox))
		_, tok := s.register(newEmail())
		paid := s.paidOrder(tok, "10.00")
		unpaid := s.order(tok, "3.00")

		key := uuid.NewString()
		out := s.mustCLI("orders", "refund", paid, "-amount", "4.00", "-reason", "damaged in transit", "-key", key)
		wantLines(t, "orders refund -amount 4.00", out, `^refund \S+ of order `+paid+`: succeeded 4.00 USD$`,
			`^order paid: refunded 4.00, pending 0.00 of 10.00 USD$`)
		out = s.mustCLI("orders", "refund", paid, "-amount", "4.00", "-reason", "damaged in transit", "-key", key)
		wantLines(t, "orders refund, same key", out, `succeeded 4.00 USD \(payd replayed its earlier answer to this key\)$`)
		if n := s.count("refunds WHERE order_id = ?", paid); n != 1 {
			t.Fatalf("refunds after a refund and its replay = %d, want 1", n)
		}

		for _, tt := range []struct {
			args []string
			want string
		}{
			{[]string{"orders", "refund", paid, "-amount", "6.01", "-reason", "too much"}, "409 refund_too_large"},
			{[]string{"orders", "refund", unpaid, "-reason", "never paid"}, "409 order_not_refundable"},
			{[]string{"orders", "refund", uuid.NewString(), "-reason", "nobody's"}, "404 order_not_found"},
		} {
			if out, err := s.adminCLI(testAdminToken, tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("payd admin %s = %v (printed %q), want an error saying %q", strings.Join(tt.args, " "), err, out, tt.want)
			}
		}
		if n := s.count("refunds WHERE order_id = ?", paid); n != 1 {
			t.Errorf("refunds after the refusals = %d, want 1", n)
		}

		// Without -amount: everything that remains. The reason's limit is
		// in characters: 300 of two bytes each pass.
		out = s.mustCLI("orders", "refund", paid, "-reason", strings.Repeat("é", 300))
		wantLines(t, "orders refund, the rest", out, `: succeeded 6.00 USD$`, `^order refunded: refunded 10.00, pending 0.00 of 10.00 USD$`)
		out = s.mustCLI("orders", "show", paid)
		wantLines(t, "orders show after the refunds", out, `^status\s+refunded`, `refund\s+succeeded`)
	})
}
