package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// The markers around the part of docs/performance.md that paydbench
// writes. Everything outside them is kept as it is, so the document's
// hand-written sections survive a regeneration.
const (
	beginGenerated = "<!-- paydbench:begin: written by paydbench -report; edit outside these markers -->"
	endGenerated   = "<!-- paydbench:end -->"
)

// The floor ratios payd must keep on MySQL/MariaDB at 16 clients.
const (
	newPayBar = 0.8
	replayBar = 0.6
)

// writeReport writes the run as Markdown into the file at path, between
// the markers if the file has them, else as a new document. chart is the
// SVG's path, linked relative to the document; empty: no chart.
func (r *report) writeReport(path, chart string) error {
	return writeBetween(path, chart, beginGenerated, endGenerated, r.markdown)
}

// writeBetween writes what markdown makes (given the chart's link, or ""
// without a chart) between the markers begin and end of the document at
// path (spliceBetween).
func writeBetween(path, chart, begin, end string, markdown func(link string) []byte) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	link := ""
	if chart != "" {
		if link, err = relativeLink(path, chart); err != nil {
			return err
		}
	}
	return os.WriteFile(path, spliceBetween(old, begin, end, markdown(link)), 0o644)
}

// relativeLink is chart's path as seen from the directory of doc.
func relativeLink(doc, chart string) (string, error) {
	d, err := filepath.Abs(filepath.Dir(doc))
	if err != nil {
		return "", err
	}
	c, err := filepath.Abs(chart)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(d, c)
	if err != nil {
		return "", err
	}
	return filepath.ToSlash(rel), nil
}

// spliceGenerated puts generated between paydbench -report's markers of
// doc (spliceBetween).
func spliceGenerated(doc, generated []byte) []byte {
	return spliceBetween(doc, beginGenerated, endGenerated, generated)
}

// spliceBetween puts generated between the markers begin and end of doc.
// A doc without them gets them at its end, and an empty one a title
// before them: no hand-written text is lost.
func spliceBetween(doc []byte, begin, end string, generated []byte) []byte {
	block := append(append([]byte(begin+"\n"), generated...), end...)
	i := bytes.Index(doc, []byte(begin))
	j := bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		out := []byte("# payd's performance")
		if len(bytes.TrimSpace(doc)) > 0 {
			out = bytes.TrimRight(doc, "\n")
		}
		out = append(out, "\n\n"...)
		return append(append(out, block...), '\n')
	}
	out := append([]byte{}, doc[:i]...)
	out = append(out, block...)
	return append(out, doc[j+len(end):]...)
}

// markdown is the run's figures: how to reproduce them, the machine, the
// chart, the table and the ratios against the bars payd must keep.
func (r *report) markdown(chart string) []byte {
	var b bytes.Buffer
	b.WriteString("## The latest run\n\n")
	if r.Command != "" {
		fmt.Fprintf(&b, "Reproduce with:\n\n```sh\n%s\n```\n\n", r.Command)
	}
	fmt.Fprintf(&b, "%s", r.title())
	if r.Date != "" {
		fmt.Fprintf(&b, ", on %s", r.Date)
	}
	b.WriteString(".")
	if r.LoadBefore != "" {
		fmt.Fprintf(&b, " Load average %s at the start, %s at the end.", r.LoadBefore, r.LoadAfter)
	}
	b.WriteString(" Figures from a shared machine vary from run to run: compare runs made one after the other.\n\n")
	if chart != "" {
		fmt.Fprintf(&b, "![payd's and the floor's requests per second and p99 latency per phase](%s)\n\n", chart)
		b.WriteString("The chart leaves out registration: one request per client, set-up for the pays.\n\n")
	}
	b.WriteString("| target | phase | req/s | p50 ms | p99 ms | payd CPU ms/req | db CPU ms/req | statements/req |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|\n")
	for _, p := range r.Phases {
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.2f | %.2f | %s | %s | %s |\n", p.Target, p.Name, p.PerSecond, p.P50Ms, p.P99Ms,
			optional(p.CPUMsPerRequest), optional(p.DBCPUMsPerRequest), counter(p, "Questions"))
	}
	b.WriteString("\n")
	if r.Ratios.NewPay != 0 || r.Ratios.Replay != 0 {
		fmt.Fprintf(&b, "payd/floor: new pay **%.2f×** (payd keeps at least %.1f×), replay **%.2f×** (at least %.1f×)",
			r.Ratios.NewPay, newPayBar, r.Ratios.Replay, replayBar)
		if r.Ratios.NewPayBatched != 0 {
			fmt.Fprintf(&b, "; new pay against the batched floor %.2f×", r.Ratios.NewPayBatched)
		}
		b.WriteString(". The bars apply to MySQL/MariaDB at 16 clients.\n\n")
	}
	fmt.Fprintf(&b, "payd's peak RSS: %.1f MiB.", float64(r.PeakRSSBytes)/(1<<20))
	if r.Database != "sqlite" {
		b.WriteString(" Statements per request are the server's global counters (`Questions`): each statement of a multi-statement packet counts, so they are statements, not round trips.")
	}
	b.WriteString("\n")
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\nNote: %s\n", n)
	}
	return b.Bytes()
}

// command is the command line that reproduces a run of args, with the
// database's password left out and a given payd binary built first.
func command(args []string, o options) string {
	out := []string{"go", "run", "./cmd/paydbench"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name := strings.TrimLeft(a, "-")
		value, inline := "", false
		if k, v, ok := strings.Cut(name, "="); ok {
			name, value, inline = k, v, true
		}
		if name == "json" { // the output's format changes no figure
			continue
		}
		if name == "db" || name == "redis" {
			if !inline && i+1 < len(args) {
				i++
				value = args[i]
			}
			out = append(out, "-"+name, withoutPassword(value))
			continue
		}
		out = append(out, a)
	}
	cmd := strings.Join(out, " ")
	if o.payd != "" {
		cmd = "go build -o " + o.payd + " ./cmd/payd && " + cmd
	}
	return cmd
}

// withoutPassword is a database or Redis URL with a password replaced by
// PASSWORD; an empty password, or none, is shown as it is.
func withoutPassword(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if p, ok := u.User.Password(); ok && p != "" {
		u.User = url.UserPassword(u.User.Username(), "PASSWORD")
		return u.String()
	}
	return s
}
