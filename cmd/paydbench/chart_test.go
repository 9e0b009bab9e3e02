package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sampleReport is a MySQL run's figures, as -json prints them.
func sampleReport() *report {
	cpu := 0.65
	return &report{
		Database: "mysql", Clients: 16, Requests: 2000, CPUs: 2, GoVersion: "go1.test",
		Command: "go run ./cmd/paydbench -db mysql://root:@127.0.0.1:3306/test -report docs/performance.md",
		Phases: []phase{
			{Target: "payd", Name: "register", Requests: 16, PerSecond: 55, P50Ms: 200, P99Ms: 290},
			{Target: "payd", Name: "create order", Requests: 6000, PerSecond: 1834, P50Ms: 7.5, P99Ms: 21.25},
			{Target: "payd", Name: "new pay", Requests: 2000, PerSecond: 936, P50Ms: 15, P99Ms: 32.5, CPUMsPerRequest: &cpu},
			{Target: "payd", Name: "replay", Requests: 2000, PerSecond: 4210, P50Ms: 3.25, P99Ms: 9.75},
			{Target: "floor", Name: "new pay", Requests: 2000, PerSecond: 1155, P50Ms: 12, P99Ms: 27.5},
			{Target: "floor", Name: "replay", Requests: 2000, PerSecond: 6012, P50Ms: 2.5, P99Ms: 6.5},
			{Target: "floor", Name: "new pay, batched", Requests: 2000, PerSecond: 1400, P50Ms: 10, P99Ms: 22.5},
		},
		Ratios: ratios{NewPay: 0.81, Replay: 0.70, NewPayBatched: 0.67},
	}
}

// TestChart: the chart is well-formed XML with an svg root, and shows every
// measured phase but registration, with payd's and the floor's req/s and
// p99 as bars labelled with their values.
func TestChart(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().writeChart(&b); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	texts, rects, root := parseSVG(t, svg)
	if root != "svg" {
		t.Fatalf("root element = %q, want svg", root)
	}
	for _, want := range []string{
		"create order", "new pay", "replay", "new pay, batched", // the phases
		"936", "1155", "4210", "6012", "1400", // req/s
		"32.5", "27.5", "9.8", "6.5", "22.5", // p99 ms
		"payd", "floor (payd's statements, raw SQL)",
		"payd/floor: new pay 0.81×, replay 0.70×; new pay against the batched floor 0.67×",
		"requests per second (higher is better)", "p99 latency, ms (lower is better)",
		"floor only", "payd only", "payd 0.81× the floor", "payd 0.70× the floor",
	} {
		if !texts[want] {
			t.Errorf("no text %q in the chart", want)
		}
	}
	if texts["register"] {
		t.Error("the chart shows registration, which is set-up")
	}
	// Two panels of 2 phases with both targets, 1 with payd only (create
	// order) and 1 with the floor only (batched): 6 bars each, and the
	// legend's 2 keys.
	if bars := rects[paydColour] + rects[floorColour]; bars != 2*6+2 {
		t.Errorf("%d bars and legend keys, want %d", bars, 2*6+2)
	}
	if !strings.Contains(svg, `<title>payd, new pay: 936</title>`) {
		t.Error("payd's new pay bar has no tooltip with its value")
	}
}

// TestChartBarsScale: a bar's height is its value's share of the axis, so
// the floor's bar is the taller one where it is faster.
func TestChartBarsScale(t *testing.T) {
	rep := &report{Database: "sqlite", Phases: []phase{
		{Target: "payd", Name: "new pay", PerSecond: 50, P99Ms: 4},
		{Target: "floor", Name: "new pay", PerSecond: 100, P99Ms: 2},
	}}
	var b bytes.Buffer
	if err := rep.writeChart(&b); err != nil {
		t.Fatal(err)
	}
	heights := map[string][]string{}
	d := xml.NewDecoder(&b)
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" && attr(se, "width") != "12" {
			if f := attr(se, "fill"); f == paydColour || f == floorColour {
				heights[f] = append(heights[f], attr(se, "height"))
			}
		}
	}
	// Axis 0–100 req/s and 0–4 ms over 250 units.
	if got := heights[paydColour]; len(got) != 2 || got[0] != "125.0" || got[1] != "250.0" {
		t.Errorf("payd's bars = %v, want [125.0 250.0]", got)
	}
	if got := heights[floorColour]; len(got) != 2 || got[0] != "250.0" || got[1] != "125.0" {
		t.Errorf("floor's bars = %v, want [250.0 125.0]", got)
	}
}

func TestNiceStep(t *testing.T) {
	for v, want := range map[float64]float64{0: 1, 0.03: 0.05, 1: 1, 1.2: 2, 3: 5, 7: 10, 187: 200, 1202: 2000} {
		if got := niceStep(v); got != want {
			t.Errorf("niceStep(%v) = %v, want %v", v, got, want)
		}
	}
}

