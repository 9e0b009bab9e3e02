package e2e

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/google/uuid"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// scrapeFamilies GETs url and parses the Prometheus text format.
func scrapeFamilies(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	status, body := get(t, url)
	if status != http.StatusOK {
		t.Fatalf("GET %s = %d, want 200", url, status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse scrape of %s: %v", url, err)
	}
	return fams
}

// sample is the value of family name's series whose labels include want.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
		return 0, true
	}
	return 0, false
}

// signalsStack boots payd with its metrics listener and drives it through
// a paid, a declined and an unknown payment, a webhook for a charge payd
// never made (a discrepancy), one for a cancelled order's charge (an
// automatic refund), a webhook with a bad signature and one event left
// unapplied in the inbox. It returns the metrics address.
func signalsStack(t *testing.T, dialect string) (*stack, string) {
	// A silent sandbox: the only webhooks are the test's, so none is half
	// applied when the test scrapes.
	s := start(t, on(dialect), withEnv(env{"PAYD_METRICS_ADDR": "127.0.0.1:0"}), tuned(silentSandbox))
	_, tok := s.register(newEmail())
	s.paidOrder(tok, "5.00")
	if r := s.pay(tok, s.order(tok, "2.00"), uuid.NewString(), "pm_declined"); r.Status != http.StatusPaymentRequired {
		t.Fatalf("Pay pm_declined = %d %s, want 402", r.Status, r.Body)
	}
	unknown := s.order(tok, "3.00")
	if r := s.pay(tok, unknown, uuid.NewString(), "pm_timeout"); r.Status != http.StatusAccepted {
		t.Fatalf("Pay pm_timeout = %d %s, want 202", r.Status, r.Body)
	}
	// A charge the provider made behind payd's back: its success is a
	// missing_local_payment (a made-up one would be unconfirmed_payment).
	strangerKey := uuid.NewString()
	ch := s.chargeDirectly(strangerKey, unknown, "9.99")
	stranger := payment{AttemptID: strangerKey, ChargeID: ch.ID, OrderID: unknown, Amount: "9.99", Currency: "USD"}
	if r := s.sendEvent("msg_"+uuid.NewString(), "payment.succeeded", stranger); r.Status != http.StatusOK {
		t.Fatalf("webhook for an unknown attempt = %d %s, want 200", r.Status, r.Body)
	}
	// A charge the provider made for an order payd then cancelled: its
	// success event is refunded automatically (paid_after_close).
	closed := s.order(tok, "6.00")
	attempt, charge := s.loseOutcome(tok, closed)
	if r := s.do(request{method: "POST", path: "/v1/orders/" + closed + "/cancel", token: tok, key: uuid.NewString()}); r.Status != http.StatusOK {
		t.Fatalf("cancel %s = %d %s, want 200", closed, r.Status, r.Body)
	}
	late := payment{AttemptID: attempt, ChargeID: charge, OrderID: closed, Amount: "6.00", Currency: "USD"}
	if r := s.sendEvent("msg_"+uuid.NewString(), "payment.succeeded", late); r.Status != http.StatusOK {
		t.Fatalf("webhook for the cancelled order's charge = %d %s, want 200", r.Status, r.Body)
	}
	bad := signedWebhook(t, "msg_forged", time.Now(), []byte(`{}`))
	bad.Set("webhook-signature", "v1,Zm9yZ2Vk")
	if r := s.postWebhook([]byte(`{}`), bad); r.Status != http.StatusUnauthorized {
		t.Fatalf("forged webhook = %d, want 401", r.Status)
	}
	s.exec(`INSERT INTO webhook_events (id, type, payload, received_at) VALUES (?, 'payment.succeeded', ?, ?)`,
		"msg_half_done", []byte(`{}`), time.Now().UTC().Format("2006-01-02 15:04:05.000000"))
	addr := s.logged("metrics listening", "addr")
	if addr == "" {
		t.Fatalf("no \"metrics listening\" log line; logs:\n%s", s.logs.String())
	}
	return s, addr
}

