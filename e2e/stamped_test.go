package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/internal/otlptest"
	"github.com/payd/payd/internal/testdeps"
	"github.com/payd/payd/migrations"
)

// dockerLdflags is the -ldflags="..." of the Dockerfile's go build, its
// build arguments replaced by args.
func dockerLdflags(t *testing.T, args map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`-ldflags="([^"]*)"`).FindSubmatch(b)
	if m == nil {
		t.Fatal(`the Dockerfile's go build has no -ldflags="..."`)
	}
	flags := string(m[1])
	for k, v := range args {
		if !strings.Contains(flags, "${"+k+"}") {
			t.Fatalf("the Dockerfile's -ldflags %q do not use ${%s}", flags, k)
		}
		flags = strings.ReplaceAll(flags, "${"+k+"}", v)
	}
	return flags
}

// TestStampedBuild builds payd as the Dockerfile does, with its VERSION
// and REVISION build arguments set: `payd version`, payd_build_info and
// the traces' service.version show them. (A -X naming a variable that does not exist is ignored by
// the linker, so only a build shows the flags work.) The same binary's
// healthcheck exits 0 and 1 as `payd help healthcheck` says, and its
// traces carry the version as service.version.
func TestStampedBuild(t *testing.T) {
	testdeps.RequireFull(t, "builds payd with -trimpath, which compiles every package anew")
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not available to build payd: " + err.Error())
	}
	const version, revision = "v9.8.7-stamped", "0123456789abcdef0123456789abcdef01234567"
	ldflags := dockerLdflags(t, map[string]string{"VERSION": version, "REVISION": revision})
	exe := filepath.Join(t.TempDir(), "payd")
	if out, err := exec.Command(goTool, "build", "-trimpath", "-ldflags="+ldflags, "-o", exe, "../cmd/payd").CombinedOutput(); err != nil {
		t.Fatalf("go build -ldflags=%q: %v\n%s", ldflags, err, out)
	}

	out, err := exec.Command(exe, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "payd "+version+"\n") || !strings.Contains(string(out), "revision  "+revision+"\n") {
		t.Errorf("payd version = %v\n%s\nwant payd %s and revision %s", err, out, version, revision)
	}

	prov := startProcProvider(t, "")
	rcv := otlptest.NewGRPC(t)
	traced := env{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint, "OTEL_SERVICE_NAME": "", "OTEL_RESOURCE_ATTRIBUTES": ""}
	p, err := launchPaydProc(t, exe, "payd-stamped", paydEnv(dbtest.NewURL(t, migrations.Dialect("sqlite")), prov.url, traced))
	if err != nil {
		t.Fatal(err)
	}
	fams := scrapeFamilies(t, p.base+"/metrics")
	if v, ok := sample(fams, "payd_build_info", map[string]string{"version": version, "revision": revision}); !ok || v != 1 {
		t.Errorf("payd_build_info{version=%q,revision=%q} = %v (found %v), want 1; series: %v", version, revision, v, ok, fams["payd_build_info"])
	}
	p.register(newEmail())
	if sp, ok := rcv.WaitFor(30*time.Second, func(s otlptest.Span) bool { return s.Resource["service.version"] != "" }); !ok || sp.Resource["service.version"] != version {
		t.Errorf("traces' resource service.version = %q (a span received: %v), want %q", sp.Resource["service.version"], ok, version)
	}

	addr := strings.TrimPrefix(p.base, "http://")
	tests := []struct {
		args   []string
		addr   string // PAYD_ADDR
		exit   int
		stderr string
	}{
		{[]string{"healthcheck"}, addr, 0, ""},
		{[]string{"healthcheck", "-url", p.base + "/readyz"}, "", 0, ""},
		{[]string{"healthcheck", "-url", p.base + "/no-such-path"}, "", 1, "payd: unhealthy: GET " + p.base + "/no-such-path: 404 Not Found"},
		{[]string{"healthcheck", "-bogus"}, "", 1, "flag provided but not defined: -bogus"},
	}
	for _, tt := range tests {
		cmd := exec.Command(exe, tt.args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "PAYD_ADDR=" + tt.addr}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		_ = cmd.Run()
		name := "PAYD_ADDR=" + tt.addr + " payd " + strings.Join(tt.args, " ")
		if got := cmd.ProcessState.ExitCode(); got != tt.exit {
			t.Errorf("%s exited %d, want %d\n%s", name, got, tt.exit, stderr.String())
		}
		if tt.exit == 1 && strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%s printed %q, want one line", name, stderr.String())
		}
		if !strings.Contains(stderr.String(), tt.stderr) {
			t.Errorf("%s printed %q, want %q", name, stderr.String(), tt.stderr)
		}
	}

}
