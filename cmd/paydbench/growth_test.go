package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/payd/payd/internal/preload"
)

// TestSizes: -sizes puts runs on an empty and a preloaded database side by
// side: the table between its own markers (the document's other text and
// paydbench's own section kept, a second run replacing the first table),
// each phase's req/s and p99 per run and the preloaded run's throughput
// over the empty one's; and a chart that is well-formed SVG with a bar per
// run and phase.
func TestSizes(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, r report) string {
		path := filepath.Join(dir, name)
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	phases := func(newPay, p99 float64) []phase {
		return []phase{{Target: "payd", Name: "register", PerSecond: 10}, {Target: "payd", Name: "new pay", PerSecond: newPay, P99Ms: p99},
			{Target: "payd", Name: "replay", PerSecond: 4 * newPay, P99Ms: 2}, {Target: "floor", Name: "new pay", PerSecond: 1000},
			{Target: "payd", Name: readPrefix + "order timeline", PerSecond: 300, P99Ms: p99 / 2},
			{Target: "payd", Name: readPrefix + "stats", Requests: 8, PerSecond: 50, P99Ms: 12}}
	}
	empty := write("empty.json", report{Database: "mysql", Phases: phases(800, 20)})
	grown := phases(720, 30)
	grown[len(grown)-1] = phase{Target: "payd", Name: readPrefix + "stats", Requests: 8, PerSecond: 0.1, P99Ms: 30000, Failed: 2, FirstError: "status 503"}
	big := write("1m.json", report{Database: "mysql", Phases: grown, Preload: &preload.Stats{Orders: 1_000_000, Rows: 5_400_000, Bytes: 3 << 30}})
	doc := filepath.Join(dir, "performance.md")
	if err := os.WriteFile(doc, []byte("# payd's performance\n\nBy hand.\n\n"+beginGenerated+"\nrun\n"+endGenerated+"\n\nMore by hand.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	svg := filepath.Join(dir, "growth.svg")
	for range 2 {
		var out, errs bytes.Buffer
		if err := run(context.Background(), []string{"-sizes", empty + "," + big, "-report", doc, "-chart", svg}, &out, &errs); err != nil {
			t.Fatalf("run = %v\n%s", err, errs.String())
		}
	}
	got, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(got)
	for _, want := range []string{"By hand.", "More by hand.", beginGenerated + "\nrun\n" + endGenerated,
		"| new pay | 800 | 20.0 | 720 | 30.0 | 0.90× |", "| replay | 3200 | 2.0 | 2880 | 2.0 | 0.90× |",
		"| read: order timeline | 300 | 10.0 | 300 | 15.0 | 1.00× |", "| read: stats | 50 | 12.0 | 0 | 30000.0 (2 of 8 failed) | 0.00× |",
		"1M orders", "(growth.svg)"} {
		if !strings.Contains(text, want) {
			t.Errorf("the document lacks %q:\n%s", want, text)
		}
	}
	if strings.Count(text, beginGrowth) != 1 || strings.Contains(text, "| register |") {
		t.Errorf("the table is in the document %d times (or lists registration):\n%s", strings.Count(text, beginGrowth), text)
	}
	chart, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(chart))
	bars := 0
	for {
		tok, err := d.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("the chart is not well-formed XML: %v", err)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			for _, a := range se.Attr {
				if a.Name.Local == "fill" && (a.Value == growthColours[0] || a.Value == growthColours[1]) {
					bars++
				}
			}
		}
	}
	// Two runs: the pays panel (new pay, replay) and the p99 panel (the
	// same two and the two reads), a bar each, plus the legend's two keys.
	if want := 2*2 + 2*4 + 2; bars != want {
		t.Errorf("the chart has %d bars and keys, want %d", bars, want)
	}
	if err := run(context.Background(), []string{"-sizes", empty}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Error("-sizes with one run was taken")
	}
}
