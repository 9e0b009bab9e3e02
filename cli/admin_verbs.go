package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/payd/payd/client"
	"github.com/payd/payd/domain"
)

// adminVerb is one `payd admin GROUP VERB`: its flags, how many positional
// arguments it takes, how it checks them and what it does. check runs
// before anything is sent, before the token is even looked for: a value
// it refuses is a usage error (exit 2).
type adminVerb struct {
	usage string // its arguments and main flags, for messages
	nargs int
	flags func(fs *flag.FlagSet)
	check func(pos []string) error // nil: nothing to check
	run   func(ctx context.Context, a *adminConn, pos []string) error
	// public verbs need no token: they read what payd shows anyone.
	public bool
}

// adminVerbs makes each verb afresh (its flags bind to its own variables).
var adminVerbs = map[string]func() adminVerb{
	"orders search":         ordersSearch,
	"orders show":           ordersShow,
	"orders refund":         ordersRefund,
	"reconcile run":         reconcileRun,
	"reconcile show":        reconcileShow,
	"reconcile list":        reconcileList,
	"discrepancies list":    discrepanciesList,
	"discrepancies resolve": discrepanciesResolve,
	"disputes list":         disputesList,
	"stats":                 adminStats,
	"endpoints list":        endpointsList,
	"endpoints create":      endpointsCreate,
	"endpoints update":      endpointsUpdate,
	"endpoints delete":      endpointsDelete,
	"endpoints rotate":      endpointsRotate,
	"endpoints deliveries":  endpointsDeliveries,
	"events redeliver":      eventsRedeliver,
}

func ordersSearch() adminVerb {
	var status, attempt, customer, from, to, cursor string
	var limit int
	var p client.SearchOrdersParams
	return adminVerb{
		usage: "[-status S] [-attempt A] [-customer ID|EMAIL] [-from T] [-to T] [-limit N] [-cursor C]",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&status, "status", "", "only orders in this status ("+strings.Join(names(domain.Statuses), ", ")+")")
			fs.StringVar(&attempt, "attempt", "", "only orders with a payment attempt in this status ("+strings.Join(names(domain.AttemptStatuses), ", ")+"); failed: the declined ones")
			fs.StringVar(&customer, "customer", "", "a customer ID or email")
			fs.StringVar(&from, "from", "", "created at or after (RFC 3339, or a duration before now)")
			fs.StringVar(&to, "to", "", "created before (RFC 3339, or a duration before now)")
			fs.IntVar(&limit, "limit", 20, "orders per page")
			fs.StringVar(&cursor, "cursor", "", "the next page's cursor, printed under the table")
		},
		check: func([]string) error {
			p.Limit = &limit
			now := time.Now()
			var err error
			if p.From, err = optTime("from", from, now); err != nil {
				return err
			}
			if p.To, err = optTime("to", to, now); err != nil {
				return err
			}
			if status != "" {
				if err := checkChoice("status", status, names(domain.Statuses)); err != nil {
					return err
				}
				s := client.StatusFilter(status)
				p.Status = &s
			}
			if attempt != "" {
				if err := checkChoice("attempt", attempt, names(domain.AttemptStatuses)); err != nil {
					return err
				}
				a := client.SearchOrdersParamsAttempt(attempt)
				p.Attempt = &a
			}
			if customer != "" {
				if err := checkCustomer(customer); err != nil {
					return err
				}
				p.Customer = &customer // payd takes an ID or an email
			}
			if cursor != "" {
				p.Cursor = &cursor
			}
			return checkPage(limit, cursor)
		},
		run: func(ctx context.Context, a *adminConn, _ []string) error {
			var page client.SearchPage
			res, err := a.api.SearchOrders(ctx, &p)
			if err := a.get(res, err, &page); err != nil || a.json {
				return err
			}
			printOrders(a.out, page)
			return nil
		},
	}
}

func optTime(name, v string, now time.Time) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	t, err := flagTime(name, v, now)
	return &t, err
}

