package client

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestClientIsFresh regenerates the client from the current document into
// a temporary folder, with the command and configuration of the
// //go:generate line, and fails when the result differs from the committed
// client.gen.go: a change to openapi.yaml must come with its client.
func TestClientIsFresh(t *testing.T) {
	src, err := os.ReadFile("generate.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^//go:generate (.+)$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("generate.go has no //go:generate line")
	}
	args := strings.Fields(string(m[1]))
	out := filepath.Join(t.TempDir(), "client.gen.go")
	for i, a := range args {
		if a == "-o" && i+1 < len(args) {
			args[i+1] = out
		}
	}
	cmd := exec.Command(args[0], args[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", m[1], err, stderr.String())
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("client.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("client/client.gen.go is stale: handler/openapi.yaml changed since it was generated; run `go generate ./client` and commit the result")
	}
}
