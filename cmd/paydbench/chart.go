package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
)

// The chart's colours: payd in blue, the floor it is measured against in
// grey.
const (
	paydColour  = "#2f6fb0"
	floorColour = "#a3acb7"
)

// chartGroup is one phase of the chart: payd's and the floor's figures,
// either absent when that target has no such phase.
type chartGroup struct {
	name        string
	payd, floor *phase
}

// chartGroups are the phases to draw, in the order the run measured them.
// Registration is left out: it is one request per client, too few to
// measure, and only set-up for the pays; so are the operators' reads,
// which the floor does not do.
func (r *report) chartGroups() []chartGroup {
	var groups []chartGroup
	index := map[string]int{}
	for i := range r.Phases {
		p := &r.Phases[i]
		if p.Name == "register" || strings.HasPrefix(p.Name, readPrefix) {
			continue
		}
		k, ok := index[p.Name]
		if !ok {
			k = len(groups)
			index[p.Name] = k
			groups = append(groups, chartGroup{name: p.Name})
		}
		if p.Target == "floor" {
			groups[k].floor = p
		} else {
			groups[k].payd = p
		}
	}
	return groups
}

// Geometry of the chart, in SVG user units (pixels).
const (
	chartWidth   = 900
	panelHeight  = 250 // the plot area of one panel
	panelTop     = 110 // where the first panel's plot area begins
	panelGap     = 110 // from one plot area's bottom to the next one's top
	plotLeft     = 80
	plotRight    = chartWidth - 30
	chartBottom  = 40 // below the last panel's phase labels
	barGap       = 4  // between payd's bar and the floor's
	groupPadding = 0.2
)

// writeChart writes an SVG chart of payd's and the floor's throughput and
// p99 latency per phase: two panels of grouped bars, each bar labelled
// with its value, with axes, grid lines and a legend. It is plain SVG 1.1,
// readable by any browser.
func (r *report) writeChart(w io.Writer) error {
	groups := r.chartGroups()
	height := panelTop + 2*panelHeight + panelGap + chartBottom + 20
	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">
`, chartWidth, height, chartWidth, height)
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", chartWidth, height)
	text(&b, chartWidth/2, 28, "middle", `font-size="17" font-weight="bold"`, "payd against the floor of its own statements")
	text(&b, chartWidth/2, 50, "middle", `fill="#444444"`, r.title())
	if s := r.ratioLine(); s != "" {
		text(&b, chartWidth/2, 68, "middle", `fill="#444444"`, s)
	}
	legend(&b, plotRight, panelTop-14)
	top := float64(panelTop)
	r.panel(&b, groups, top, "requests per second (higher is better)", true, func(p *phase) float64 { return p.PerSecond }, func(v float64) string { return fmt.Sprintf("%.0f", v) })
	top += panelHeight + panelGap
	r.panel(&b, groups, top, "p99 latency, ms (lower is better)", false, func(p *phase) float64 { return p.P99Ms }, func(v float64) string { return fmt.Sprintf("%.1f", v) })
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// title is the run the chart shows, as the text report's first line says it.
func (r *report) title() string {
	db := r.Database
	if db == "mysql" {
		db = "MySQL/MariaDB"
	}
	if r.Redis {
		db += " with Redis"
	}
	s := fmt.Sprintf("%s, %d clients, %d requests per phase, %d CPUs", db, r.Clients, r.Requests, r.CPUs)
	if r.GoVersion != "" {
		s += ", " + r.GoVersion
	}
	return s
}

// ratioLine is payd's throughput over the floor's, or empty without one.
func (r *report) ratioLine() string {
	if r.Ratios.NewPay == 0 && r.Ratios.Replay == 0 {
		return ""
	}
	s := fmt.Sprintf("payd/floor: new pay %.2f×, replay %.2f×", r.Ratios.NewPay, r.Ratios.Replay)
	if r.Ratios.NewPayBatched != 0 {
		s += fmt.Sprintf("; new pay against the batched floor %.2f×", r.Ratios.NewPayBatched)
	}
	return s
}

// legend draws the two keys side by side, ending at x on baseline y.
func legend(b *bytes.Buffer, x, y int) {
	x -= 300
	for _, l := range []struct {
		colour, name string
		width        int
	}{{paydColour, "payd", 70}, {floorColour, "floor (payd's statements, raw SQL)", 0}} {
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`+"\n", x, y-10, l.colour)
		text(b, x+18, y, "start", "", l.name)
		x += l.width
	}
}

