package metricsread

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const sample = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 17
# TYPE go_sql_open_connections gauge
go_sql_open_connections{db_name="read"} 4
go_sql_open_connections{db_name="write"} 1
# TYPE go_sql_wait_count_total counter
go_sql_wait_count_total{db_name="write"} 1234
payd_untyped 2.5
`

func TestParse(t *testing.T) {
	fams, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := fams.Value("go_goroutines"); !ok || v != 17 {
		t.Errorf("go_goroutines = %v, %v; want 17", v, ok)
	}
	if v, ok := fams.Value("payd_untyped"); !ok || v != 2.5 {
		t.Errorf("payd_untyped = %v, %v; want 2.5", v, ok)
	}
	if _, ok := fams.Value("missing"); ok {
		t.Error("a missing family reads as present")
	}
	open := fams.ByLabel("go_sql_open_connections", "db_name")
	if len(open) != 2 || open["read"] != 4 || open["write"] != 1 {
		t.Errorf("open connections by db_name = %v", open)
	}
	if w := fams.ByLabel("go_sql_wait_count_total", "db_name"); w["write"] != 1234 {
		t.Errorf("a counter by label = %v, want write 1234", w)
	}
}

func TestParseRefusesGarbage(t *testing.T) {
	if _, err := Parse(strings.NewReader("go_goroutines{ 17\n")); err == nil {
		t.Error("Parse of a broken line = nil error")
	}
}

func TestFetch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(sample))
	}))
	defer srv.Close()
	fams, err := Fetch(context.Background(), srv.Client(), srv.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := fams.Value("go_goroutines"); v != 17 {
		t.Errorf("go_goroutines = %v", v)
	}
	if _, err := Fetch(context.Background(), srv.Client(), srv.URL+"/nope"); err == nil {
		t.Error("Fetch of a 404 = nil error")
	}
}
