package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/notify"
	"github.com/payd/payd/service"
	"github.com/payd/payd/telemetry"
)

// closedRedis is a PAYD_REDIS_URL where nothing listens: payd registers
// its Redis metrics and serves from the database.
func closedRedis(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "redis://" + addr + "/0"
}

// freshScrape is the first scrape of a payd that has served nothing yet,
// with every optional collector it has (Redis, at a closed port).
func freshScrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	s := start(t, withEnv(env{"PAYD_REDIS_URL": closedRedis(t)}))
	return scrapeFamilies(t, s.base+"/metrics")
}

// strs is an enum's list as label values.
func strs[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// TestCountersStartAtZero: before any traffic, every series of a closed
// label set is exported at 0, so the first event after a restart is an
// increase() too. The label values are the enums' own lists, which
// TestLabelEnumsListed holds to the enums' constants.
func TestCountersStartAtZero(t *testing.T) {
	fams := freshScrape(t)
	type want struct {
		family string
		labels map[string]string
	}
	var wants []want
	one := func(family, label string, values []string) {
		if len(values) == 0 {
			t.Fatalf("%s: no %s values to check", family, label)
		}
		for _, v := range values {
			wants = append(wants, want{family, map[string]string{label: v}})
		}
	}
	one("payd_payments_total", "result", strs(service.PaymentOutcomes))
	one("payd_idempotency_outcomes_total", "outcome", strs(idempotency.KeyOutcomes))
	one("payd_discrepancies_total", "type", strs(domain.DiscrepancyTypes))
	one("payd_job_rows_total", "job", strs(service.JobNames))
	one("payd_db_retries_total", "reason", strs(domain.RetryReasons))
	one("payd_webhook_rejected_total", "reason", strs(telemetry.WebhookRejections))
	one("payd_redis_replays_total", "result", []string{"hit", "miss"})
	one("payd_rate_limited_total", "limit", strs(telemetry.RateLimits))
	one("payd_notify_deliveries_total", "outcome", strs(notify.Outcomes))
	one("payd_retention_deleted_rows_total", "table", service.RetainedTables)
	for _, typ := range append(strs(domain.ProviderEventTypes), "other") {
		for _, o := range strs(domain.WebhookOutcomes) {
			wants = append(wants, want{"payd_webhook_events_total", map[string]string{"type": typ, "outcome": o}})
		}
	}
	for _, op := range telemetry.ProviderOperations {
		for _, o := range strs(telemetry.ProviderOutcomes) {
			if o == string(telemetry.ProviderDeclined) && op != "charge" {
				continue
			}
			wants = append(wants, want{"payd_provider_request_duration_seconds", map[string]string{"operation": op, "outcome": o}})
		}
	}
	for _, r := range [][2]string{{"/v1/orders/:id/pay", "POST"}, {"/v1/customers", "POST"}, {"/v1/orders/:id/events", "GET"}, {"/v1/webhooks/provider", "POST"}} {
		wants = append(wants, want{"payd_http_request_duration_seconds", map[string]string{"route": r[0], "method": r[1], "status": "5xx"}})
	}
	for _, w := range wants {
		v, ok := sample(fams, w.family, w.labels)
		if !ok || v != 0 {
			t.Errorf("fresh scrape: %s%v = %v (present %v), want present at 0", w.family, w.labels, v, ok)
		}
	}
	// Nothing else: a series outside the sets would be a label value the
	// enums do not list.
	for family, n := range map[string]int{"payd_payments_total": len(service.PaymentOutcomes),
		"payd_discrepancies_total": len(domain.DiscrepancyTypes), "payd_job_rows_total": len(service.JobNames),
		"payd_retention_deleted_rows_total": len(service.RetainedTables),
		"payd_webhook_events_total":         (len(domain.ProviderEventTypes) + 1) * len(domain.WebhookOutcomes)} {
		if got := len(fams[family].GetMetric()); got != n {
			t.Errorf("fresh scrape: %d %s series, want %d", got, family, n)
		}
	}
}

// TestLabelEnumsListed: each enum's list (service.PaymentOutcomes, ...)
// holds every constant of its type, read from the package's source, so a
// new constant not added to its list fails here instead of being missing
// from the scrape until its first event.
func TestLabelEnumsListed(t *testing.T) {
	for _, c := range []struct {
		dir, typ string
		list     []string
	}{
		{"service", "PaymentOutcome", strs(service.PaymentOutcomes)},
		{"service", "JobName", strs(service.JobNames)},
		{"idempotency", "KeyOutcome", strs(idempotency.KeyOutcomes)},
		{"domain", "WebhookOutcome", strs(domain.WebhookOutcomes)},
		{"domain", "DiscrepancyType", strs(domain.DiscrepancyTypes)},
		{"domain", "RetryReason", strs(domain.RetryReasons)},
		{"domain", "ProviderEventType", strs(domain.ProviderEventTypes)},
		{"telemetry", "ProviderOutcome", strs(telemetry.ProviderOutcomes)},
		{"telemetry", "WebhookRejection", strs(telemetry.WebhookRejections)},
		{"telemetry", "RateLimit", strs(telemetry.RateLimits)},
		{"notify", "Outcome", strs(notify.Outcomes)},
	} {
		consts := typedConsts(t, filepath.Join(repoRoot, c.dir), c.typ)
		if len(consts) == 0 {
			t.Errorf("%s.%s: no constants found in the source", c.dir, c.typ)
		}
		slices.Sort(consts)
		list := slices.Sorted(slices.Values(c.list))
		if !slices.Equal(consts, list) {
			t.Errorf("%s.%s: constants %v, list %v: the list must hold every constant once", c.dir, c.typ, consts, list)
		}
	}
}

// typedConsts are the string values of the constants of type typ declared
// in the non-test files of dir.
func typedConsts(t *testing.T, dir, typ string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != typ {
					continue
				}
				for _, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s: a %s constant that is not a string literal", name, typ)
					}
					s, _ := strconv.Unquote(lit.Value)
					out = append(out, s)
				}
			}
		}
	}
	return out
}