// panel draws one measure as grouped bars with its y axis from 0 to a round
// maximum; with ratio, payd's value over the floor's under each phase that
// has both.
func (r *report) panel(b *bytes.Buffer, groups []chartGroup, top float64, label string, ratio bool, value func(*phase) float64, format func(float64) string) {
	bottom := top + panelHeight
	max := 0.0
	for _, g := range groups {
		for _, p := range []*phase{g.payd, g.floor} {
			if p != nil {
				max = math.Max(max, value(p))
			}
		}
	}
	text(b, plotLeft, int(top)-14, "start", `font-size="14" font-weight="bold"`, label)
	y := linearGrid(b, max, bottom, plotRight)
	axes(b, top, bottom, plotRight)
	if len(groups) == 0 {
		return
	}
	groupWidth := float64(plotRight-plotLeft) / float64(len(groups))
	barWidth := (groupWidth*(1-2*groupPadding) - barGap) / 2
	for i, g := range groups {
		x0 := float64(plotLeft) + float64(i)*groupWidth + groupWidth*groupPadding
		for j, bar := range []struct {
			p      *phase
			colour string
			who    string
		}{{g.payd, paydColour, "payd"}, {g.floor, floorColour, "floor"}} {
			if bar.p == nil {
				continue
			}
			v := value(bar.p)
			x := x0 + float64(j)*(barWidth+barGap)
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s</title></rect>`+"\n",
				x, y(v), barWidth, bottom-y(v), bar.colour, escape(fmt.Sprintf("%s, %s: %s", bar.who, g.name, format(v))))
			text(b, int(math.Round(x+barWidth/2)), int(math.Round(y(v)))-5, "middle", "", format(v))
		}
		cx := int(math.Round(float64(plotLeft) + (float64(i)+0.5)*groupWidth))
		text(b, cx, int(bottom)+20, "middle", `font-size="13"`, g.name)
		note := ""
		switch {
		case g.payd == nil:
			note = "floor only"
		case g.floor == nil:
			note = "payd only"
		case ratio && value(g.floor) != 0:
			note = fmt.Sprintf("payd %.2f× the floor", value(g.payd)/value(g.floor))
		}
		if note != "" {
			text(b, cx, int(bottom)+36, "middle", `fill="#555555" font-size="11"`, note)
		}
	}
}

// linearGrid draws a panel's grid lines and their labels, from 0 to a
// round maximum at least max, the plot area's bottom at bottom and its
// right edge at right, and returns where a value goes.
func linearGrid(b *bytes.Buffer, max, bottom float64, right int) func(float64) float64 {
	step := niceStep(max / 5)
	axisMax := step * math.Ceil(max/step)
	if axisMax == 0 {
		axisMax = step
	}
	y := func(v float64) float64 { return bottom - v/axisMax*panelHeight }
	for v := 0.0; v <= axisMax+step/2; v += step {
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e3e6ea"/>`+"\n", plotLeft, y(v), right, y(v))
		text(b, plotLeft-8, int(math.Round(y(v)))+4, "end", `fill="#444444"`, axisLabel(v, step))
	}
	return y
}

// axes draws a panel's two axes, its plot area from top to bottom and from
// plotLeft to right.
func axes(b *bytes.Buffer, top, bottom float64, right int) {
	fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#333333"/>`+"\n", plotLeft, top, plotLeft, bottom)
	fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#333333"/>`+"\n", plotLeft, bottom, right, bottom)
}

// niceStep is the smallest 1, 2 or 5 times a power of ten at least v.
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// axisLabel prints a tick's value with as many decimals as its step needs.
func axisLabel(v, step float64) string {
	decimals := 0
	if step < 1 {
		decimals = int(math.Ceil(-math.Log10(step)))
	}
	return fmt.Sprintf("%.*f", decimals, v)
}

func text(b *bytes.Buffer, x, y int, anchor, attrs, s string) {
	if attrs != "" {
		attrs = " " + attrs
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="%s"%s>%s</text>`+"\n", x, y, anchor, attrs, escape(s))
}

func escape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}
