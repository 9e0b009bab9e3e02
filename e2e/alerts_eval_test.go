package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// evalStep is both the spacing of the test series' samples and the rule
// evaluation interval.
const evalStep = time.Minute

// floatSample is one sample of a test series.
type floatSample struct {
	t int64
	f float64
}

func (s floatSample) T() int64                      { return s.t }
func (s floatSample) ST() int64                     { return 0 }
func (s floatSample) F() float64                    { return s.f }
func (s floatSample) H() *histogram.Histogram       { return nil }
func (s floatSample) FH() *histogram.FloatHistogram { return nil }
func (s floatSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s floatSample) Copy() chunks.Sample           { return s }

// seriesStore holds test series written as promtool's unit tests and
// promqltest write them ("metric{label="v"} 0+60x20", one sample per
// evalStep from time 0, "_" for none), and answers the engine's selects.
type seriesStore struct{ series []storage.Series }

func loadSeries(t *testing.T, text string) *seriesStore {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	st := &seriesStore{}
	for line := range strings.SplitSeq(text, "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		lset, vals, err := p.ParseSeriesDesc(line)
		if err != nil {
			t.Fatalf("series %q: %v", line, err)
		}
		var samples []chunks.Sample
		for i, v := range vals {
			if !v.Omitted {
				samples = append(samples, floatSample{t: int64(i) * evalStep.Milliseconds(), f: v.Value})
			}
		}
		st.series = append(st.series, storage.NewListSeries(lset, samples))
	}
	return st
}

func (st *seriesStore) queryable() storage.Queryable {
	return &storage.MockQueryable{MockQuerier: &storage.MockQuerier{
		SelectMockFunction: func(_ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
			var out []storage.Series
		next:
			for _, s := range st.series {
				for _, m := range ms {
					if !m.Matches(s.Labels().Get(m.Name)) {
						continue next
					}
				}
				out = append(out, s)
			}
			slices.SortFunc(out, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
			return &listSeriesSet{series: out, i: -1}
		}}}
}

type listSeriesSet struct {
	series []storage.Series
	i      int
}

func (s *listSeriesSet) Next() bool                        { s.i++; return s.i < len(s.series) }
func (s *listSeriesSet) At() storage.Series                { return s.series[s.i] }
func (s *listSeriesSet) Err() error                        { return nil }
func (s *listSeriesSet) Warnings() annotations.Annotations { return nil }

// firing evaluates rule as Prometheus's rule manager does, once per
// evalStep: it fires at `at` when its expression returned something at
// every evaluation of the rule's `for` before it. It returns the firing
// alerts' label sets (a series' labels without its name).
func firing(t *testing.T, st *seriesStore, rule string, at time.Duration) []labels.Labels {
	t.Helper()
	var r *struct {
		expr string
		hold time.Duration
	}
	for _, ar := range alertRules(t) {
		if ar.Alert == rule {
			r = &struct {
				expr string
				hold time.Duration
			}{ar.Expr, time.Duration(ar.For)}
		}
	}
	if r == nil {
		t.Fatalf("alerts.yml has no %s", rule)
	}
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: 10 * time.Second, LookbackDelta: 5 * time.Minute,
		Parser: parser.NewParser(parser.Options{})})
	seen, evals := map[string]int{}, 0
	series := map[string]labels.Labels{}
	for e := at - r.hold; e <= at; e += evalStep {
		evals++
		q, err := eng.NewInstantQuery(context.Background(), st.queryable(), nil, r.expr, time.UnixMilli(e.Milliseconds()))
		if err != nil {
			t.Fatalf("%s: %v", rule, err)
		}
		res := q.Exec(context.Background())
		if res.Err != nil {
			t.Fatalf("%s at %v: %v", rule, e, res.Err)
		}
		vec, err := res.Vector()
		if err != nil {
			t.Fatalf("%s at %v: %v", rule, e, err)
		}
		for _, s := range vec {
			l := s.Metric.DropReserved(func(n string) bool { return n == model.MetricNameLabel }) // an alert's labels are its series' but the name
			seen[l.String()]++
			series[l.String()] = l
		}
		q.Close()
	}
	var out []labels.Labels
	for k, n := range seen {
		if n == evals {
			out = append(out, series[k])
		}
	}
	return out
}

