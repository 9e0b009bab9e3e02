package version

import (
	"runtime/debug"
	"testing"
)

// TestReadPrefersStamp: -X values win, each on its own; without them the
// toolchain's record is used, and without that "(devel)" and no revision.
func TestReadPrefersStamp(t *testing.T) {
	recorded := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Path: "github.com/payd/payd", Version: "v0.0.0-20260101-abc"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2026-01-01T00:00:00Z"}}}, true
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	tests := []struct {
		name         string
		version, rev string
		info         func() (*debug.BuildInfo, bool)
		want         Info
	}{
		{"toolchain only", "", "", recorded, Info{Version: "v0.0.0-20260101-abc", Revision: "abc", Modified: true, Time: "2026-01-01T00:00:00Z", Module: "github.com/payd/payd", Go: "go1.99"}},
		{"both stamped", "v1.4.0", "def", recorded, Info{Version: "v1.4.0", Revision: "def", Module: "github.com/payd/payd", Go: "go1.99"}},
		{"same revision stamped", "", "abc", recorded, Info{Version: "v0.0.0-20260101-abc", Revision: "abc", Modified: true, Time: "2026-01-01T00:00:00Z", Module: "github.com/payd/payd", Go: "go1.99"}},
		{"version stamped alone", "v1.4.0", "", recorded, Info{Version: "v1.4.0", Revision: "abc", Modified: true, Time: "2026-01-01T00:00:00Z", Module: "github.com/payd/payd", Go: "go1.99"}},
		{"no record", "", "", none, Info{Version: "(devel)", Module: "github.com/payd/payd"}},
		{"no record, stamped", "dev", "unknown", none, Info{Version: "dev", Revision: "unknown", Module: "github.com/payd/payd"}},
	}
	for _, tt := range tests {
		got := read(tt.version, tt.rev, tt.info)
		if tt.want.Go == "" {
			tt.want.Go = got.Go // runtime.Version()
		}
		if got != tt.want {
			t.Errorf("%s: read(%q, %q) = %+v, want %+v", tt.name, tt.version, tt.rev, got, tt.want)
		}
	}
}
