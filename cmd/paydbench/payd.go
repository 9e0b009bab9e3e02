package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// paydPackage is what the benchmark builds and runs.
const paydPackage = "github.com/payd/payd/cmd/payd"

// buildPayd compiles payd into dir and returns the binary's path.
func buildPayd(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "payd")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, paydPackage)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build payd: %w\n%s", err, out)
	}
	return bin, nil
}

// hasFlag reports whether `payd serve` takes -name, from its help.
func hasFlag(ctx context.Context, bin, name string) bool {
	out, _ := exec.CommandContext(ctx, bin, "help", "serve").CombinedOutput()
	return listsFlag(string(out), name)
}

// listsFlag reports whether help text, as the flag package prints it,
// lists -name ("  -name type" or "  -name" alone).
func listsFlag(help, name string) bool {
	for line := range strings.Lines(help) {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "-"+name && strings.HasPrefix(line, "  -") {
			return true
		}
	}
	return false
}

// paydProc is a payd serving as a child process.
type paydProc struct {
	cmd  *exec.Cmd
	URL  string // base URL of its API
	Pid  int
	done chan error
	// busy counts payd's log lines that report SQLite's lock as busy
	// ("database is locked", SQLITE_BUSY): errors that reached a request
	// or a job instead of waiting.
	busy atomic.Int64
}

// startPayd runs `payd serve` on a free loopback port against databaseURL
// and providerURL, with secrets made up for this run, in dir (so nothing it
// writes lands elsewhere), and waits until it listens. Its log is read
// (payd logs at info, as in production) and dropped.
func startPayd(ctx context.Context, bin, dir, databaseURL, providerURL string, extra []string) (*paydProc, error) {
	args := append([]string{"serve", "-env", "development", "-addr", "127.0.0.1:0",
		"-database-url", databaseURL, "-provider-url", providerURL,
		"-admin-token", adminToken, "-secret-key", secretKey,
		"-webhook-secret", "whsec_" + base64.StdEncoding.EncodeToString(randomBytes()),
	}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Stdout, cmd.Env = dir, io.Discard, paydEnv()
	logs, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start payd: %w", err)
	}
	p := &paydProc{cmd: cmd, Pid: cmd.Process.Pid, done: make(chan error, 1)}
	addr := make(chan string, 1)
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		readLog(logs, addr, &p.busy)
	}()
	go func() {
		<-logDone // the whole log is read before Wait closes the pipe
		p.done <- cmd.Wait()
	}()
	select {
	case a := <-addr:
		p.URL = "http://" + a
		return p, nil
	case err := <-p.done:
		return nil, fmt.Errorf("payd exited before listening: %v", err)
	case <-time.After(2 * time.Minute):
	case <-ctx.Done():
	}
	_ = p.Stop() // the error below says more
	return nil, errors.New("payd did not start listening")
}

// paydEnv is the benchmark's environment without payd's own variables, so
// only the flags startPayd passes configure it; and with the rate limit
// off (the callers' and the webhooks'), so that the benchmark measures payd, not its limit on one
// customer's requests (a variable, which a build without the limit
// ignores, where a flag would stop it).
func paydEnv() []string {
	env := []string{"PAYD_RATE_LIMIT=0", "PAYD_WEBHOOK_RATE_LIMIT=0", "PAYD_MERCHANT_KEY=" + merchantKey}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PAYD_") {
			env = append(env, kv)
		}
	}
	return env
}

// readLog sends the address from payd's "payd listening" line to addr and
// counts the lines that report SQLite busy, reading the whole log so payd
// never blocks on writing it.
func readLog(r io.Reader, addr chan<- string, busy *atomic.Int64) {
	br := bufio.NewReaderSize(r, 64<<10)
	listening := false
	for {
		line, err := br.ReadSlice('\n')
		if !listening {
			var l struct{ Msg, Addr string }
			if json.Unmarshal(line, &l) == nil && l.Msg == "payd listening" {
				addr <- l.Addr
				listening = true
			}
		}
		if isBusy(line) {
			busy.Add(1)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// isBusy reports whether a log line tells of SQLite's lock being busy.
func isBusy(line []byte) bool {
	return bytes.Contains(line, []byte("SQLITE_BUSY")) || bytes.Contains(line, []byte("database is locked"))
}

// Stop asks payd to shut down (SIGTERM) and kills it if it has not within
// 30 seconds.
func (p *paydProc) Stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		return err
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		return fmt.Errorf("payd did not stop within 30s: killed (%v)", <-p.done)
	}
}

// secretKey is the PAYD_SECRET_KEY of the payd measured, made up for this
// run: the preload seals its endpoint's secret with it (preloadFor).
var secretKey = randomHex()

// adminToken is the operator token of the payd measured, made up for
// this run: the operators' reads (reads.go) send it.
var adminToken = "adm_" + randomHex()

// merchantKey is the merchant key of the payd measured, made up for this
// run (a variable, as the rate limits are).
var merchantKey = "sk_" + randomHex()

func randomHex() string { return hex.EncodeToString(randomBytes()) }

func randomBytes() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return b
}
