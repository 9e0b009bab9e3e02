package client_test

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// readmeProgram is the Go program under "Go client." in the README.
func readmeProgram(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "**Go client.**")
	if !ok {
		t.Fatal("README has no **Go client.** paragraph")
	}
	_, block, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatal("README's Go client paragraph has no ```go block")
	}
	block, _, _ = strings.Cut(block, "```")
	return []byte(block)
}

// funcBody is the source between the braces of the function name in src.
func funcBody(t *testing.T, src []byte, name string) (string, *ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, parser.ParseComments)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, src)
	}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == name && fn.Recv == nil {
			from, to := fset.Position(fn.Body.Lbrace).Offset, fset.Position(fn.Body.Rbrace).Offset
			return string(src[from+1 : to]), f
		}
	}
	t.Fatalf("no func %s in\n%s", name, src)
	return "", nil
}

// usedImports are the paths of f's imports that body refers to.
func usedImports(f *ast.File, body string) []string {
	var out []string
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := filepath.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if strings.Contains(body, name+".") {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// TestReadmeClientProgramIsTheExample: the README's program is Example
// as a main: the same statements and comments, importing what they use
// and nothing else. Example runs against a real payd with its output
// checked, so the README's program does what the README says.
func TestReadmeClientProgramIsTheExample(t *testing.T) {
	prog := readmeProgram(t)
	main, pf := funcBody(t, prog, "main")
	if pf.Name.Name != "main" {
		t.Errorf("README's program is package %s, want main", pf.Name.Name)
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	example, ef := funcBody(t, src, "Example")
	example, _, _ = strings.Cut(example, "\t// Output:")
	if strings.TrimSpace(main) != strings.TrimSpace(example) {
		t.Errorf("README's main differs from Example; README:\n%s\nExample:\n%s", main, example)
	}
	var imports []string
	for _, imp := range pf.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		imports = append(imports, p)
	}
	sort.Strings(imports)
	if got, want := strings.Join(imports, " "), strings.Join(usedImports(ef, example), " "); got != want {
		t.Errorf("README's program imports %s, want what Example uses: %s", got, want)
	}
}

// TestReadmeClientProgramBuildsInAnotherModule builds the README's
// program as a module of its own (go mod init), pointed at this checkout
// with the README's go mod edit step, read from it, and runs it against
// the test's payd, finding the output the README shows.
//
// It runs offline (GOPROXY=off) on the module cache that building and
// testing payd fill, and that cache is all it may need: the README's
// second step, go mod tidy, is checked as text but not run, because tidy
// loads modules no build of payd downloads (the go.mod of every
// requirement of a dependency older than Go 1.17, such as
// go-jsonmerge's go-jsoncommentstrip, and the test imports of
// dependencies), so on a freshly filled cache it fails with "module
// lookup disabled". In its place the module gets payd's own requirements
// and go.sum. That is what tidy selects too: payd's go.mod is tidy and
// is the highest requirement of every module the client needs, so
// minimal version selection picks the same versions; the build is then
// -mod=readonly, which fails if anything is missing rather than fetching it.
func TestReadmeClientProgramBuildsInAnotherModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program: not in -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command: " + err.Error())
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), readmeProgram(t), 0o644); err != nil {
		t.Fatal(err)
	}
	goCmd := func(in string, args ...string) []byte {
		t.Helper()
		cmd := exec.Command(goTool, args...)
		cmd.Dir = in
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
		var out, errs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errs
		if err := cmd.Run(); err != nil {
			t.Fatalf("go %s in %s: %v\n%s%s", strings.Join(args, " "), in, err, out.String(), errs.String())
		}
		return out.Bytes()
	}
	run := func(args ...string) { t.Helper(); goCmd(dir, args...) }

	_, block, ok := strings.Cut(string(raw), "a checkout of payd:\n\n```sh\n")
	block, _, _ = strings.Cut(block, "```")
	steps := strings.Split(strings.TrimSpace(block), "\n")
	if !ok || len(steps) != 2 || !strings.HasPrefix(steps[0], "go mod edit -require=github.com/payd/payd@v0.0.0 -replace=github.com/payd/payd=../payd") ||
		steps[1] != "go mod tidy" {
		t.Fatalf("README's steps for another module are %q, want go mod edit -require -replace=...=../payd, then go mod tidy", steps)
	}
	run("mod", "init", "example.com/shop")
	run(strings.Fields(strings.ReplaceAll(steps[0], "=../payd", "="+root))[1:]...)

	// In place of go mod tidy (see above): payd's requirements and sums.
	var mod struct {
		Require []struct{ Path, Version string }
	}
	if err := json.Unmarshal(goCmd(root, "mod", "edit", "-json"), &mod); err != nil {
		t.Fatal(err)
	}
	edit := []string{"mod", "edit"}
	for _, r := range mod.Require {
		edit = append(edit, "-require="+r.Path+"@"+r.Version)
	}
	run(edit...)
	sums, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sums, 0o644); err != nil {
		t.Fatal(err)
	}
	run("build", "-o", filepath.Join(dir, "shop"), ".")

	out, err := exec.Command(filepath.Join(dir, "shop")).CombinedOutput() // PAYD_URL is TestMain's payd
	if err != nil {
		t.Fatalf("the README's program: %v\n%s", err, out)
	}
	want := "```\n" + string(out) + "```\n\nIt is `Example`"
	if !strings.Contains(string(raw), want) {
		t.Errorf("the README's program printed\n%s\nwhich the README does not show after it", out)
	}
}