func ordersShow() adminVerb {
	return adminVerb{
		usage: "ORDER_ID",
		nargs: 1,
		flags: func(*flag.FlagSet) {},
		check: func(pos []string) error { return checkID("ORDER_ID", pos[0]) },
		run: func(ctx context.Context, a *adminConn, pos []string) error {
			var t client.Timeline
			res, err := a.api.OrderTimeline(ctx, pos[0])
			if err := a.get(res, err, &t); err != nil || a.json {
				return err
			}
			printTimeline(a.out, t)
			return nil
		},
	}
}

// maxReason is the longest reason payd keeps with a refund, in characters.
const maxReason = 500

func ordersRefund() adminVerb {
	var amount, reason, key string
	return adminVerb{
		usage: "ORDER_ID [-amount A] -reason R [-key K]",
		nargs: 1,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&amount, "amount", "", "how much, in the order's currency (e.g. 5.00); default: everything that remains refundable")
			fs.StringVar(&reason, "reason", "", "why (kept with the refund and on the audit trail); required")
			fs.StringVar(&key, "key", "", "idempotency key of this refund (default: a new one); reuse it to repeat one whose answer was lost")
		},
		check: func(pos []string) error {
			if err := checkID("ORDER_ID", pos[0]); err != nil {
				return err
			}
			if strings.TrimSpace(reason) == "" {
				return usagef("-reason is required: why the order is refunded (run 'payd admin orders refund -h')")
			}
			if n := utf8.RuneCountInString(reason); n > maxReason {
				return usagef("-reason: %d characters, want at most %d", n, maxReason)
			}
			if amount != "" {
				if _, err := domain.ParseDecimal(amount, "-amount"); err != nil {
					return usagef("-amount %q: want a decimal amount such as 5.00", amount)
				}
			}
			return checkKey(key)
		},
		run: func(ctx context.Context, a *adminConn, pos []string) error {
			idemKey := newIntentKey(key)
			body := client.RefundRequest{Reason: reason}
			if amount != "" {
				body.Amount = &amount
			}
			out, res, err := a.change(ctx, func() (*http.Response, error) {
				return a.api.RefundOrder(ctx, pos[0], &client.RefundOrderParams{IdempotencyKey: &idemKey}, body)
			})
			if err != nil {
				return err
			}
			var r client.RefundResult
			if err := a.decode(out, &r); err != nil || a.json {
				return err
			}
			fmt.Fprintf(a.out, "refund %s of order %s: %s %s %s%s\n", r.Refund.Id, r.Order.Id, r.Refund.Status, r.Refund.Amount, r.Refund.Currency, replayedNote(res))
			fmt.Fprintf(a.out, "order %s: refunded %s, pending %s of %s %s\n", r.Order.Status, r.Order.RefundedAmount, r.Order.RefundPendingAmount, r.Order.Amount, r.Order.Currency)
			return nil
		},
	}
}

func reconcileRun() adminVerb {
	var from, to, file, key string
	var dry bool
	var f, t time.Time
	return adminVerb{
		usage: "-from T [-to T] [-file settlement.csv] [-dry-run] [-key K]",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&from, "from", "", "start of the window (RFC 3339, or a duration before now); required")
			fs.StringVar(&to, "to", "0s", "end of the window (RFC 3339, or a duration before now; default now)")
			fs.StringVar(&file, "file", "", "the provider's settlement CSV to reconcile against (default: its charge list)")
			fs.BoolVar(&dry, "dry-run", false, "find discrepancies without recording anything")
			fs.StringVar(&key, "key", "", "idempotency key of this run (default: a new one); reuse it to repeat a run whose answer was lost")
		},
		check: func([]string) error {
			if from == "" {
				return usagef("-from is required (run 'payd admin reconcile run -h')")
			}
			now := time.Now()
			var err error
			if f, err = flagTime("from", from, now); err != nil {
				return err
			}
			if t, err = flagTime("to", to, now); err != nil {
				return err
			}
			return checkKey(key)
		},
		run: func(ctx context.Context, a *adminConn, _ []string) error {
			params := &client.ReconcileParams{IdempotencyKey: new(newIntentKey(key))}
			var send func() (*http.Response, error)
			if file == "" {
				body := client.ReconcileRequest{From: f, To: t, DryRun: &dry}
				send = func() (*http.Response, error) { return a.api.Reconcile(ctx, params, body) }
			} else {
				ctype, form, err := settlementForm(file, f, t, dry)
				if err != nil {
					return err
				}
				send = func() (*http.Response, error) {
					return a.api.ReconcileWithBody(ctx, params, ctype, bytes.NewReader(form))
				}
			}
			body, _, err := a.change(ctx, send)
			if err != nil {
				return err
			}
			var run client.Run
			if err := a.decode(body, &run); err != nil || a.json {
				return err
			}
			printRun(a.out, run)
			return nil
		},
	}
}

