package nemesis

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
)

// The chart's layout: panels of panelW×panelH in two columns, each with
// a plot area inset by the margins for its axes' labels and its legend.
const (
	panelW, panelH           = 460, 280
	columns                  = 2
	marginL, marginR         = 64, 16
	marginT, marginB         = 34, 90
	legendLine               = 13
	chartTitleH              = 30
	maxLegend                = 6
	seriesUnread     float64 = -1 // a minute a replica could not be read: a gap in its line
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"}

// series is one line of a panel: a value per minute, or seriesUnread.
type series struct {
	name   string
	values []float64
}

// panel is one small chart.
type panel struct {
	title  string
	unit   func(float64) string // formats a tick label
	series []series
}

// WriteSVG draws the minutes as a self-contained SVG: one small panel for
// each figure (operations and p99 latency per minute, then per replica
// resident memory, goroutines, open files and each pool's open
// connections), with the minutes along the x axis. A flat line is the
// picture of no growth.
func WriteSVG(w io.Writer, minutes []Minute) error {
	panels := []panel{
		{title: "operations per minute", unit: count, series: []series{perMinute(minutes, "ops", func(m Minute) (float64, bool) { return float64(m.Ops), true })}},
		{title: "p99 latency per minute", unit: millis, series: []series{perMinute(minutes, "p99", func(m Minute) (float64, bool) { return float64(m.P99.Milliseconds()), true })}},
		{title: "resident memory", unit: mebibytes, series: perReplica(minutes, func(m Minute, r string) (float64, bool) { v, ok := m.RSS[r]; return float64(v) / (1 << 20), ok })},
		{title: "goroutines", unit: count, series: perReplica(minutes, func(m Minute, r string) (float64, bool) { v, ok := m.Goroutines[r]; return float64(v), ok })},
		{title: "open files", unit: count, series: perReplica(minutes, func(m Minute, r string) (float64, bool) { v, ok := m.OpenFiles[r]; return float64(v), ok })},
		{title: "pool connections open", unit: count, series: perPool(minutes)},
	}
	rows := (len(panels) + columns - 1) / columns
	width, height := columns*panelW, chartTitleH+rows*panelH

	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		width, height, width, height)
	fmt.Fprintf(bw, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	title := fmt.Sprintf("payd soak: %d minutes", len(minutes))
	fmt.Fprintf(bw, `<text x="%d" y="20" font-size="15" font-weight="bold">%s</text>`+"\n", marginL, esc(title))
	for i, p := range panels {
		x, y := (i%columns)*panelW, chartTitleH+(i/columns)*panelH
		p.write(bw, x, y, len(minutes))
	}
	fmt.Fprintln(bw, `</svg>`)
	return bw.Flush()
}

func perMinute(minutes []Minute, name string, value func(Minute) (float64, bool)) series {
	s := series{name: name}
	for _, m := range minutes {
		v, ok := value(m)
		if !ok {
			v = seriesUnread
		}
		s.values = append(s.values, v)
	}
	return s
}

// replicas lists every replica read in any minute, sorted.
func replicas(minutes []Minute) []string {
	seen := map[string]bool{}
	for _, m := range minutes {
		for r := range m.Goroutines {
			seen[r] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

func perReplica(minutes []Minute, value func(Minute, string) (float64, bool)) []series {
	var out []series
	for _, r := range replicas(minutes) {
		out = append(out, perMinute(minutes, r, func(m Minute) (float64, bool) { return value(m, r) }))
	}
	return out
}

func perPool(minutes []Minute) []series {
	type pool struct{ replica, db string }
	seen := map[pool]bool{}
	for _, m := range minutes {
		for r, dbs := range m.Pools {
			for db := range dbs {
				seen[pool{r, db}] = true
			}
		}
	}
	pools := slices.SortedFunc(maps.Keys(seen), func(a, b pool) int {
		return strings.Compare(a.replica+"\x00"+a.db, b.replica+"\x00"+b.db)
	})
	var out []series
	for _, p := range pools {
		name := p.replica + " " + p.db
		out = append(out, perMinute(minutes, name, func(m Minute) (float64, bool) {
			v, ok := m.Pools[p.replica][p.db]
			return float64(v), ok
		}))
	}
	return out
}

// write draws the panel with its top left corner at (x, y).
func (p panel) write(w io.Writer, x, y, n int) {
	left, top := x+marginL, y+marginT
	plotW, plotH := panelW-marginL-marginR, panelH-marginT-marginB
	fmt.Fprintf(w, `<g>`+"\n")
	fmt.Fprintf(w, `<text x="%d" y="%d" font-size="13" font-weight="bold">%s</text>`+"\n", left, y+20, esc(p.title))
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999999"/>`+"\n", left, top, plotW, plotH)

	ymax := niceCeil(p.max())
	// y axis: three ticks, 0, half and the top, with grid lines.
	for i := 0; i <= 2; i++ {
		v := ymax * float64(i) / 2
		ty := float64(top+plotH) - float64(plotH)*float64(i)/2
		fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e0e0e0"/>`+"\n", left, ty, left+plotW, ty)
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-4, ty+4, esc(p.unit(v)))
	}
	// x axis: the minutes, at most about eight labels.
	step := max(1, (n+7)/8)
	for i := 0; i < n; i += step {
		fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", xAt(left, plotW, n, i), top+plotH+14, i+1)
	}
	fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="middle" fill="#555555">minute</text>`+"\n", left+plotW/2, top+plotH+28)
	if n == 0 || len(p.series) == 0 {
		fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="middle" fill="#555555">no samples</text>`+"\n", left+plotW/2, top+plotH/2)
	}

	for si, s := range p.series {
		color := palette[si%len(palette)]
		for _, run := range segments(s.values) {
			var pts []string
			for _, i := range run {
				px, py := xAt(left, plotW, n, i), float64(top+plotH)-float64(plotH)*s.values[i]/ymax
				if len(run) == 1 { // a lone minute is a dot
					fmt.Fprintf(w, `<circle cx="%.1f" cy="%.1f" r="2" fill="%s"/>`+"\n", px, py, color)
				}
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
			}
			if len(pts) > 1 {
				fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", color, strings.Join(pts, " "))
			}
		}
	}
	// The legend, under the axis label; a long one is cut with a count.
	for si, s := range p.series {
		if si == maxLegend {
			fmt.Fprintf(w, `<text x="%d" y="%d" fill="#555555">and %d more</text>`+"\n",
				left+(si%2)*(plotW/2), top+plotH+42+(si/2)*legendLine, len(p.series)-maxLegend)
			break
		}
		lx, ly := left+(si%2)*(plotW/2), top+plotH+42+(si/2)*legendLine
		fmt.Fprintf(w, `<rect x="%d" y="%d" width="10" height="3" fill="%s"/>`+"\n", lx, ly-4, palette[si%len(palette)])
		fmt.Fprintf(w, `<text x="%d" y="%d">%s</text>`+"\n", lx+14, ly, esc(s.name+" "+s.span(p.unit)))
	}
	fmt.Fprintf(w, "</g>\n")
}

// span is a line's first and last values, "60 → 61 MiB": growth reads
// there even where lines of several replicas lie on one another.
func (s series) span(unit func(float64) string) string {
	var read []float64
	for _, v := range s.values {
		if v != seriesUnread {
			read = append(read, v)
		}
	}
	if len(read) == 0 {
		return "(not read)"
	}
	return unit(math.Round(read[0]*10)/10) + " → " + unit(math.Round(read[len(read)-1]*10)/10)
}

func (p panel) max() float64 {
	m := 0.0
	for _, s := range p.series {
		for _, v := range s.values {
			m = max(m, v)
		}
	}
	return m
}

// segments splits a line at the minutes it has no value for.
func segments(values []float64) [][]int {
	var out [][]int
	var run []int
	for i, v := range values {
		if v == seriesUnread {
			if len(run) > 0 {
				out = append(out, run)
			}
			run = nil
			continue
		}
		run = append(run, i)
	}
	if len(run) > 0 {
		out = append(out, run)
	}
	return out
}

func xAt(left, plotW, n, i int) float64 {
	if n <= 1 {
		return float64(left) + float64(plotW)/2
	}
	return float64(left) + float64(plotW)*float64(i)/float64(n-1)
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten, so the axis
// reads in round numbers; an empty panel still has an axis.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func count(v float64) string { return fmt.Sprintf("%g", v) }

func millis(v float64) string { return fmt.Sprintf("%g ms", v) }

func mebibytes(v float64) string { return fmt.Sprintf("%g MiB", v) }

// esc escapes text for an SVG text node or attribute.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}
