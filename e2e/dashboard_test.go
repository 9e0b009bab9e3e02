package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/prometheus/prometheus/promql/parser"
)

// grafanaDashboard is the part of Grafana's dashboard model the test
// reads.
type grafanaDashboard struct {
	UID           string         `json:"uid"`
	SchemaVersion int            `json:"schemaVersion"`
	Panels        []grafanaPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *grafanaDSRef   `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type grafanaDSRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type grafanaPanel struct {
	ID         int           `json:"id"`
	Type       string        `json:"type"`
	Title      string        `json:"title"`
	Datasource *grafanaDSRef `json:"datasource"`
	GridPos    *struct {
		H, W, X, Y int
	} `json:"gridPos"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		Expr       string        `json:"expr"`
		RefID      string        `json:"refId"`
		Datasource *grafanaDSRef `json:"datasource"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // a collapsed row's
}

// grafanaVar is a Grafana variable in a query: $name, ${name} or
// ${name:format}.
var grafanaVar = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(?::[a-z]+)?\}|\$([A-Za-z0-9_]+)`)

// grafanaBuiltins are the values Grafana gives its own variables when it
// runs a query; a dashboard's variables become a value their label could
// hold.
var grafanaBuiltins = map[string]string{"__rate_interval": "5m", "__interval": "1m", "__range": "1h", "__range_s": "3600"}

// expandGrafana replaces the variables in a panel's query as Grafana
// would before sending it to Prometheus; a variable neither Grafana's nor
// the dashboard's is an error.
func expandGrafana(q string, vars map[string]bool) (string, error) {
	var bad []string
	out := grafanaVar.ReplaceAllStringFunc(q, func(m string) string {
		sub := grafanaVar.FindStringSubmatch(m)
		name := sub[1] + sub[2]
		if v, ok := grafanaBuiltins[name]; ok {
			return v
		}
		if vars[name] {
			return "payd"
		}
		bad = append(bad, m)
		return m
	})
	if bad != nil {
		return "", fmt.Errorf("undefined variables %v", bad)
	}
	return out, nil
}

// labelValuesQuery is a Prometheus variable's query: label_values(selector, label).
var labelValuesQuery = regexp.MustCompile(`^label_values\((.+),\s*([A-Za-z_][A-Za-z0-9_]*)\)$`)

// TestDashboardSchema: deploy/grafana/payd.json decodes strictly into
// Grafana's dashboard model (the foundation SDK's types, generated from
// Grafana's schemas, with the panel and query plugins' own): a misspelt
// or misplaced field, a missing required one or a wrong type fails here,
// without a Grafana.
func TestDashboardSchema(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "deploy/grafana/payd.json"))
	if err != nil {
		t.Fatal(err)
	}
	plugins.RegisterDefaultPlugins()
	var d dashboard.Dashboard //nolint:staticcheck // SA1019: the dashboard is Grafana's v1 JSON model, which dashboardv2 does not read
	// The SDK returns its error list typed even when empty.
	if err := d.UnmarshalJSONStrict(raw); err != nil {
		if be, ok := errors.AsType[cog.BuildErrors](err); !ok || len(be) > 0 {
			t.Fatalf("payd.json is not a dashboard Grafana's schema accepts:\n%v", err)
		}
	}
	if len(d.Panels) == 0 {
		t.Fatal("payd.json: no panels")
	}
}

