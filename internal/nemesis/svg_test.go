package nemesis

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func soakMinutes(n int) []Minute {
	var ms []Minute
	for i := range n {
		m := Minute{
			Minute: i + 1, Ops: 900 + i, P99: time.Duration(40+i) * time.Millisecond,
			RSS: map[string]int64{}, Goroutines: map[string]int{}, OpenFiles: map[string]int{},
			Pools: map[string]map[string]int{}, InUse: map[string]map[string]int{},
		}
		for _, r := range []string{"payd-1", "payd-2", "payd<3>"} { // a name to escape
			if r == "payd-2" && i == 4 {
				m.Unread = append(m.Unread, r) // killed that minute
				continue
			}
			m.RSS[r], m.Goroutines[r], m.OpenFiles[r] = 60<<20, 120, 30
			m.Pools[r] = map[string]int{"primary": 4, "replica": 2}
		}
		ms = append(ms, m)
	}
	return ms
}

// svgElements parses an SVG and counts its elements by name.
func svgElements(t *testing.T, svg []byte) map[string]int {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(svg))
	counts := map[string]int{}
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not XML: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Space + " " + se.Name.Local
			}
			counts[se.Name.Local]++
		}
	}
	if root != "http://www.w3.org/2000/svg svg" {
		t.Fatalf("root element %q, want svg in the SVG namespace", root)
	}
	return counts
}

func TestWriteSVG(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteSVG(&buf, soakMinutes(30)); err != nil {
		t.Fatal(err)
	}
	counts := svgElements(t, buf.Bytes())
	// ops and p99: a line each; 3 replicas × (RSS, goroutines, open files)
	// with payd-2's broken in two by its unread minute: 12; 6 pools, payd-2's two broken: 8.
	if want := 2 + 12 + 8; counts["polyline"] != want {
		t.Errorf("%d lines, want %d", counts["polyline"], want)
	}
	svg := buf.String()
	for _, want := range []string{"operations per minute", "p99 latency per minute", "resident memory", "goroutines",
		"open files", "pool connections open", "minute", "payd&lt;3&gt;", "payd-1 primary", "100 MiB", "30 minutes"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the chart has no %q", want)
		}
	}
	if strings.Count(svg, "http") != 1 || strings.Contains(svg, "href") { // the namespace only: nothing fetched
		t.Errorf("the chart refers to something outside it")
	}
}

func TestWriteSVGWithoutMinutes(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteSVG(&buf, nil); err != nil {
		t.Fatal(err)
	}
	if counts := svgElements(t, buf.Bytes()); counts["polyline"] != 0 || !strings.Contains(buf.String(), "no samples") {
		t.Fatalf("an empty chart: %v\n%s", counts, buf.String())
	}
}

func TestNiceCeil(t *testing.T) {
	for _, tc := range []struct{ v, want float64 }{{0, 1}, {0.3, 0.5}, {1, 1}, {7, 10}, {12, 20}, {120, 200}, {450, 500}, {61, 100}} {
		if got := niceCeil(tc.v); got != tc.want {
			t.Errorf("niceCeil(%g) = %g, want %g", tc.v, got, tc.want)
		}
	}
}
