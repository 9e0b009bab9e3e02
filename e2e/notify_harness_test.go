package e2e

import (
	"bufio"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/glebarez/go-sqlite" // the receiver's database
)

// The merchant in the notify tests is examples/receiver, run as an OS
// process: what a shop would start from, verifying signatures and
// deduping on webhook-id in its own SQLite file, which the tests read.

// receiverBinary is the receiver, built once per test binary.
var receiverBinary struct {
	once sync.Once
	path string
	err  error
}

func receiverExecutable(t *testing.T) string {
	t.Helper()
	receiverBinary.once.Do(func() {
		dir, err := os.MkdirTemp("", "payd-receiver-")
		if err != nil {
			receiverBinary.err = err
			return
		}
		receiverBinary.path = filepath.Join(dir, "receiver")
		if out, err := exec.Command("go", "build", "-o", receiverBinary.path, "../examples/receiver").CombinedOutput(); err != nil {
			receiverBinary.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if receiverBinary.err != nil {
		t.Fatalf("build the receiver: %v", receiverBinary.err)
	}
	return receiverBinary.path
}

// receiverProc is one running receiver.
type receiverProc struct {
	t   *testing.T
	url string // http://127.0.0.1:port/hooks
	db  *sql.DB
	out *syncBuffer // what it printed: one line per event, once
}

// startReceiver runs the receiver with secrets (RECEIVER_SECRET),
// answering 500 to the first failFirst requests.
func startReceiver(t *testing.T, secrets string, failFirst int) *receiverProc {
	t.Helper()
	dbPath := filepath.Join(t.TempDir(), "receiver.db")
	cmd := exec.Command(receiverExecutable(t), "-addr", "127.0.0.1:0", "-db", dbPath, "-fail-first", fmt.Sprint(failFirst))
	cmd.Env = append(os.Environ(), "RECEIVER_SECRET="+secrets)
	r := &receiverProc{t: t, out: &syncBuffer{}}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("receiver printed:\n%s\nstderr:\n%s", tail(r.out.String(), 20), tail(stderr.String(), 20))
		}
	})
	lines := bufio.NewScanner(stdout)
	found := make(chan string, 1)
	go func() {
		first := true
		for lines.Scan() {
			if addr, ok := strings.CutPrefix(lines.Text(), "listening on "); ok && first {
				first = false
				found <- addr
				continue
			}
			_, _ = r.out.Write([]byte(lines.Text() + "\n"))
		}
	}()
	select {
	case addr := <-found:
		r.url = addr + "/hooks"
	case <-time.After(time.Minute):
		t.Fatalf("the receiver did not listen within a minute:\n%s", stderr.String())
	}
	if r.db, err = sql.Open("sqlite", dbPath+"?_pragma=busy_timeout(5000)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.db.Close() })
	return r
}

// arrival is one request the receiver got, in arrival order.
type arrival struct {
	N         int64
	WebhookID string
	Answered  int
	Verified  bool
}

func (r *receiverProc) arrivals() []arrival {
	r.t.Helper()
	rows, err := r.db.Query(`SELECT n, webhook_id, answered, verified FROM arrivals ORDER BY n`)
	if err != nil {
		r.t.Fatal(err)
	}
	defer rows.Close()
	var out []arrival
	for rows.Next() {
		var a arrival
		if err := rows.Scan(&a.N, &a.WebhookID, &a.Answered, &a.Verified); err != nil {
			r.t.Fatal(err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		r.t.Fatal(err)
	}
	return out
}

// recorded is an event the receiver recorded (once).
type recorded struct {
	WebhookID, Type, OrderID string
}

// events are the events the receiver recorded, by webhook-id.
func (r *receiverProc) events() map[string]recorded {
	r.t.Helper()
	rows, err := r.db.Query(`SELECT webhook_id, type, order_id FROM events`)
	if err != nil {
		r.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]recorded{}
	for rows.Next() {
		var e recorded
		if err := rows.Scan(&e.WebhookID, &e.Type, &e.OrderID); err != nil {
			r.t.Fatal(err)
		}
		out[e.WebhookID] = e
	}
	if err := rows.Err(); err != nil {
		r.t.Fatal(err)
	}
	return out
}

// printed counts the lines the receiver printed for webhook-id id.
func (r *receiverProc) printed(id string) int { return strings.Count(r.out.String(), id+" ") }

// notifySecret is the merchant endpoint's secret in the notify tests.
const notifySecret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oDv2QFTwQHbWc="

// notifyEnv sends every event to r, signed with notifySecret.
func notifyEnv(r *receiverProc) env {
	return env{"PAYD_NOTIFY_URL": r.url, "PAYD_NOTIFY_SECRET": notifySecret}
}

// eventRow is one notify_events row of payd's database.
type eventRow struct {
	ID      string
	OrderID string
	Seq     int64
	Type    string
}
