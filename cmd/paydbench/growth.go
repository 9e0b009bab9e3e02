package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
)

// As the data grows: -sizes takes several runs' -json outputs, one build
// on databases of different sizes (an empty one, -preload 1000000, ...),
// and writes them side by side: a Markdown table between their own
// markers in -report's document, and a chart (-chart) of the pays'
// throughput and every measured p99 against the orders preloaded.
//
//	go run ./cmd/paydbench -sizes empty.json,1m.json,10m.json -report docs/performance.md -chart docs/performance-growth.svg

// The markers around the table of sizes in docs/performance.md.
const (
	beginGrowth = "<!-- paydbench:sizes:begin: written by paydbench -sizes; edit outside these markers -->"
	endGrowth   = "<!-- paydbench:sizes:end -->"
)

// sizes is one build's runs, smallest database first.
type sizes []*report

// readSizes reads the comma-separated -json outputs of paths.
func readSizes(paths string) (sizes, error) {
	var g sizes
	for _, p := range strings.Split(paths, ",") {
		r, err := readReport(strings.TrimSpace(p))
		if err != nil {
			return nil, err
		}
		g = append(g, r)
	}
	if len(g) < 2 {
		return nil, errors.New("-sizes needs at least two runs to compare")
	}
	return g, nil
}

// orders is the run's database size in words: its preload.
func orders(r *report) string {
	if r.Preload == nil || r.Preload.Orders == 0 {
		return "empty"
	}
	switch n := r.Preload.Orders; {
	case n%1_000_000 == 0:
		return fmt.Sprintf("%dM orders", n/1_000_000)
	case n%1_000 == 0:
		return fmt.Sprintf("%dk orders", n/1_000)
	default:
		return fmt.Sprintf("%d orders", n)
	}
}

// phases are the payd phases every run has, in the first run's order:
// the pays, then the operators' reads.
func (g sizes) phases() []string {
	var names []string
	for _, p := range g[0].Phases {
		if p.Target != "payd" || p.Name == "register" {
			continue
		}
		all := true
		for _, r := range g[1:] {
			if _, ok := r.find("payd", p.Name); !ok {
				all = false
			}
		}
		if all {
			names = append(names, p.Name)
		}
	}
	return names
}

// markdown is the sizes table: per phase, each run's req/s and p99, and
// for the pays each run's throughput over the first run's.
func (g sizes) markdown(chart string) []byte {
	var b bytes.Buffer
	b.WriteString("### Side by side, as generated\n\n")
	for i, r := range g {
		fmt.Fprintf(&b, "- %s: ", orders(r))
		if r.Command != "" {
			fmt.Fprintf(&b, "`%s`", r.Command)
		}
		if r.Date != "" {
			fmt.Fprintf(&b, " on %s", r.Date)
		}
		if r.LoadBefore != "" {
			fmt.Fprintf(&b, ", load average %s at the start", r.LoadBefore)
		}
		if p := r.Preload; p != nil {
			fmt.Fprintf(&b, "; preloaded: %s", p.Words())
		}
		b.WriteString(map[bool]string{true: ".\n", false: ";\n"}[i == len(g)-1])
	}
	b.WriteString("\n")
	if chart != "" {
		fmt.Fprintf(&b, "![payd's pays per second and p99 of every phase, on an empty database and preloaded ones](%s)\n\n", chart)
	}
	b.WriteString("| phase |")
	for _, r := range g {
		fmt.Fprintf(&b, " %s req/s | p99 ms |", orders(r))
	}
	b.WriteString(" against empty |\n|---|")
	for range g {
		b.WriteString("--:|--:|")
	}
	b.WriteString("---|\n")
	for _, name := range g.phases() {
		fmt.Fprintf(&b, "| %s |", name)
		var ratios []string
		first, _ := g[0].find("payd", name)
		for i, r := range g {
			p, _ := r.find("payd", name)
			failed := ""
			if p.Failed > 0 {
				failed = fmt.Sprintf(" (%d of %d failed)", p.Failed, p.Requests)
			}
			fmt.Fprintf(&b, " %.0f | %.1f%s |", p.PerSecond, p.P99Ms, failed)
			if i > 0 && first.PerSecond > 0 {
				ratios = append(ratios, fmt.Sprintf("%.2f×", p.PerSecond/first.PerSecond))
			}
		}
		fmt.Fprintf(&b, " %s |\n", strings.Join(ratios, ", "))
	}
	b.WriteString("\n\"against empty\" is each preloaded run's requests per second over the empty run's. ")
	fmt.Fprintf(&b, "The operators' reads run at %d at once, %s.\n", readClients, "each alone after the pays")
	return b.Bytes()
}

