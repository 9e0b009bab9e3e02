package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/app"
	"github.com/payd/payd/client"
)

// adminAbout is `payd help admin`: every verb, for operators.
const adminAbout = `Talks to a running payd's operator API (/v1/admin/...) with the generated client.
Prints tables for people; -json prints payd's JSON answer for scripts.

  payd admin orders search [-status S] [-customer ID|EMAIL] [-from T] [-to T] [-limit N] [-cursor C]
  payd admin orders show ORDER_ID             the order and its timeline, each entry with its outcome
  payd admin orders refund ORDER_ID [-amount A] -reason R [-key K]
                                              refund part (-amount) or all that remains, through the provider
  payd admin reconcile run -from T [-to T] [-file settlement.csv] [-dry-run] [-key K]
  payd admin reconcile show RUN_ID            a run and the discrepancies it found
  payd admin reconcile list [-limit N] [-cursor C]
  payd admin discrepancies list [-status open|resolving|resolved] [-type T] [-order ID]
  payd admin discrepancies resolve DISCREPANCY_ID -action apply|refund|ignore [-note N] [-run RUN_ID] [-key K]
  payd admin disputes list [-status open|won|lost|all]
                                              customers' disputes, newest first, with when the
                                              evidence is due and where to answer at the provider
  payd admin endpoints list                   the shop's endpoints told of order events
  payd admin endpoints create URL -events T,T,... [-description D] [-key K]
                                              a new endpoint; its secret is printed this once
  payd admin endpoints update ENDPOINT_ID [-endpoint-url U] [-events T,T,...] [-description D] [-enable|-disable] [-key K]
                                              change an endpoint, or stop and restart sending to it
  payd admin endpoints delete ENDPOINT_ID [-key K]
                                              remove an endpoint and its delivery log
  payd admin endpoints rotate ENDPOINT_ID [-key K]
                                              a new secret; the old one signs beside it for 24h
  payd admin endpoints deliveries ENDPOINT_ID [-status pending|delivered|failed] [-limit N]
  payd admin events redeliver EVENT_ID [-key K]
                                              send an event again, under the same webhook-id
  payd admin stats [-from T] [-to T] [-bucket hour|day]
                                              payments by outcome and refunds per hour or day (default
                                              the last 24h), money, what is open, the oldest unknown

Every verb takes -url (PAYD_URL, default http://127.0.0.1:8080), -admin-token
(PAYD_ADMIN_TOKEN; prefer the variable: a flag shows in the process list) and -json.
Times T are RFC 3339 (2026-01-31T00:00:00Z) or a duration before now (24h).
A run or a resolution is sent with one idempotency key, repeated on a lost answer;
-key K sets it, so a script that reruns a command after a timeout acts once.
An answer other than success prints payd's problem and exits 1; a command line
payd admin cannot take (an unknown verb or flag, a missing argument, a status,
action or type payd does not know, an ID, -key, -cursor or -customer of a shape
payd never takes, a time, a -limit outside 1..100) exits 2 before anything is
sent. What only payd can tell (an ID nobody has, -to not after -from, an action
the discrepancy does not fit) is its answer: exit 1. When payd cannot be reached,
the error names what gave its address: -url, PAYD_URL, or neither (the default).`

// adminConn is what every admin verb needs: where payd is and what said
// so, the operator token, and how to print.
type adminConn struct {
	url, token string
	urlFrom    string // "-url", "PAYD_URL", or "" for the default
	json       bool
	api        *client.Client
	out        io.Writer
	who        *caller
}

// caller is who a verb group speaks as: the operators (payd admin, an
// operator token) or the merchant's server (payd merchant, a merchant
// key). Each has its verbs and its credential's flag and variable.
type caller struct {
	command   string // admin or merchant
	verbs     map[string]func() adminVerb
	tokenFlag string // admin-token
	tokenEnv  string // PAYD_ADMIN_TOKEN
	tokenWhat string // operator token
	example   string // a verb, for the message of a missing one
}

// operatorCaller is payd admin's.
var operatorCaller = &caller{command: "admin", verbs: adminVerbs, tokenFlag: "admin-token", tokenEnv: "PAYD_ADMIN_TOKEN",
	tokenWhat: "operator token", example: "orders search"}

// adminFlags are the flags every verb shares, defaulting to PAYD_URL and
// the caller's token variable.
func adminFlags(who *caller, name string, getenv func(string) string) (*flag.FlagSet, *adminConn) {
	a := &adminConn{who: who}
	fs := flag.NewFlagSet("payd "+who.command+" "+name, flag.ContinueOnError)
	app.URLVar(fs, &a.url, "url", paydURL(getenv), "PAYD_URL", "base URL of the running payd (PAYD_URL)")
	// The token's default is read after parsing, so -h never prints it.
	fs.StringVar(&a.token, who.tokenFlag, "", who.tokenWhat+" (default "+who.tokenEnv+"; the variable keeps it out of the process list)")
	fs.BoolVar(&a.json, "json", false, "print payd's JSON answer instead of a table")
	return fs, a
}