// TestReportKeepsHandWrittenText: -report rewrites only what lies between
// its markers, links the chart relative to the document, and writes the
// command that reproduces the run.
func TestReportKeepsHandWrittenText(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "docs", "performance.md")
	if err := os.MkdirAll(filepath.Dir(doc), 0o755); err != nil {
		t.Fatal(err)
	}
	rep := sampleReport()
	if err := rep.writeReport(doc, filepath.Join(dir, "docs", "performance.svg")); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(doc)
	edited := "# Hand title\n\nBefore.\n\n" + string(first[strings.Index(string(first), beginGenerated):]) + "\n## Kept\n\nAfter.\n"
	if err := os.WriteFile(doc, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	rep.Phases[2].PerSecond = 999
	if err := rep.writeReport(doc, filepath.Join(dir, "docs", "performance.svg")); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(doc)
	s := string(got)
	for _, want := range []string{
		"# Hand title\n\nBefore.\n\n" + beginGenerated, endGenerated + "\n\n## Kept\n\nAfter.\n",
		"](performance.svg)", "| payd | new pay | 999 | 15.00 | 32.50 | 0.650 |",
		"```sh\n" + rep.Command + "\n```", "new pay **0.81×**", "replay **0.70×**",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	if strings.Count(s, beginGenerated) != 1 || strings.Contains(s, "| payd | new pay | 936 ") {
		t.Errorf("the generated part was not replaced:\n%s", s)
	}
}

// TestSpliceWithoutMarkers: a document without markers keeps its text and
// gets the generated part at its end; an empty one gets a title.
func TestSpliceWithoutMarkers(t *testing.T) {
	got := string(spliceGenerated([]byte("# Mine\n\nText.\n"), []byte("figures\n")))
	if want := "# Mine\n\nText.\n\n" + beginGenerated + "\nfigures\n" + endGenerated + "\n"; got != want {
		t.Errorf("splice = %q, want %q", got, want)
	}
	if got := string(spliceGenerated(nil, []byte("figures\n"))); !strings.HasPrefix(got, "# payd's performance\n\n"+beginGenerated) {
		t.Errorf("splice into nothing = %q", got)
	}
}

func TestCommand(t *testing.T) {
	for _, tt := range []struct {
		args []string
		o    options
		want string
	}{
		{[]string{"-db", "mysql://root:@127.0.0.1:3306/test", "-c", "16"}, options{},
			"go run ./cmd/paydbench -db mysql://root:@127.0.0.1:3306/test -c 16"},
		{[]string{"-db=mysql://u:secret@db:3306/x", "-report", "docs/performance.md"}, options{payd: "/tmp/payd"},
			"go build -o /tmp/payd ./cmd/payd && go run ./cmd/paydbench -db mysql://u:PASSWORD@db:3306/x -report docs/performance.md"},
	} {
		if got := command(tt.args, tt.o); got != tt.want {
			t.Errorf("command(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

// TestFrom: -from draws the chart and writes the report from an earlier
// run's -json output, without measuring.
func TestFrom(t *testing.T) {
	dir := t.TempDir()
	var js bytes.Buffer
	if err := sampleReport().write(&js, true); err != nil {
		t.Fatal(err)
	}
	from := filepath.Join(dir, "run.json")
	if err := os.WriteFile(from, js.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	chart, doc := filepath.Join(dir, "p.svg"), filepath.Join(dir, "p.md")
	var out, errs bytes.Buffer
	if err := run(t.Context(), []string{"-from", from, "-chart", chart, "-report", doc}, &out, &errs); err != nil {
		t.Fatalf("run = %v\n%s", err, errs.String())
	}
	svg, _ := os.ReadFile(chart)
	if texts, _, _ := parseSVG(t, string(svg)); !texts["936"] {
		t.Error("chart from -from lacks payd's new pays per second")
	}
	md, _ := os.ReadFile(doc)
	if !strings.Contains(string(md), sampleReport().Command) || !strings.Contains(out.String(), "new pay 0.81×") {
		t.Errorf("report = %s\nstdout = %s", md, out.String())
	}
}

// parseSVG decodes svg as XML, failing the test unless it is well-formed,
// and returns its texts, the number of rects of each fill and the root
// element's name.
func parseSVG(t *testing.T, svg string) (texts map[string]bool, rects map[string]int, root string) {
	t.Helper()
	texts, rects = map[string]bool{}, map[string]int{}
	d := xml.NewDecoder(strings.NewReader(svg))
	d.Strict = true
	var inText bool
	depth := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v\n%s", err, svg)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				root = e.Name.Local
				if e.Name.Space != "http://www.w3.org/2000/svg" {
					t.Errorf("root namespace = %q, want SVG's", e.Name.Space)
				}
			}
			depth++
			inText = e.Name.Local == "text"
			if e.Name.Local == "rect" {
				rects[attr(e, "fill")]++
			}
		case xml.EndElement:
			depth--
			inText = false
		case xml.CharData:
			if inText {
				texts[string(e)] = true
			}
		}
	}
	if depth != 0 {
		t.Fatalf("unbalanced elements (depth %d)", depth)
	}
	return texts, rects, root
}

func attr(e xml.StartElement, name string) string {
	for _, a := range e.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}