// settlementForm is the multipart body of a run over a settlement file,
// made once so a repeated request is the same request.
func settlementForm(path string, from, to time.Time, dry bool) (string, []byte, error) {
	csv, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("-file: %w", err)
	}
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for k, v := range map[string]string{"from": from.Format(time.RFC3339), "to": to.Format(time.RFC3339), "dry_run": fmt.Sprint(dry)} {
		if err := w.WriteField(k, v); err != nil {
			return "", nil, err
		}
	}
	part, err := w.CreateFormFile("file", filepath.Base(path))
	if err != nil {
		return "", nil, err
	}
	if _, err := part.Write(csv); err != nil {
		return "", nil, err
	}
	if err := w.Close(); err != nil {
		return "", nil, err
	}
	return w.FormDataContentType(), b.Bytes(), nil
}

func reconcileShow() adminVerb {
	return adminVerb{
		usage: "RUN_ID",
		nargs: 1,
		flags: func(*flag.FlagSet) {},
		check: func(pos []string) error { return checkID("RUN_ID", pos[0]) },
		run: func(ctx context.Context, a *adminConn, pos []string) error {
			var run client.Run
			res, err := a.api.GetRun(ctx, pos[0])
			if err := a.get(res, err, &run); err != nil || a.json {
				return err
			}
			printRun(a.out, run)
			return nil
		},
	}
}

func reconcileList() adminVerb {
	var limit int
	var cursor string
	return adminVerb{
		usage: "[-limit N] [-cursor C]",
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&limit, "limit", 20, "runs per page")
			fs.StringVar(&cursor, "cursor", "", "the next page's cursor, printed under the table")
		},
		check: func([]string) error { return checkPage(limit, cursor) },
		run: func(ctx context.Context, a *adminConn, _ []string) error {
			p := client.ListRunsParams{Limit: &limit}
			if cursor != "" {
				p.Cursor = &cursor
			}
			var page client.RunPage
			res, err := a.api.ListRuns(ctx, &p)
			if err := a.get(res, err, &page); err != nil || a.json {
				return err
			}
			printRuns(a.out, page)
			return nil
		},
	}
}

func discrepanciesList() adminVerb {
	var status, typ, order, cursor string
	var limit int
	return adminVerb{
		usage: "[-status open|resolving|resolved] [-type T] [-order ID]",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&status, "status", "open", strings.Join(names(domain.DiscrepancyStatuses), ", "))
			fs.StringVar(&typ, "type", "", "only this type ("+strings.Join(names(domain.DiscrepancyTypes), ", ")+")")
			fs.StringVar(&order, "order", "", "only about this order ID")
			fs.IntVar(&limit, "limit", 50, "discrepancies per page")
			fs.StringVar(&cursor, "cursor", "", "the next page's cursor, printed under the table")
		},
		check: func([]string) error {
			if err := checkChoice("status", status, names(domain.DiscrepancyStatuses)); err != nil {
				return err
			}
			if typ != "" {
				if err := checkChoice("type", typ, names(domain.DiscrepancyTypes)); err != nil {
					return err
				}
			}
			if order != "" {
				if err := checkID("-order", order); err != nil {
					return err
				}
			}
			return checkPage(limit, cursor)
		},
		run: func(ctx context.Context, a *adminConn, _ []string) error {
			st := client.ListDiscrepanciesParamsStatus(status)
			p := client.ListDiscrepanciesParams{Status: &st, Limit: &limit}
			if typ != "" {
				t := client.DiscrepancyType(typ)
				p.Type = &t
			}
			if order != "" {
				p.Order = &order
			}
			if cursor != "" {
				p.Cursor = &cursor
			}
			var page client.DiscrepancyPage
			res, err := a.api.ListDiscrepancies(ctx, &p)
			if err := a.get(res, err, &page); err != nil || a.json {
				return err
			}
			printDiscrepancies(a.out, page.Data)
			printCursor(a.out, page.NextCursor)
			return nil
		},
	}
}

