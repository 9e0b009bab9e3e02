package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"gorm.io/gorm"
)

// Server is one sandbox provider: its HTTP API, its store and its
// background workers (async charge resolution, dispute opening, webhook
// delivery).
type Server struct {
	cfg     Config
	db      *gorm.DB
	log     *slog.Logger
	signer  *standardwebhooks.Webhook // nil when no secret is configured
	handler http.Handler

	mu      sync.Mutex
	stop    context.CancelFunc // non-nil while workers run
	workers sync.WaitGroup
	closed  bool
}

// New opens (and migrates) the sandbox database and returns a server whose
// workers are not yet running: call Start, Serve or Run.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := openDB(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, db: db, log: cfg.Logger.With("component", "sandbox")}
	if cfg.WebhookSecret != "" {
		// Validated in withDefaults.
		s.signer, _ = standardwebhooks.NewWebhook(cfg.WebhookSecret)
	}
	s.handler = s.routes()
	return s, nil
}

// routes lists the whole API in one place.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/charges", s.handleCreateCharge)
	mux.HandleFunc("GET /v1/charges", s.handleListCharges)
	mux.HandleFunc("GET /v1/charges/{key}", s.handleGetCharge)
	mux.HandleFunc("GET /v1/charges/by-id/{id}", s.handleGetChargeByID)
	mux.HandleFunc("POST /v1/captures", s.handleCapture)
	mux.HandleFunc("POST /v1/voids", s.handleVoid)
	mux.HandleFunc("POST /v1/refunds", s.handleCreateRefund)
	mux.HandleFunc("GET /v1/refunds", s.handleListRefunds)
	mux.HandleFunc("GET /v1/disputes", s.handleListDisputes)
	mux.HandleFunc("GET /v1/disputes/{id}", s.handleGetDispute)
	mux.HandleFunc("POST /v1/disputes/{id}/close", s.handleCloseDispute)
	mux.HandleFunc("GET /v1/settlements/{file}", s.handleSettlement)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	return mux
}

// Handler is the sandbox's HTTP API.
func (s *Server) Handler() http.Handler { return s.handler }

// writeError answers with err's status and code, or logs it and answers a
// bare 500 when it is not a deliberate refusal.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		s.log.ErrorContext(r.Context(), "sandbox request failed", "method", r.Method, "route", r.Pattern, "err", err)
		ae = &apiError{status: http.StatusInternalServerError, code: "internal_error", msg: "internal error"}
	}
	writeJSON(w, ae.status, errorJSON{Error: errorBody{Code: ae.code, Message: ae.msg}})
}

// errRunning is Start called while the workers already run.
var errRunning = errors.New("sandbox: workers already running")

// Start runs the background workers until ctx ends or Stop/Close is
// called. Starting twice is an error.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("sandbox: server closed")
	}
	if s.stop != nil {
		return errRunning
	}
	ctx, s.stop = context.WithCancel(ctx)
	s.workers.Go(func() { s.loop(ctx, "resolve pending charges", s.ResolvePending) })
	s.workers.Go(func() { s.loop(ctx, "open disputes", s.OpenDisputes) })
	s.workers.Go(func() { s.loop(ctx, "lapse holds", s.LapseHolds) })
	s.workers.Go(func() { s.loop(ctx, "deliver webhooks", s.DeliverDue) })
	return nil
}

// Stop halts the background workers and waits for them; state stays in the
// database, so a later Start (or another process) carries on where they left.
func (s *Server) Stop() {
	s.mu.Lock()
	stop := s.stop
	s.stop = nil
	s.mu.Unlock()
	if stop != nil {
		stop()
		s.workers.Wait()
	}
}

// Close stops the workers and closes the database.
func (s *Server) Close() error {
	s.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// loop runs pass every PollInterval. A failing pass is logged here, the
// only place that can, and retried on the next tick.
func (s *Server) loop(ctx context.Context, what string, pass func(context.Context) (int, error)) {
	t := time.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	// A pass runs to its end even when Stop is called: the SQLite driver
	// interrupts a query whose context is cancelled from a goroutine of its
	// own that can still be reading the connection when Close frees it.
	// Stop waits for the pass instead, bounded by the pass's own timeouts.
	pctx := context.WithoutCancel(ctx)
	for {
		if _, err := pass(pctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "sandbox worker pass failed", "worker", what, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Serve answers the API on ln and runs the workers (unless already
// started) until ctx ends, then
// lets in-flight requests finish (up to 10s). Call Close afterwards.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// Workers the caller already started stay the caller's to stop.
	switch err := s.Start(ctx); {
	case err == nil:
		defer s.Stop()
	case !errors.Is(err, errRunning):
		return err
	}
	hs := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	err := hs.Serve(ln)
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("sandbox: serve: %w", err)
}

// Run listens on addr (":0" picks a free port; the chosen address is
// logged) and serves until ctx ends. It is what `payd sandbox` runs.
func (s *Server) Run(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("sandbox: listen: %w", err)
	}
	s.log.InfoContext(ctx, "sandbox listening", "addr", ln.Addr().String(), "webhooks", s.cfg.WebhookURL != "")
	return s.Serve(ctx, ln)
}

// now is the server's clock at the precision the store keeps.
func (s *Server) now() time.Time { return at(s.cfg.Clock()).Time }
