package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// dockerStage is one FROM ... stage of a Dockerfile: its base image and
// its instructions, continuation lines joined.
type dockerStage struct {
	from  string
	lines []string
}

func parseDockerfile(t *testing.T, path string) []dockerStage {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(string(b), " ")
	var stages []dockerStage
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "FROM "); ok {
			stages = append(stages, dockerStage{from: strings.Fields(rest)[0]})
			continue
		}
		if len(stages) == 0 {
			t.Fatalf("%s: %q before the first FROM", path, line)
		}
		stages[len(stages)-1].lines = append(stages[len(stages)-1].lines, line)
	}
	return stages
}

func (s dockerStage) find(instr string) []string {
	var out []string
	for _, l := range s.lines {
		if rest, ok := strings.CutPrefix(l, instr+" "); ok {
			out = append(out, rest)
		}
	}
	return out
}

// TestDockerfileBuildsPayd: the image compose builds compiles ./cmd/payd
// statically with a Go release go.mod accepts, and runs it as a non-root
// user, serving by default on the port compose publishes.
func TestDockerfileBuildsPayd(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"payd", "sandbox"} {
		b := c.Services[name].Build
		if b == nil {
			t.Fatalf("service %s has no build section", name)
		}
		if _, err := os.Stat(filepath.Join(repoRoot, b.Context, b.Dockerfile)); err != nil {
			t.Fatalf("service %s builds from %s/%s: %v", name, b.Context, b.Dockerfile, err)
		}
	}
	stages := parseDockerfile(t, filepath.Join(repoRoot, "Dockerfile"))
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a build stage and a slim final one", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]

	goMod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(goMod)
	if goLine == nil {
		t.Fatal("go.mod has no go line")
	}
	if img := build.from; !strings.HasPrefix(img, "golang:"+string(goLine[1])) {
		t.Errorf("build stage FROM %s, want golang:%s (go.mod's go line)", img, goLine[1])
	}
	var built bool
	for _, run := range build.find("RUN") {
		if strings.Contains(run, "go build") && strings.Contains(run, "./cmd/payd") {
			built = true
			if !strings.Contains(run, "CGO_ENABLED=0") {
				t.Errorf("go build runs without CGO_ENABLED=0: the binary would not be static")
			}
		}
	}
	if !built {
		t.Errorf("no RUN go build ... ./cmd/payd in the build stage")
	}
	user := final.find("USER")
	if len(user) == 0 || regexp.MustCompile(`^(root|0)(:|$)`).MatchString(user[len(user)-1]) {
		t.Errorf("final stage USER = %v, want a non-root user", user)
	}
	entry, cmd := final.find("ENTRYPOINT"), final.find("CMD")
	if len(entry) != 1 || !strings.Contains(entry[0], "payd") || len(cmd) != 1 || !strings.Contains(cmd[0], `"serve"`) {
		t.Errorf("ENTRYPOINT %v CMD %v, want payd with serve by default", entry, cmd)
	}
	_, port := hostPort(t, c.Services["payd"].Environment["PAYD_ADDR"])
	if expose := final.find("EXPOSE"); len(expose) != 1 || expose[0] != port {
		t.Errorf("EXPOSE %v, want %s (PAYD_ADDR in compose)", expose, port)
	}
	ignore, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil || !regexp.MustCompile(`(?m)^\.env$`).Match(ignore) || !regexp.MustCompile(`(?m)^\*\.db$`).Match(ignore) {
		t.Errorf(".dockerignore must keep .env and *.db out of the build context (err %v)", err)
	}
}

// stampVars are the variables the build stamps with -X (internal/version).
var stampVars = []string{"github.com/payd/payd/internal/version.version", "github.com/payd/payd/internal/version.revision"}

// TestDockerfileStampsAndChecks: the build stage takes VERSION and REVISION
// as build arguments with defaults and links them into payd with -X (an
// end-to-end test builds with these very flags); the final stage checks
// payd's health with payd itself, in exec form, since the image has no
// shell; the README's go build line stamps the same variables.
func TestDockerfileStampsAndChecks(t *testing.T) {
	stages := parseDockerfile(t, filepath.Join(repoRoot, "Dockerfile"))
	build, final := stages[0], stages[len(stages)-1]
	args := map[string]string{}
	for _, a := range build.find("ARG") {
		k, v, _ := strings.Cut(a, "=")
		args[k] = v
	}
	if args["VERSION"] == "" || args["REVISION"] == "" {
		t.Errorf("build stage ARGs %v, want VERSION and REVISION with defaults", args)
	}
	var ldflags string
	for _, run := range build.find("RUN") {
		if m := regexp.MustCompile(`-ldflags="([^"]*)"`).FindStringSubmatch(run); m != nil && strings.Contains(run, "go build") {
			ldflags = m[1]
		}
	}
	for i, want := range []string{"-X " + stampVars[0] + "=${VERSION}", "-X " + stampVars[1] + "=${REVISION}"} {
		if !strings.Contains(ldflags, want) {
			t.Errorf("go build -ldflags=%q, want %q (%s)", ldflags, want, stampVars[i])
		}
	}

	entry := final.find("ENTRYPOINT")
	var exe []string
	if len(entry) != 1 || json.Unmarshal([]byte(entry[0]), &exe) != nil || len(exe) == 0 {
		t.Fatalf("ENTRYPOINT %v, want exec form", entry)
	}
	hc := final.find("HEALTHCHECK")
	if len(hc) != 1 {
		t.Fatalf("final stage HEALTHCHECK %v, want one", hc)
	}
	_, cmd, ok := strings.Cut(hc[0], "CMD ")
	var argv []string
	if !ok || json.Unmarshal([]byte(cmd), &argv) != nil || len(argv) < 2 || argv[0] != exe[0] || argv[1] != "healthcheck" {
		t.Errorf("HEALTHCHECK %q, want CMD [%q, \"healthcheck\", ...] in exec form (no shell in the image)", hc[0], exe[0])
	}
	if m := regexp.MustCompile(`--timeout=(\d+)s`).FindStringSubmatch(hc[0]); m == nil || atoi(m[1]) <= 2 {
		t.Errorf("HEALTHCHECK %q, want a --timeout longer than payd healthcheck's own 2s", hc[0])
	}

	readme, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for l := range strings.SplitSeq(string(readme), "\n") {
		if strings.HasPrefix(l, "go build ") && strings.Contains(l, "-ldflags") {
			line = l
		}
	}
	for _, v := range stampVars {
		if !strings.Contains(line, "-X "+v+"=$(git ") {
			t.Errorf("README's go build line %q does not stamp %s from git", line, v)
		}
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