// TestSignalsScrape: after payments and webhooks, a scrape of the metrics
// listener has every signal of ADR 0022 with the values the database
// holds, on both databases.
func TestSignalsScrape(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s, addr := signalsStack(t, dialect)
		fams := scrapeFamilies(t, "http://"+addr+"/metrics")
		for _, c := range []struct {
			name   string
			labels map[string]string
			check  func(float64) bool
			want   string
		}{
			{"payd_provider_request_duration_seconds", map[string]string{"operation": "charge", "outcome": "ok"}, func(v float64) bool { return v >= 1 }, ">= 1 call"},
			{"payd_provider_request_duration_seconds", map[string]string{"operation": "charge", "outcome": "declined"}, func(v float64) bool { return v == 1 }, "1 call"},
			{"payd_provider_request_duration_seconds", map[string]string{"operation": "charge", "outcome": "unavailable"}, func(v float64) bool { return v >= 1 }, ">= 1 call (the lost replies)"},
			{"payd_provider_request_duration_seconds", map[string]string{"operation": "refund", "outcome": "ok"}, func(v float64) bool { return v == 1 }, "1 call (the automatic refund)"},
			{"payd_orders_processing", nil, func(v float64) bool { return v == float64(s.count(`orders WHERE status = 'processing'`)) && v >= 1 }, "the processing orders in the database"},
			{"payd_discrepancies_open", nil, func(v float64) bool { return v == float64(s.count(`discrepancies WHERE status = 'open'`)) && v >= 1 }, "the open discrepancies in the database"},
			{"payd_oldest_unknown_attempt_age_seconds", nil, func(v float64) bool { return v > 0 && v < 600 }, "the unknown attempt's age, > 0"},
			{"payd_webhook_events_pending", nil, func(v float64) bool { return v == 1 }, "1 (the half-done event)"},
			{"payd_disputes_open", nil, func(v float64) bool { return v == float64(s.count(`disputes WHERE status = 'open'`)) }, "the open disputes in the database"},
			{"payd_discrepancies_total", map[string]string{"type": "disputed"}, func(v float64) bool { return v == 0 }, "0 (no dispute, exported from the start)"},
			{"payd_backlog_scrape_success", nil, func(v float64) bool { return v == 1 }, "1"},
			{"payd_webhook_rejected_total", map[string]string{"reason": "invalid_signature"}, func(v float64) bool { return v == 1 }, "1"},
			{"payd_build_info", map[string]string{"goversion": runtime.Version()}, func(v float64) bool { return v == 1 }, "1 with this Go version"},
			{"payd_payments_total", map[string]string{"result": "unknown"}, func(v float64) bool { return v >= 1 }, ">= 1"},
			{"go_sql_open_connections", nil, func(v float64) bool { return v >= 1 }, ">= 1 (pool statistics)"},
		} {
			v, ok := sample(fams, c.name, c.labels)
			if !ok || !c.check(v) {
				t.Errorf("scrape: %s%v = %v (present %v), want %s", c.name, c.labels, v, ok, c.want)
			}
		}
	})
}

// TestOutcomeLogLines: payment outcomes and discrepancies are logged with
// their order, and no secret, token or key reaches the log.
func TestOutcomeLogLines(t *testing.T) {
	s, _ := signalsStack(t, "sqlite")
	results := map[string]bool{}
	discrepancy, refund := false, false
	for line := range strings.SplitSeq(s.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		switch m["msg"] {
		case "payment outcome":
			if m["order_id"] == "" || m["attempt_id"] == "" {
				t.Errorf("payment outcome line without order or attempt: %s", line)
			}
			results[m["result"].(string)] = true
		case "discrepancy recorded":
			id, _ := m["discrepancy_id"].(string)
			// The line names the stored discrepancy: its id and status.
			discrepancy = discrepancy || m["type"] == "missing_local_payment" && m["order_id"] != "" && m["status"] == "open" &&
				id != "" && s.count("discrepancies WHERE id = ? AND type = 'missing_local_payment'", id) == 1
		case "automatic refund":
			refund = m["status"] == "succeeded" && m["amount"] == "6.00" && m["charge_id"] != "" && m["reason"] == "paid_after_close"
		}
	}
	if !results["declined"] || !results["paid"] || !results["unknown"] {
		t.Errorf("payment outcome lines with results %v, want paid, declined and unknown", results)
	}
	if !refund {
		t.Errorf("no \"automatic refund\" line for the cancelled order's charge; logs:\n%s", s.logs.String())
	}
	if !discrepancy {
		t.Errorf("no \"discrepancy recorded\" line for the missing local payment; logs:\n%s", s.logs.String())
	}
	for _, secret := range []string{testAdminToken, testSecretKey, testWebhookSecret, "Zm9yZ2Vk"} {
		if strings.Contains(s.logs.String(), secret) {
			t.Errorf("the log contains the secret %q", secret)
		}
	}
}