// TestDashboard: deploy/grafana/payd.json is a Grafana dashboard whose
// every query is PromQL Prometheus parses once Grafana's variables are
// filled in, selects only metrics a fresh payd exports (with Redis
// configured, before any traffic), and whose panels each have an id of
// their own, a place on the grid, the dashboard's data source, a unit and
// a query; every panel sits under a row.
func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "deploy/grafana/payd.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("payd.json: %v", err)
	}
	if d.SchemaVersion < 39 || d.UID == "" {
		t.Errorf("payd.json: schemaVersion %d, uid %q; want >= 39 and a uid", d.SchemaVersion, d.UID)
	}
	exported := exportedNames(freshScrape(t))
	p := parser.NewParser(parser.Options{})
	shown := map[string]bool{} // the metrics the panels select
	// checkQuery parses q and checks the metrics it selects.
	checkQuery := func(where, q string, vars map[string]bool) {
		t.Helper()
		expanded, err := expandGrafana(q, vars)
		if err != nil {
			t.Errorf("%s: %v in %q", where, err, q)
			return
		}
		expr, err := p.ParseExpr(expanded)
		if err != nil {
			t.Errorf("%s: %q does not parse: %v", where, expanded, err)
			return
		}
		names := selectedNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: %q selects no metric", where, q)
		}
		for _, n := range names {
			if !exported[n] {
				t.Errorf("%s selects %s, which payd does not export", where, n)
			}
		}
		if strings.HasPrefix(where, "panel") {
			for _, n := range names {
				shown[n] = true
			}
		}
	}

	vars := map[string]bool{}
	kinds := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name], kinds[v.Name] = true, v.Type
		if v.Type == "datasource" {
			var q string
			if json.Unmarshal(v.Query, &q) != nil || q != "prometheus" {
				t.Errorf("variable %s: a data source variable of type %s, want prometheus", v.Name, v.Query)
			}
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		if v.Datasource == nil || v.Datasource.UID != "${datasource}" {
			t.Errorf("variable %s: data source %+v, want ${datasource}", v.Name, v.Datasource)
		}
		var q string
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Errorf("variable %s: query %s is not a string", v.Name, v.Query)
			continue
		}
		m := labelValuesQuery.FindStringSubmatch(q)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, q)
			continue
		}
		checkQuery("variable "+v.Name, m[1], vars)
	}
	for _, want := range []string{"datasource", "job", "instance"} {
		if !vars[want] {
			t.Errorf("payd.json has no %s variable", want)
		}
	}
	if kinds["datasource"] != "datasource" {
		t.Errorf("variable datasource is of type %q, want datasource", kinds["datasource"])
	}

	ids := map[int]string{}
	var grid [][24]bool // the cells the panels take
	rows, queries := 0, 0
	var walk func(panels []grafanaPanel)
	walk = func(panels []grafanaPanel) {
		for _, pn := range panels {
			where := fmt.Sprintf("panel %d %q", pn.ID, pn.Title)
			if pn.ID <= 0 {
				t.Errorf("%s: no id", where)
			} else if other, dup := ids[pn.ID]; dup {
				t.Errorf("%s: id taken by %q", where, other)
			}
			ids[pn.ID] = pn.Title
			if g := pn.GridPos; g == nil || g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
				t.Errorf("%s: gridPos %+v, want one inside the 24 columns", where, g)
			} else {
				for len(grid) < g.Y+g.H {
					grid = append(grid, [24]bool{})
				}
				for y := g.Y; y < g.Y+g.H; y++ {
					for x := g.X; x < g.X+g.W; x++ {
						if grid[y][x] {
							t.Errorf("%s overlaps another panel at column %d, row %d", where, x, y)
						}
						grid[y][x] = true
					}
				}
			}
			if pn.Type == "row" {
				rows++
				walk(pn.Panels)
				continue
			}
			if rows == 0 {
				t.Errorf("%s comes before any row", where)
			}
			if pn.Datasource == nil || pn.Datasource.Type != "prometheus" || pn.Datasource.UID != "${datasource}" {
				t.Errorf("%s: data source %+v, want prometheus ${datasource}", where, pn.Datasource)
			}
			if pn.FieldConfig.Defaults.Unit == "" {
				t.Errorf("%s: no unit", where)
			}
			if len(pn.Targets) == 0 {
				t.Errorf("%s: no query", where)
			}
			refs := map[string]bool{}
			for _, tg := range pn.Targets {
				if tg.RefID == "" || refs[tg.RefID] {
					t.Errorf("%s: refId %q missing or repeated", where, tg.RefID)
				}
				refs[tg.RefID] = true
				if tg.Datasource == nil || *tg.Datasource != *pn.Datasource {
					t.Errorf("%s: a query's data source %+v differs from the panel's", where, tg.Datasource)
				}
				queries++
				checkQuery(where, tg.Expr, vars)
			}
		}
	}
	walk(d.Panels)
	if rows == 0 || queries == 0 {
		t.Fatalf("payd.json: %d rows, %d queries", rows, queries)
	}
	// An alert fires on something an operator can then look at: every
	// metric an alert selects is on a panel (payd_build_info only lends
	// its labels to a join).
	for _, r := range alertRules(t) {
		expr, err := p.ParseExpr(r.Expr)
		if err != nil {
			t.Fatalf("alert %s: %v", r.Alert, err)
		}
		for _, n := range selectedNames(expr) {
			if n != "payd_build_info" && !shown[n] {
				t.Errorf("alert %s selects %s, which no panel of payd.json shows", r.Alert, n)
			}
		}
	}

	// What the dashboard must show, by the metrics that show it.
	all := string(raw)
	for _, want := range []string{"payd_http_request_duration_seconds_bucket", "payd_http_request_duration_seconds_count", `status=\"5xx\"`, `status=\"4xx\"`,
		"payd_payments_total", "payd_provider_request_duration_seconds_bucket", "payd_orders_processing", "payd_oldest_unknown_attempt_age_seconds",
		"payd_discrepancies_open", "payd_disputes_open", "payd_redis_up", "go_sql_wait_count_total", "go_sql_wait_duration_seconds_total",
		"go_sql_in_use_connections", "go_sql_max_open_connections"} {
		if !strings.Contains(all, want) {
			t.Errorf("payd.json shows nothing of %s", want)
		}
	}
}