// paydURL is where a running payd is by default: PAYD_URL, else the
// address payd serve listens on by default.
func paydURL(getenv func(string) string) string {
	if u := getenv("PAYD_URL"); u != "" {
		return u
	}
	return "http://127.0.0.1:8080"
}

// adminCommand is `payd admin GROUP VERB ...` (or a verb of one word).
// Help asked for goes to stdout; without a verb, the usage goes to stderr
// and the command fails as a usage error.
func adminCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return verbCommand(ctx, operatorCaller, args, getenv, stdout, stderr)
}

// verbCommand is `payd COMMAND GROUP VERB ...` of caller who.
func verbCommand(ctx context.Context, who *caller, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd := who.command
	var name string
	var rest []string
	_, oneWord := who.verbs[first(args)]
	switch {
	case oneWord:
		name, rest = args[0], args[1:]
	case len(args) > 0 && isHelp(args[0]), len(args) > 1 && isHelp(args[1]):
		printCommandUsage(stdout, cmd, nil)
		return nil
	case len(args) > 0 && strings.HasPrefix(args[0], "-"):
		return usagef("payd %s takes flags after its verb: payd %s GROUP VERB %s (run 'payd help %s')", cmd, cmd, args[0], cmd)
	case len(args) > 1 && !strings.HasPrefix(args[1], "-"):
		name, rest = args[0]+" "+args[1], args[2:]
	case len(args) == 0:
		printCommandUsage(stderr, cmd, nil)
		return usagef("%s needs a command, such as %s (the list is above)", cmd, who.example)
	default:
		printCommandUsage(stderr, cmd, nil)
		return usagef("%s %s needs a verb (the list is above)", cmd, args[0])
	}
	makeVerb, ok := who.verbs[name]
	if !ok {
		return usagef("unknown %s command %q (run 'payd help %s')", cmd, name, cmd)
	}
	verb := makeVerb()
	fs, a := adminFlags(who, name, getenv)
	verb.flags(fs)
	pos, err := parseAdminFlags(fs, cmd+" "+name, verb.usage, rest, stdout)
	if err != nil {
		return err
	}
	if len(pos) != verb.nargs {
		return usagef("usage: payd %s %s %s (run 'payd help %s')", cmd, name, verb.usage, cmd)
	}
	if verb.check != nil {
		if err := verb.check(pos); err != nil {
			return err
		}
	}
	if err := checkBaseURL(fs, a.url); err != nil {
		return err
	}
	switch {
	case flagGiven(fs, "url"):
		a.urlFrom = "-url"
	case getenv("PAYD_URL") != "":
		a.urlFrom = "PAYD_URL"
	}
	if a.token == "" {
		a.token = getenv(who.tokenEnv)
	}
	if a.token == "" && !verb.public {
		return fmt.Errorf("no %s: set %s (or -%s)", who.tokenWhat, who.tokenEnv, who.tokenFlag)
	}
	a.out = stdout
	a.api, err = client.NewClient(strings.TrimRight(a.url, "/"),
		client.WithHTTPClient(&http.Client{Timeout: 2 * time.Minute}),
		client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			if a.token != "" {
				r.Header.Set("Authorization", "Bearer "+a.token)
			}
			r.Header.Set("Accept", "application/json")
			return nil
		}))
	if err != nil {
		return fmt.Errorf("-url %q: %w", shownBase(a.url), err)
	}
	return verb.run(ctx, a, pos)
}

// isHelp is whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// checkBaseURL refuses a base URL of a running payd that is not http(s)
// with a host, naming what gave it: the -url flag (a usage error) or
// PAYD_URL.
func checkBaseURL(fs *flag.FlagSet, base string) error {
	if u, err := url.Parse(base); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		return nil
	}
	if flagGiven(fs, "url") {
		return usagef("-url %q must be an http:// or https:// URL with a host", shownBase(base))
	}
	return fmt.Errorf("PAYD_URL %q must be an http:// or https:// URL with a host", shownBase(base))
}

