// Package version says which payd this binary is. A release build stamps
// the version and VCS revision at link time:
//
//	go build -ldflags "-X github.com/payd/payd/internal/version.version=v1.4.0 \
//	    -X github.com/payd/payd/internal/version.revision=$(git rev-parse HEAD)" ./cmd/payd
//
// (the Dockerfile does, from its VERSION and REVISION build arguments, since
// the image is built without .git). A build without them falls back to what
// the Go toolchain recorded: the module version and the VCS stamp.
package version

import (
	"runtime"
	"runtime/debug"
)

// Set at link time with -X; empty when the build did not set them. They
// are read only through Read.
var (
	version  string
	revision string
)

// Info is the build of this binary.
type Info struct {
	Version  string // -X version, else the module version, else "(devel)"
	Revision string // -X revision, else the VCS revision Go stamped, else ""
	Modified bool   // the VCS stamp says the tree had uncommitted changes
	Time     string // the commit time of the VCS stamp (RFC 3339), else ""
	Module   string // the main module's path
	Go       string // the Go release it was built with
}

// Read is this binary's build: the values stamped at link time win over
// the toolchain's record, each on its own.
func Read() Info {
	return read(version, revision, debug.ReadBuildInfo)
}

func read(stampedVersion, stampedRevision string, buildInfo func() (*debug.BuildInfo, bool)) Info {
	i := Info{Version: "(devel)", Module: "github.com/payd/payd", Go: runtime.Version()}
	if bi, ok := buildInfo(); ok {
		if bi.Main.Path != "" {
			i.Module = bi.Main.Path
		}
		if bi.Main.Version != "" {
			i.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			i.Go = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Revision = s.Value
			case "vcs.modified":
				i.Modified = s.Value == "true"
			case "vcs.time":
				i.Time = s.Value
			}
		}
	}
	if stampedVersion != "" {
		i.Version = stampedVersion
	}
	if stampedRevision != "" && stampedRevision != i.Revision {
		// The toolchain's modified flag and commit time describe another
		// revision than the stamped one.
		i.Revision, i.Modified, i.Time = stampedRevision, false, ""
	}
	return i
}
