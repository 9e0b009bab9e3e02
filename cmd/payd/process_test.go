package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
)

// The crash and replica tests run payd as separate OS processes, built from
// this package by `go build`: only a real process can be killed with
// SIGKILL mid-payment, restarted on the same database, or run three times
// side by side.

// paydBinary is the payd executable, built once per test binary.
var paydBinary struct {
	once sync.Once
	dir  string // removed by TestMain
	path string
	err  error
	skip string
}

// TestMain removes the payd binaries the tests built, if any.
func TestMain(m *testing.M) {
	code := m.Run()
	if paydBinary.dir != "" {
		_ = os.RemoveAll(paydBinary.dir)
	}
	if shippedBinary.path != "" {
		_ = os.RemoveAll(filepath.Dir(shippedBinary.path))
	}
	os.Exit(code)
}

// paydExecutable builds payd on first use and returns its path. It skips the
// test only when no go command exists to build with.
func paydExecutable(t *testing.T) string {
	t.Helper()
	paydBinary.once.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			paydBinary.skip = "the go command is not available to build payd: " + err.Error()
			return
		}
		if paydBinary.dir, paydBinary.err = os.MkdirTemp("", "payd-bin-"); paydBinary.err != nil {
			return
		}
		paydBinary.path = filepath.Join(paydBinary.dir, "payd")
		// paydfault: the crash tests kill payd at a payment step (PAYD_TEST_FAULT).
		out, err := exec.Command(goTool, "build", "-tags", "paydfault", "-o", paydBinary.path, ".").CombinedOutput()
		if err != nil {
			paydBinary.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if paydBinary.skip != "" {
		t.Skip(paydBinary.skip)
	}
	if paydBinary.err != nil {
		t.Fatalf("build payd: %v", paydBinary.err)
	}
	return paydBinary.path
}

// paydProc is one payd process (`payd serve`).
type paydProc struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	base   string
	logs   *syncBuffer // stderr: the JSON log
	exited chan struct{}
	state  *os.ProcessState // set before exited closes
	client *http.Client
}

// startPaydProc runs payd with the PAYD_* settings e (and none inherited
// from the test's environment), waits until it listens and stops it when
// the test ends.
func startPaydProc(t *testing.T, name string, e env) *paydProc {
	t.Helper()
	p, err := launchPaydProc(t, paydExecutable(t), name, e)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// launchPaydProc is startPaydProc reporting failure instead of ending the
// test, so several replicas can start at once from goroutines.
func launchPaydProc(t *testing.T, exe, name string, e env) (*paydProc, error) {
	p := &paydProc{t: t, name: name, logs: &syncBuffer{}, exited: make(chan struct{}),
		client: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	listening := &listenWatch{found: make(chan string, 1)}
	p.cmd = exec.Command(exe, "serve")
	p.cmd.Dir = t.TempDir() // a stray default sqlite file lands here, not in the source tree
	p.cmd.Env = childEnv(e)
	p.cmd.Stdout, p.cmd.Stderr = listening, p.logs
	dieWithParent(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.state = p.cmd.ProcessState
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s log:\n%s", name, tail(p.logs.String(), 40))
		}
	})
	select {
	case p.base = <-listening.found:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("%s exited before listening (%v):\n%s", name, p.state, p.logs.String())
	case <-time.After(2 * time.Minute):
		return nil, fmt.Errorf("%s did not listen within 2 minutes:\n%s", name, p.logs.String())
	}
}

// childEnv is the test's environment without any PAYD_* setting, plus e.
func childEnv(e env) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PAYD_") {
			out = append(out, kv)
		}
	}
	for k, v := range e {
		out = append(out, k+"="+v)
	}
	return out
}

// stop ends the process gracefully (SIGTERM), as an operator would, and
// expects a clean exit; one that hangs is killed.
func (p *paydProc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if !p.state.Success() {
			p.t.Errorf("%s exited with %v after SIGTERM, want a clean exit", p.name, p.state)
		}
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		p.t.Errorf("%s did not stop within 30s of SIGTERM", p.name)
	}
}

