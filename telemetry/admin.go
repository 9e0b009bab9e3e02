package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// AdminConfig configures the listeners only operators reach.
type AdminConfig struct {
	MetricsAddr string // PAYD_METRICS_ADDR: /metrics; empty: none
	PprofAddr   string // PAYD_PPROF_ADDR: /debug/pprof/; empty: none
	// The public listener's timeouts (PAYD_READ_TIMEOUT, ...), which the
	// admin listeners keep too, but for the profiler's write deadline.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
}

// ServeAdmin starts the listeners only operators reach: /metrics on
// cfg.MetricsAddr when set, and the Go profiler (/debug/pprof/) on
// cfg.PprofAddr when set. The same address serves both. The profiler is
// never mounted on the public listener: it reveals the program's insides
// and can keep a CPU busy for as long as a caller asks. The returned
// function stops them.
func ServeAdmin(cfg AdminConfig, m *Metrics, log *slog.Logger) (func(), error) {
	muxes := map[string]*http.ServeMux{}
	mux := func(addr string) *http.ServeMux {
		if muxes[addr] == nil {
			muxes[addr] = http.NewServeMux()
		}
		return muxes[addr]
	}
	if cfg.MetricsAddr != "" {
		mux(cfg.MetricsAddr).Handle("/", m.Handler()) // as before: every path
	}
	if cfg.PprofAddr != "" {
		mountPprof(mux(cfg.PprofAddr))
	}
	var stops []func()
	stopAll := func() {
		for _, stop := range stops {
			stop()
		}
	}
	for addr, h := range muxes {
		stop, err := serveAdminOn(cfg, addr, h, log)
		if err != nil {
			stopAll()
			return nil, &ListenError{Addr: addr, Err: err}
		}
		stops = append(stops, stop)
	}
	return stopAll, nil
}

// ListenError is an admin listener that could not listen on Addr, which
// the caller names by the setting (or settings) that gave it.
type ListenError struct {
	Addr string
	Err  error
}

func (e *ListenError) Error() string { return fmt.Sprintf("listen on %s: %v", e.Addr, e.Err) }
func (e *ListenError) Unwrap() error { return e.Err }

// mountPprof registers net/http/pprof's handlers on mux, without touching
// http.DefaultServeMux.
func mountPprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// serveAdminOn serves h on addr until the returned function stops it. A
// CPU profile or trace runs for as long as its ?seconds= asks, so the
// write deadline does not apply to the profiler's listener.
func serveAdminOn(cfg AdminConfig, addr string, h http.Handler, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: min(10*time.Second, cfg.ReadTimeout),
		ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.WriteTimeout, IdleTimeout: cfg.IdleTimeout}
	if addr == cfg.PprofAddr {
		srv.WriteTimeout = 0
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin listener stopped", "addr", addr, "err", err)
		}
	}()
	msg := "pprof listening"
	if addr == cfg.MetricsAddr {
		msg = "metrics listening"
	}
	log.Info(msg, "addr", ln.Addr().String(), "pprof", addr == cfg.PprofAddr)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