// TestAlertsFireOnBadSeries: the availability, error-ratio, latency and
// pool alerts fire on series that show the trouble, and stay quiet on
// series that do not, on a traffic below the floor and on other
// programs' series; the dispute alert fires on a counter that starts at
// 0 and not on one that appears with its first event (why payd exports
// its labelled counters at 0 from the start).
func TestAlertsFireOnBadSeries(t *testing.T) {
	build := `payd_build_info{job="payd",instance="a:8080",version="v1",revision="r",goversion="go"} 1x40`
	for _, c := range []struct {
		name, alert, series string
		at                  time.Duration
		fire                []string // the firing label sets, as labels.Labels.String
	}{
		{"one replica down", "PaydDown", `up{job="payd",instance="a:8080"} 1x3 0x10
			up{job="payd",instance="b:8080"} 1x13`, 10 * time.Minute, nil},
		{"every replica down", "PaydDown", `up{job="payd",instance="a:8080"} 1x3 0x10
			up{job="payd",instance="b:8080"} 1x3 0x10`, 10 * time.Minute, []string{`{job="payd"}`}},
		{"down for less than 2m", "PaydDown", `up{job="payd",instance="a:8080"} 1x8 0 0 1x3`, 10 * time.Minute, nil},
		{"no payd target at all", "PaydDown", `up{job="node",instance="n:9100"} 1x13`, 10 * time.Minute, []string{`{}`}},
		{"a chart's job name", "PaydDown", `up{job="prod-payd",instance="a:8080"} 0x13`, 10 * time.Minute, []string{`{job="prod-payd"}`}},
		{"all up", "PaydDown", `up{job="payd",instance="a:8080"} 1x13`, 10 * time.Minute, nil},

		{"one of two down", "PaydInstanceDown", `up{job="payd",instance="a:8080"} 1x3 0x10
			up{job="payd",instance="b:8080"} 1x13`, 10 * time.Minute, []string{`{instance="a:8080", job="payd"}`}},
		{"both down (PaydDown's)", "PaydInstanceDown", `up{job="payd",instance="a:8080"} 1x3 0x10
			up{job="payd",instance="b:8080"} 1x3 0x10`, 10 * time.Minute, nil},

		// 1 request/s, 5% of them 5xx.
		{"5% 5xx", "Payd5xxRatio", `payd_http_request_duration_seconds_count{job="payd",route="/v1/orders/:id/pay",method="POST",status="2xx"} 0+57x20
			payd_http_request_duration_seconds_count{job="payd",route="/v1/orders/:id/pay",method="POST",status="5xx"} 0+3x20`,
			15 * time.Minute, []string{`{job="payd"}`}},
		{"1% 5xx", "Payd5xxRatio", `payd_http_request_duration_seconds_count{job="payd",route="/v1/orders/:id/pay",method="POST",status="2xx"} 0+59.4x20
			payd_http_request_duration_seconds_count{job="payd",route="/v1/orders/:id/pay",method="POST",status="5xx"} 0+0.6x20`,
			15 * time.Minute, nil},
		{"25% 5xx under the traffic floor", "Payd5xxRatio", `payd_http_request_duration_seconds_count{job="payd",route="/v1/orders",method="POST",status="2xx"} 0+3x20
			payd_http_request_duration_seconds_count{job="payd",route="/v1/orders",method="POST",status="5xx"} 0+1x20`,
			15 * time.Minute, nil},
		{"readiness failing, no traffic", "Payd5xxRatio", `payd_http_request_duration_seconds_count{job="payd",route="/readyz",method="GET",status="5xx"} 0+60x20
			payd_http_request_duration_seconds_count{job="payd",route="/v1/orders",method="POST",status="2xx"} 0+6x20`,
			15 * time.Minute, nil},

		// 1 request/s on the pay route, every one between 2.5s and 5s.
		{"slow pays", "PaydLatencyP99High", latencySeries("/v1/orders/:id/pay", 0, 0, 60), 20 * time.Minute, []string{`{job="payd", route="/v1/orders/:id/pay"}`}},
		{"fast pays", "PaydLatencyP99High", latencySeries("/v1/orders/:id/pay", 60, 0, 0), 20 * time.Minute, nil},
		{"a few slow among fast", "PaydLatencyP99High", latencySeries("/v1/orders/:id/pay", 59.7, 0.3, 0), 20 * time.Minute, nil},
		{"long event streams", "PaydLatencyP99High", latencySeries("/v1/orders/:id/events", 0, 0, 60), 20 * time.Minute, nil},
		{"slow but quiet route", "PaydLatencyP99High", latencySeries("/v1/admin/customers", 0, 0, 1), 20 * time.Minute, nil},

		{"pool full, requests waiting", "PaydDBPoolExhausted", build + `
			go_sql_max_open_connections{job="payd",instance="a:8080",db_name="payd"} 10x20
			go_sql_in_use_connections{job="payd",instance="a:8080",db_name="payd"} 10x20
			go_sql_wait_count_total{job="payd",instance="a:8080",db_name="payd"} 0+30x20`,
			15 * time.Minute, []string{`{db_name="payd", instance="a:8080", job="payd"}`}},
		{"pool full, nobody waiting", "PaydDBPoolExhausted", build + `
			go_sql_max_open_connections{job="payd",instance="a:8080",db_name="payd"} 10x20
			go_sql_in_use_connections{job="payd",instance="a:8080",db_name="payd"} 10x20
			go_sql_wait_count_total{job="payd",instance="a:8080",db_name="payd"} 7x20`,
			15 * time.Minute, nil},
		{"waits, pool not full", "PaydDBPoolExhausted", build + `
			go_sql_max_open_connections{job="payd",instance="a:8080",db_name="payd"} 10x20
			go_sql_in_use_connections{job="payd",instance="a:8080",db_name="payd"} 4x20
			go_sql_wait_count_total{job="payd",instance="a:8080",db_name="payd"} 0+30x20`,
			15 * time.Minute, nil},
		{"unlimited pool", "PaydDBPoolExhausted", build + `
			go_sql_max_open_connections{job="payd",instance="a:8080",db_name="payd"} 0x20
			go_sql_in_use_connections{job="payd",instance="a:8080",db_name="payd"} 40x20
			go_sql_wait_count_total{job="payd",instance="a:8080",db_name="payd"} 0+30x20`,
			15 * time.Minute, nil},
		{"another program's pool", "PaydDBPoolExhausted", build + `
			go_sql_max_open_connections{job="other",instance="o:9000",db_name="payd"} 10x20
			go_sql_in_use_connections{job="other",instance="o:9000",db_name="payd"} 10x20
			go_sql_wait_count_total{job="other",instance="o:9000",db_name="payd"} 0+30x20`,
			15 * time.Minute, nil},

		{"Redis down", "PaydRedisDown", `payd_redis_up{job="payd",instance="a:8080"} 1x3 0x12`, 14 * time.Minute, []string{`{instance="a:8080", job="payd"}`}},
		{"Redis back", "PaydRedisDown", `payd_redis_up{job="payd",instance="a:8080"} 1x3 0x8 1x4`, 14 * time.Minute, nil},

		{"webhooks refused", "PaydWebhooksRateLimited", `payd_rate_limited_total{job="payd",instance="a:8080",limit="webhook"} 0x5 40x5`, 7 * time.Minute, []string{`{job="payd"}`}},
		{"customers refused", "PaydWebhooksRateLimited", `payd_rate_limited_total{job="payd",instance="a:8080",limit="customer"} 0x5 40x5
			payd_rate_limited_total{job="payd",instance="a:8080",limit="webhook"} 0x10`, 7 * time.Minute, nil},

		{"a dispute, counter from 0", "PaydDisputeOpened", `payd_discrepancies_total{job="payd",type="disputed"} 0x5 1x5`, 7 * time.Minute, []string{`{}`}},
		{"a dispute, counter born with it", "PaydDisputeOpened", `payd_discrepancies_total{job="payd",type="disputed"} _x5 1x5`, 7 * time.Minute, nil},

		{"an event waiting 20 minutes", "PaydNotifyBehind", `payd_notify_oldest_pending_age_seconds{job="payd",instance="a:8080"} 0+60x30
			payd_notify_oldest_pending_age_seconds{job="payd",instance="b:8080"} 0+60x30`, 20 * time.Minute, []string{`{}`}},
		{"events delivered within minutes", "PaydNotifyBehind", `payd_notify_oldest_pending_age_seconds{job="payd",instance="a:8080"} 0 120 240 0 60 300 0x20`, 20 * time.Minute, nil},
		{"an event just past 15 minutes", "PaydNotifyBehind", `payd_notify_oldest_pending_age_seconds{job="payd",instance="a:8080"} 0+60x30`, 15*time.Minute + 15*time.Second, []string{`{}`}},
		{"an event not yet 15 minutes old", "PaydNotifyBehind", `payd_notify_oldest_pending_age_seconds{job="payd",instance="a:8080"} 0+60x30`, 14*time.Minute + 45*time.Second, nil},
	} {
		t.Run(c.alert+"/"+c.name, func(t *testing.T) {
			var got []string
			for _, l := range firing(t, loadSeries(t, c.series), c.alert, c.at) {
				got = append(got, l.String())
			}
			slices.Sort(got)
			if !slices.Equal(got, c.fire) {
				t.Errorf("%s at %v fires %v, want %v", c.alert, c.at, got, c.fire)
			}
		})
	}
}

// latencySeries is 30 minutes of one route's request histogram: per
// minute, fast requests under 1s, mid ones between 1s and 2.5s, slow ones
// between 2.5s and 5s.
func latencySeries(route string, fast, mid, slow float64) string {
	lbl := `job="payd",route="` + route + `",method="POST",status="2xx"`
	line := func(le string, perMin float64) string {
		return "payd_http_request_duration_seconds_bucket{" + lbl + `,le="` + le + `"} 0+` + fmtFloat(perMin) + "x30\n"
	}
	all := fast + mid + slow
	return line("1", fast) + line("2.5", fast+mid) + line("5", all) + line("+Inf", all) +
		"payd_http_request_duration_seconds_count{" + lbl + "} 0+" + fmtFloat(all) + "x30"
}

func fmtFloat(f float64) string { return model.SampleValue(f).String() }