// writeGrowth writes the table into the document at path, between its
// own markers (added at its end when it has none).
func (g sizes) writeGrowth(path, chart string) error {
	return writeBetween(path, chart, beginGrowth, endGrowth, g.markdown)
}

// growthColours tell the runs apart, smallest database first.
var growthColours = []string{"#a3acb7", "#2f6fb0", "#173c66", "#6b2f8f", "#2f8f5b"}

// Geometry of the sizes chart.
const (
	growthWidth   = 1400
	growthPlotTop = 100
)

// writeChart draws two panels of grouped bars, a bar per run: the pays'
// requests per second, and the p99 of every phase.
func (g sizes) writeChart(w io.Writer) error {
	names := g.phases()
	var pays []string
	for _, n := range names {
		if n == "new pay" || n == "replay" {
			pays = append(pays, n)
		}
	}
	height := growthPlotTop + panelHeight + panelGap + panelHeight + 150
	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">
`, growthWidth, height, growthWidth, height)
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", growthWidth, height)
	text(&b, growthWidth/2, 28, "middle", `font-size="17" font-weight="bold"`, "payd as the data grows")
	text(&b, growthWidth/2, 50, "middle", `fill="#444444"`, g[0].title())
	x := growthWidth - 120*len(g) - 30
	for i, r := range g {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`+"\n", x, growthPlotTop-34, growthColours[i%len(growthColours)])
		text(&b, x+18, growthPlotTop-24, "start", "", orders(r))
		x += 120
	}
	top := float64(growthPlotTop)
	g.panel(&b, pays, top, 400, "pays per second (higher is better)", func(p phase) float64 { return p.PerSecond }, "%.0f", false)
	top += panelHeight + panelGap
	g.panel(&b, names, top, growthWidth-30, "p99 latency, ms, on a log scale (lower is better; the line is the operators' 50 ms)", func(p phase) float64 { return p.P99Ms }, "%.0f", true)
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// panel draws value of each phase in names as a group of bars, one per
// run, between plotLeft and right; slanted (the latencies: many narrow
// groups) writes the phases' names at an angle and the values on a log
// scale.
func (g sizes) panel(b *bytes.Buffer, names []string, top float64, right int, label string, value func(phase) float64, format string, slanted bool) {
	bottom := top + panelHeight
	top0 := 0.0
	for _, n := range names {
		for _, r := range g {
			p, _ := r.find("payd", n)
			top0 = math.Max(top0, value(p))
		}
	}
	text(b, plotLeft, int(top)-14, "start", `font-size="14" font-weight="bold"`, label)
	var y func(float64) float64
	if slanted {
		// Latencies span milliseconds to tens of seconds: decades, from
		// 1 ms, with the operators' 50 ms target drawn across.
		decades := math.Max(1, math.Ceil(math.Log10(math.Max(top0, 10))))
		y = func(v float64) float64 { return bottom - math.Log10(math.Max(v, 1))/decades*panelHeight }
		for d := 0.0; d <= decades; d++ {
			v := math.Pow(10, d)
			fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e3e6ea"/>`+"\n", plotLeft, y(v), right, y(v))
			text(b, plotLeft-8, int(math.Round(y(v)))+4, "end", `fill="#444444"`, fmt.Sprintf("%.0f", v))
		}
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#c0392b" stroke-dasharray="6 4"/>`+"\n", plotLeft, y(50), right, y(50))
	} else {
		y = linearGrid(b, top0, bottom, right)
	}
	axes(b, top, bottom, right)
	if len(names) == 0 {
		return
	}
	groupWidth := float64(right-plotLeft) / float64(len(names))
	barWidth := groupWidth * (1 - 2*groupPadding) / float64(len(g))
	for i, n := range names {
		x0 := float64(plotLeft) + float64(i)*groupWidth + groupWidth*groupPadding
		for j, r := range g {
			p, _ := r.find("payd", n)
			v := value(p)
			x := x0 + float64(j)*barWidth
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s</title></rect>`+"\n",
				x, y(v), barWidth-1, bottom-y(v), growthColours[j%len(growthColours)], escape(fmt.Sprintf("%s, %s: "+format, orders(r), n, v)))
			if !slanted {
				text(b, int(math.Round(x+barWidth/2)), int(math.Round(y(v)))-5, "middle", "", fmt.Sprintf(format, v))
			}
		}
		cx := int(math.Round(float64(plotLeft) + (float64(i)+0.5)*groupWidth))
		name := strings.TrimPrefix(n, readPrefix)
		if slanted {
			fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end" font-size="11" transform="rotate(-35 %d %d)">%s</text>`+"\n",
				cx, int(bottom)+14, cx, int(bottom)+14, escape(name))
		} else {
			text(b, cx, int(bottom)+20, "middle", `font-size="13"`, name)
		}
	}
}