func disputesList() adminVerb {
	var status, cursor string
	var limit int
	return adminVerb{
		usage: "[-status open|won|lost] [-limit N] [-cursor C]",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&status, "status", "open", strings.Join(names(domain.DisputeStatuses), ", ")+", or all")
			fs.IntVar(&limit, "limit", 50, "disputes per page")
			fs.StringVar(&cursor, "cursor", "", "the next page's cursor, printed under the table")
		},
		check: func([]string) error {
			if err := checkChoice("status", status, append(names(domain.DisputeStatuses), "all")); err != nil {
				return err
			}
			return checkPage(limit, cursor)
		},
		run: func(ctx context.Context, a *adminConn, _ []string) error {
			p := client.ListDisputesParams{Limit: &limit}
			if status != "all" {
				st := client.ListDisputesParamsStatus(status)
				p.Status = &st
			}
			if cursor != "" {
				p.Cursor = &cursor
			}
			var page client.DisputePage
			res, err := a.api.ListDisputes(ctx, &p)
			if err := a.get(res, err, &page); err != nil || a.json {
				return err
			}
			printDisputes(a.out, page.Data)
			printCursor(a.out, page.NextCursor)
			return nil
		},
	}
}

func discrepanciesResolve() adminVerb {
	var action, note, run, key string
	return adminVerb{
		usage: "DISCREPANCY_ID -action " + strings.Join(domain.ResolutionActions, "|") + " [-note N] [-run RUN_ID] [-key K]",
		nargs: 1,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&action, "action", "", strings.Join(domain.ResolutionActions, ", ")+"; required")
			fs.StringVar(&note, "note", "", "why (kept with the resolution and on the audit trail)")
			fs.StringVar(&run, "run", "", "resolve it as reported by this run (default: by its ID alone, whoever found it)")
			fs.StringVar(&key, "key", "", "idempotency key of this resolution (default: a new one); reuse it to repeat one whose answer was lost")
		},
		check: func(pos []string) error {
			if action == "" {
				return usagef("-action is required: %s (run 'payd admin discrepancies resolve -h')", strings.Join(domain.ResolutionActions, ", "))
			}
			if err := checkChoice("action", action, domain.ResolutionActions); err != nil {
				return err
			}
			if err := checkID("DISCREPANCY_ID", pos[0]); err != nil {
				return err
			}
			if run != "" {
				if err := checkID("-run", run); err != nil {
					return err
				}
			}
			return checkKey(key)
		},
		run: func(ctx context.Context, a *adminConn, pos []string) error {
			did, idemKey := pos[0], newIntentKey(key)
			body := client.ResolveRequest{Action: client.ResolveRequestAction(action), Note: &note}
			out, res, err := a.change(ctx, func() (*http.Response, error) {
				if run != "" {
					return a.api.ResolveDiscrepancy(ctx, run, did, &client.ResolveDiscrepancyParams{IdempotencyKey: &idemKey}, body)
				}
				return a.api.ResolveDiscrepancyByID(ctx, did, &client.ResolveDiscrepancyByIDParams{IdempotencyKey: &idemKey}, body)
			})
			if err != nil {
				return err
			}
			var d client.Discrepancy
			if err := a.decode(out, &d); err != nil || a.json {
				return err
			}
			fmt.Fprintf(a.out, "discrepancy %s (%s %s) %s: %s%s\n", d.Id, d.Type, d.Reference, d.Status, deref(d.Resolution), replayedNote(res))
			return nil
		},
	}
}