// waitKilled waits for the process to die and checks that SIGKILL ended it
// (the fault injector), not a crash of its own.
func (p *paydProc) waitKilled() {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("%s still runs 30s after its fault should have killed it", p.name)
	}
	ws, ok := p.state.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		p.t.Fatalf("%s ended with %v, want killed by SIGKILL:\n%s", p.name, p.state, tail(p.logs.String(), 40))
	}
}

// send makes one call; an error means no answer came (the process died).
func (p *paydProc) send(r request) (reply, error) {
	var body io.Reader
	if r.body != nil {
		j, err := json.Marshal(r.body)
		if err != nil {
			return reply{}, err
		}
		body = bytes.NewReader(j)
	}
	req, err := http.NewRequest(r.method, p.base+r.path, body)
	if err != nil {
		return reply{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	if r.key != "" {
		req.Header.Set("Idempotency-Key", r.key)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		checkContract(p.t, req, resp.StatusCode, resp.Header, b)
	}
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// do makes one call that must be answered.
func (p *paydProc) do(r request) reply {
	p.t.Helper()
	rep, err := p.send(r)
	if err != nil {
		p.t.Fatalf("%s %s on %s: %v", r.method, r.path, p.name, err)
	}
	return rep
}

// register creates a customer and returns its ID and token.
func (p *paydProc) register() (string, string) {
	p.t.Helper()
	email := uuid.NewString() + "@example.com"
	r := p.do(request{method: "POST", path: "/v1/customers", key: uuid.NewString(), body: map[string]string{"email": email, "name": "Crash Test"}})
	if r.Status != http.StatusCreated {
		p.t.Fatalf("register(%s) = %d %s, want 201", email, r.Status, r.Body)
	}
	m := r.json(p.t)
	return m["customer"].(map[string]any)["id"].(string), m["token"].(string)
}

// order creates a USD order of amount and returns its ID.
func (p *paydProc) order(token, amount string) string {
	p.t.Helper()
	r := p.do(request{method: "POST", path: "/v1/orders", token: token, body: map[string]any{
		"currency": "USD", "items": []map[string]any{{"sku": "sku-1", "name": "Thing", "quantity": 1, "unit_price": amount}},
	}})
	if r.Status != http.StatusCreated {
		p.t.Fatalf("create order = %d %s, want 201", r.Status, r.Body)
	}
	return r.json(p.t)["id"].(string)
}

// pay sends one pay request; an error means the connection died.
func (p *paydProc) pay(token, orderID, key, method string) (reply, error) {
	return p.send(request{method: "POST", path: "/v1/orders/" + orderID + "/pay", token: token, key: key,
		body: map[string]string{"payment_method": method}})
}

// jobRows sums the rows the named background job reported handling in this
// process's log ("background job done" lines).
func (p *paydProc) jobRows(job string) int64 {
	p.t.Helper()
	var n int64
	for line := range strings.SplitSeq(p.logs.String(), "\n") {
		var l struct {
			Msg  string `json:"msg"`
			Job  string `json:"job"`
			Rows int64  `json:"rows"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "background job done" && l.Job == job {
			n += l.Rows
		}
	}
	return n
}

// listenWatch is payd's stdout: it reports the address of the
// "payd listening on http://..." line and drops the rest.
type listenWatch struct {
	mu    sync.Mutex
	buf   []byte
	done  bool
	found chan string
}

func (w *listenWatch) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(b), nil
	}
	w.buf = append(w.buf, b...)
	for {
		line, rest, ok := bytes.Cut(w.buf, []byte("\n"))
		if !ok {
			return len(b), nil
		}
		w.buf = rest
		if addr, ok := strings.CutPrefix(string(line), "payd listening on "); ok {
			w.done, w.buf = true, nil
			w.found <- addr
			return len(b), nil
		}
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
