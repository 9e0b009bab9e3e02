// Command receiver is a shop's end of payd's order events, small enough to
// start from: it verifies each request's Standard Webhooks signature with
// the endpoint's secret, records each event once in its own SQLite table
// (keyed by webhook-id, the same on every retry of one event), prints it
// once, and answers 2xx only after the event is stored. See README.md.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/glebarez/go-sqlite" // the pure-Go SQLite payd uses
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "receiver:", err)
		os.Exit(1)
	}
}

// schema is the receiver's own tables: each event once, and each request
// that arrived (for the curious, and for payd's end-to-end tests).
const schema = `
CREATE TABLE IF NOT EXISTS events (
	webhook_id  TEXT PRIMARY KEY,
	type        TEXT NOT NULL,
	order_id    TEXT NOT NULL,
	body        BLOB NOT NULL,
	received_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS arrivals (
	n           INTEGER PRIMARY KEY AUTOINCREMENT,
	webhook_id  TEXT NOT NULL,
	answered    INTEGER NOT NULL,
	verified    INTEGER NOT NULL,
	at          TEXT NOT NULL
);`

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("receiver", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8090", "listen address (:0 picks a free port)")
	dbPath := fs.String("db", "receiver.db", "the SQLite file events are recorded in")
	failFirst := fs.Int("fail-first", 0, "answer 500 to this many requests first (to watch payd retry)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	secrets := strings.Fields(getenv("RECEIVER_SECRET"))
	if len(secrets) == 0 {
		return errors.New("RECEIVER_SECRET must hold the endpoint's whsec_... secret (several, space-separated, while you rotate)")
	}
	var hooks []*standardwebhooks.Webhook
	for i, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			return fmt.Errorf("RECEIVER_SECRET: secret %d of %d: %w", i+1, len(secrets), err)
		}
		hooks = append(hooks, wh)
	}
	db, err := sql.Open("sqlite", *dbPath+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("create tables: %w", err)
	}
	r := &receiver{db: db, hooks: hooks, out: stdout, log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	r.failLeft.Store(int64(*failFirst))
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// receiver is the one handler: every path is the endpoint.
type receiver struct {
	db       *sql.DB
	hooks    []*standardwebhooks.Webhook
	out      io.Writer
	log      *slog.Logger
	failLeft atomic.Int64
}

// event is what the receiver reads of payd's body.
type event struct {
	ID    string `json:"id"`
	Type  string `json:"type"`
	Order struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Amount string `json:"amount"`
	} `json:"order"`
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	id := req.Header.Get("webhook-id")
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil || req.Method != http.MethodPost {
		http.Error(w, "a POST of an event, please", http.StatusBadRequest)
		return
	}
	verified := r.verify(body, req.Header)
	status := r.handle(req.Context(), id, body, verified)
	if _, err := r.db.ExecContext(req.Context(), `INSERT INTO arrivals (webhook_id, answered, verified, at) VALUES (?, ?, ?, ?)`,
		id, status, verified, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		r.log.Error("record arrival", "err", err)
	}
	w.WriteHeader(status)
}

// verify checks the signature (any one of the header's signatures, by any
// of our secrets) and that the timestamp is recent (5 minutes).
func (r *receiver) verify(body []byte, h http.Header) bool {
	for _, wh := range r.hooks {
		if wh.Verify(body, h) == nil {
			return true
		}
	}
	return false
}

// handle decides the answer: 401 for a bad signature (payd retries, and an
// operator sees it in the delivery log), 500 while told to fail, else the
// event recorded once and 204.
func (r *receiver) handle(ctx context.Context, id string, body []byte, verified bool) int {
	if !verified {
		return http.StatusUnauthorized
	}
	if r.failLeft.Add(-1) >= 0 {
		return http.StatusInternalServerError
	}
	var ev event
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID != id {
		return http.StatusBadRequest
	}
	res, err := r.db.ExecContext(ctx, `INSERT INTO events (webhook_id, type, order_id, body, received_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (webhook_id) DO NOTHING`, id, ev.Type, ev.Order.ID, body, time.Now().UTC().Format(time.RFC3339Nano))
	if err != nil {
		r.log.Error("record event", "err", err)
		return http.StatusServiceUnavailable // payd sends it again
	}
	if n, _ := res.RowsAffected(); n == 1 { // the first time: act on it
		fmt.Fprintf(r.out, "%s %s order %s is %s (%s)\n", id, ev.Type, ev.Order.ID, ev.Order.Status, ev.Order.Amount)
	}
	return http.StatusNoContent // a repeat is answered as the first was
}