func deref[T ~string](p *T) string {
	if p == nil {
		return "-"
	}
	return string(*p)
}

func adminStats() adminVerb {
	var from, to, bucket string
	var p client.AdminStatsParams
	return adminVerb{
		usage: "[-from T] [-to T] [-bucket hour|day]",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&from, "from", "", "start of the window (RFC 3339, or a duration before now; default -to minus 24h)")
			fs.StringVar(&to, "to", "", "end of the window (RFC 3339, or a duration before now; default now)")
			fs.StringVar(&bucket, "bucket", "", "one row per UTC hour or day (default hour up to 48h, day beyond)")
		},
		check: func([]string) error {
			now := time.Now()
			var err error
			if p.From, err = optTime("from", from, now); err != nil {
				return err
			}
			if p.To, err = optTime("to", to, now); err != nil {
				return err
			}
			switch bucket {
			case "":
			case "hour", "day":
				b := client.AdminStatsParamsBucket(bucket)
				p.Bucket = &b
			default:
				return usagef("-bucket %q: want hour or day", bucket)
			}
			return nil
		},
		run: func(ctx context.Context, a *adminConn, _ []string) error {
			var st client.Stats
			res, err := a.api.AdminStats(ctx, &p)
			if err := a.get(res, err, &st); err != nil || a.json {
				return err
			}
			printStats(a.out, st)
			return nil
		},
	}
}

// names is a domain list (statuses, types) as text, in its order.
func names[T ~string](list []T) []string {
	out := make([]string, len(list))
	for i, v := range list {
		out[i] = string(v)
	}
	return out
}

// checkChoice refuses flag name's value v unless it is one of choices:
// the lists are domain's, which payd itself checks against.
func checkChoice(name, v string, choices []string) error {
	if slices.Contains(choices, v) {
		return nil
	}
	return usagef("-%s %q: want %s", name, v, strings.Join(choices, ", "))
}

// checkID refuses an ID (an argument such as ORDER_ID, or a flag such as
// -run) that no row of payd's can have: every ID is a UUID.
func checkID(name, v string) error {
	if domain.ValidID(v) {
		return nil
	}
	return usagef("%s %q is not an ID: payd's IDs are UUIDs such as 01890a5d-ac96-774b-bcce-b302099a8057", name, v)
}

// checkCustomer refuses -customer unless it is a customer ID or an email
// address, as payd does.
func checkCustomer(v string) error {
	if domain.ValidID(v) {
		return nil
	}
	if _, err := domain.NormalizeEmail(v); err == nil && strings.Contains(v, "@") {
		return nil
	}
	return usagef("-customer %q: want a customer ID (a UUID) or an email address", v)
}

// checkPage refuses a -limit outside 1..domain.MaxPageSize and a -cursor
// payd cannot have printed (a cursor is the ID of a row).
func checkPage(limit int, cursor string) error {
	if limit < 1 || limit > domain.MaxPageSize {
		return usagef("-limit %d: want a whole number from 1 to %d", limit, domain.MaxPageSize)
	}
	if cursor != "" && !domain.ValidID(cursor) {
		return usagef("-cursor %q: want the cursor printed under an earlier page", cursor)
	}
	return nil
}

// checkKey refuses an idempotency key -key payd would refuse.
func checkKey(key string) error {
	if key == "" || domain.ValidKey(key) {
		return nil
	}
	return usagef("-key %q: want 1 to 255 letters, digits or . _ : -", key)
}

// replayedNote is what an answer adds to the line a verb prints when payd
// replayed it (Idempotent-Replayed: the key's first request did the work).
func replayedNote(res *http.Response) string {
	if res != nil && res.Header.Get("Idempotent-Replayed") == "true" {
		return " (payd replayed its earlier answer to this key)"
	}
	return ""
}
