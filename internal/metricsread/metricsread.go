// Package metricsread reads a payd replica's /metrics, in the Prometheus
// text format, for the tools that watch payd from outside: the load
// generator's resource check and the nemesis's soak.
package metricsread

import (
	"context"
	"fmt"
	"io"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families is one reading: the metric families by name.
type Families map[string]*dto.MetricFamily

// Parse reads the Prometheus text format.
func Parse(r io.Reader) (Families, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	return Families(fams), nil
}

// Fetch reads url with hc and parses the answer.
func Fetch(ctx context.Context, hc *http.Client, url string) (Families, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read %s: status %d", url, resp.StatusCode)
	}
	return Parse(resp.Body)
}

// Value returns the value of the family's first series (a gauge, a
// counter or an untyped sample), and whether the family is there.
func (f Families) Value(name string) (float64, bool) {
	fam, ok := f[name]
	if !ok || len(fam.GetMetric()) == 0 {
		return 0, false
	}
	return value(fam.GetMetric()[0]), true
}

// ByLabel returns the value of each of the family's series, keyed by the
// value of the label (a missing label is "").
func (f Families) ByLabel(name, label string) map[string]float64 {
	fam, ok := f[name]
	if !ok {
		return nil
	}
	out := make(map[string]float64, len(fam.GetMetric()))
	for _, m := range fam.GetMetric() {
		key := ""
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label {
				key = lp.GetValue()
			}
		}
		out[key] = value(m)
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}