// flagGiven is whether the command line set flag name of fs.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// first is args[0], or "" for none.
func first(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// negativeNumber is an argument such as -5: no flag is named by digits.
var negativeNumber = regexp.MustCompile(`^-[0-9]+$`)

// parseAdminFlags parses flags placed before or after the positional
// arguments (`orders show ID -json` as well as `orders show -json ID`);
// a negative number is an argument.
func parseAdminFlags(fs *flag.FlagSet, name, usage string, args []string, w io.Writer) ([]string, error) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var pos []string
	for {
		if len(args) > 0 && negativeNumber.MatchString(args[0]) { // an argument (an adjustment of -5), not a flag
			pos, args = append(pos, args[0]), args[1:]
			continue
		}
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(w, "usage: payd %s %s\n\nflags:\n", name, usage)
			fs.SetOutput(w)
			fs.PrintDefaults()
			return nil, errHelpShown
		}
		if err != nil {
			return nil, usagef("%w (run 'payd %s -h' for its flags)", err, name)
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
}

// apiError is an answer other than success, in payd's words (RFC 9457).
type apiError struct {
	status              int
	code, title, detail string
	fields              []string
	who                 *caller // whose token was sent
}

func (e *apiError) Error() string {
	if e.status == http.StatusUnauthorized && e.who != nil {
		return fmt.Sprintf("payd refused the %s (401 unauthorized): set %s to an %s", e.who.tokenWhat, e.who.tokenEnv, e.who.tokenWhat)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "payd answered %d", e.status)
	if e.code != "" {
		fmt.Fprintf(&b, " %s", e.code)
	}
	if e.title != "" {
		fmt.Fprintf(&b, ": %s", e.title)
	}
	if e.detail != "" {
		fmt.Fprintf(&b, " — %s", e.detail)
	}
	for _, f := range e.fields {
		fmt.Fprintf(&b, "\n  %s", f)
	}
	return b.String()
}

// whereSet says how to point payd admin at another payd, naming what
// set the address it could not reach.
func (a *adminConn) whereSet() string {
	switch a.urlFrom {
	case "-url", "PAYD_URL":
		return "check " + a.urlFrom
	}
	return "it was the default: set PAYD_URL or pass -url"
}

// shownBase is a base URL as messages show it: its password masked
// (app.ShownValue), nothing of a value that may hold one elsewhere.
func shownBase(u string) string {
	if v, ok := app.ShownValue(u); ok {
		return v
	}
	return "(not shown: it may hold a password)"
}

// answer reads a response: its body on success (2xx), else an apiError.
func (a *adminConn) answer(res *http.Response, err error) ([]byte, *http.Response, error) {
	if err != nil {
		return nil, nil, fmt.Errorf("cannot reach payd at %s (is it running? %s): %w", shownBase(a.url), a.whereSet(), err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, nil, fmt.Errorf("read payd's answer: %w", err)
	}
	if res.StatusCode/100 == 2 {
		return body, res, nil
	}
	var p client.Problem
	e := &apiError{status: res.StatusCode, who: a.who}
	if json.Unmarshal(body, &p) == nil {
		e.code, e.title = string(p.Code), p.Title
		if p.Detail != nil {
			e.detail = *p.Detail
		}
		if p.Errors != nil {
			for _, f := range *p.Errors {
				e.fields = append(e.fields, f.Param+": "+f.Detail)
			}
		}
	}
	return nil, res, e
}

// get reads one admin resource into v (and prints it with -json).
func (a *adminConn) get(res *http.Response, err error, v any) error {
	body, _, err := a.answer(res, err)
	if err != nil {
		return err
	}
	return a.decode(body, v)
}

// decode parses payd's answer into v; with -json it prints the answer
// instead, indented, and v stays empty (the caller prints nothing).
func (a *adminConn) decode(body []byte, v any) error {
	if a.json {
		var buf bytes.Buffer
		if err := json.Indent(&buf, body, "", "  "); err != nil {
			return fmt.Errorf("payd's answer is not JSON: %w", err)
		}
		buf.WriteByte('\n')
		_, err := a.out.Write(buf.Bytes())
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("payd's answer is not what this payd admin expects: %w", err)
	}
	return nil
}

// change sends a request that changes something, with one idempotency key
// for the intent: a lost answer (no response, or a 5xx) is asked for again
// with the same key, so payd acts once.
func (a *adminConn) change(ctx context.Context, send func() (*http.Response, error)) ([]byte, *http.Response, error) {
	var body []byte
	var res *http.Response
	var err error
	for n := 1; ; n++ {
		body, res, err = a.answer(send())
		var ae *apiError
		lost := err != nil && (!errors.As(err, &ae) || ae.status >= 500)
		if !lost || n == 3 {
			return body, res, err
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(time.Duration(n) * 500 * time.Millisecond):
		}
	}
}

// newIntentKey is the key of one command's change: -key, or a new UUID.
func newIntentKey(key string) string {
	if key != "" {
		return key
	}
	return uuid.NewString()
}

// flagTime reads a time flag: RFC 3339, or a duration before now; another
// value is a usage error.
func flagTime(name, v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t.UTC(), nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d).UTC(), nil
	}
	return time.Time{}, usagef("-%s %q: want an RFC 3339 time (2026-01-31T00:00:00Z) or a duration before now (24h)", name, v)
}