// exportedNames are the metric names a scrape has, with a histogram's
// _bucket, _count and _sum series, and Prometheus's own up.
func exportedNames(fams map[string]*dto.MetricFamily) map[string]bool {
	exported := map[string]bool{"up": true} // Prometheus's, for every target
	for name, f := range fams {
		exported[name] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			exported[name+"_bucket"], exported[name+"_count"], exported[name+"_sum"] = true, true, true
		}
	}
	return exported
}

// selectedNames are the metric names expr selects.
func selectedNames(expr parser.Expr) []string {
	var names []string
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			names = append(names, vs.Name)
		}
		return nil
	})
	return names
}

// runbookDoc is where every alert's runbook_url points: the alerts' table
// of docs/operations.md, as published, an absolute URL as Alertmanager's
// receivers and the Prometheus operator's tools expect.
const runbookDoc = "https://github.com/payd/payd/blob/main/docs/operations.md"

// alertRules parses deploy/prometheus/alerts.yml as Prometheus loads it.
func alertRules(t *testing.T) []rulefmt.Rule {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.ParseFile(filepath.Join(repoRoot, "deploy/prometheus/alerts.yml"), false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("alerts.yml: %v", errs)
	}
	var rules []rulefmt.Rule
	for _, g := range groups.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

// TestAlertRules: deploy/prometheus/alerts.yml is a valid Prometheus rule
// file (rulefmt, PromQL, annotation templates: what promtool check rules
// checks), every metric its expressions select is one a fresh payd
// exports before any traffic (a rule on a renamed or missing metric would
// never fire), and every alert says how urgent it is, what it means and
// where its runbook is.
func TestAlertRules(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	rules := alertRules(t)
	exported := exportedNames(freshScrape(t))
	readme, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := markdownAnchors(string(readme))
	alerts := map[string]bool{}
	for _, r := range rules {
		if r.Alert == "" {
			t.Errorf("rule %q is not an alert: alerts.yml holds alerts only", r.Record)
			continue
		}
		if alerts[r.Alert] {
			t.Errorf("alert %s is defined twice", r.Alert)
		}
		alerts[r.Alert] = true
		expr, err := p.ParseExpr(r.Expr)
		if err != nil {
			t.Fatalf("alert %s: %v", r.Alert, err)
		}
		names := selectedNames(expr)
		if len(names) == 0 {
			t.Errorf("alert %s selects no metric", r.Alert)
		}
		for _, name := range names {
			if !exported[name] {
				t.Errorf("alert %s selects %s, which payd does not export", r.Alert, name)
			}
		}
		if sev := r.Labels["severity"]; sev != "page" && sev != "ticket" {
			t.Errorf("alert %s: severity %q, want page or ticket", r.Alert, sev)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("alert %s has no %s annotation", r.Alert, a)
			}
		}
		if doc, anchor, _ := strings.Cut(r.Annotations["runbook_url"], "#"); doc != runbookDoc || !anchors[anchor] {
			t.Errorf("alert %s: runbook_url %q is not a heading of %s", r.Alert, r.Annotations["runbook_url"], runbookDoc)
		}
	}
	for _, want := range []string{"PaydPaymentStuck", "PaydDiscrepanciesOpen", "PaydProviderErrorRate", "PaydWebhookSignatureFailures", "PaydDisputeOpened",
		"PaydDown", "PaydInstanceDown", "Payd5xxRatio", "PaydLatencyP99High", "PaydDBPoolExhausted", "PaydRedisDown"} {
		if !alerts[want] {
			t.Errorf("alerts.yml has no %s rule", want)
		}
	}
	// Each alert has a row in the README's table of alerts.
	for a := range alerts {
		if !strings.Contains(string(readme), "| `"+a+"` |") {
			t.Errorf("README's table of alerts has no row for %s", a)
		}
	}
}

// markdownAnchors are the anchors of a Markdown document's headings, as
// GitHub makes them: lower case, spaces as dashes, punctuation dropped.
func markdownAnchors(doc string) map[string]bool {
	anchors := map[string]bool{}
	for line := range strings.SplitSeq(doc, "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		anchors[b.String()] = true
	}
	return anchors
}
