package dbtest

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"slices"
	"sync"

	"github.com/payd/payd/repository"
)

// Statements records each statement sent on the pools it opens (Opener),
// below GORM and database/sql, with the arguments of its first sending:
// what a test needs to ask the database how it runs each one (EXPLAIN).
type Statements struct {
	mu    sync.Mutex
	args  map[string][]driver.NamedValue
	order []string
}

// Statement is one statement's text and the arguments it was first sent
// with.
type Statement struct {
	Query string
	Args  []any
}

// Opener is the repository.PoolOpener that records on s.
func (s *Statements) Opener() repository.PoolOpener {
	return func(c driver.Connector, _ repository.Pool) *sql.DB { return sql.OpenDB(recordingConnector{c, s}) }
}

// All returns the statements recorded, each once, in the order first sent.
func (s *Statements) All() []Statement {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Statement, 0, len(s.order))
	for _, q := range s.order {
		st := Statement{Query: q}
		for _, a := range s.args[q] {
			st.Args = append(st.Args, a.Value)
		}
		out = append(out, st)
	}
	return out
}

func (s *Statements) record(query string, args []driver.NamedValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.args == nil {
		s.args = map[string][]driver.NamedValue{}
	}
	if _, ok := s.args[query]; ok {
		return
	}
	s.args[query] = slices.Clone(args)
	s.order = append(s.order, query)
}

type recordingConnector struct {
	driver.Connector
	s *Statements
}

func (c recordingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: conn, s: c.s}, nil
}

// recordingConn passes everything to the driver's connection, recording
// the statements on the way; what the driver does not implement, it
// answers as database/sql's fallbacks expect.
type recordingConn struct {
	driver.Conn
	s *Statements
}

func (c *recordingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.s.record(query, args)
	if e, ok := c.Conn.(driver.ExecerContext); ok {
		return e.ExecContext(ctx, query, args)
	}
	return nil, driver.ErrSkip
}

func (c *recordingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.s.record(query, args)
	if q, ok := c.Conn.(driver.QueryerContext); ok {
		return q.QueryContext(ctx, query, args)
	}
	return nil, driver.ErrSkip
}

func (c *recordingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	var (
		st  driver.Stmt
		err error
	)
	if p, ok := c.Conn.(driver.ConnPrepareContext); ok {
		st, err = p.PrepareContext(ctx, query)
	} else {
		st, err = c.Conn.Prepare(query)
	}
	if err != nil {
		return nil, err
	}
	return &recordingStmt{Stmt: st, query: query, s: c.s}, nil
}

func (c *recordingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if b, ok := c.Conn.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	return c.Conn.Begin() //nolint:staticcheck // the driver has nothing newer
}

func (c *recordingConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *recordingConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *recordingConn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *recordingConn) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := c.Conn.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// recordingStmt records a prepared statement each time it runs.
type recordingStmt struct {
	driver.Stmt
	query string
	s     *Statements
}

func (st *recordingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	st.s.record(st.query, args)
	if e, ok := st.Stmt.(driver.StmtExecContext); ok {
		return e.ExecContext(ctx, args)
	}
	return st.Stmt.Exec(values(args)) //nolint:staticcheck // the driver has nothing newer
}

func (st *recordingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	st.s.record(st.query, args)
	if q, ok := st.Stmt.(driver.StmtQueryContext); ok {
		return q.QueryContext(ctx, args)
	}
	return st.Stmt.Query(values(args)) //nolint:staticcheck // the driver has nothing newer
}

func (st *recordingStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := st.Stmt.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func values(args []driver.NamedValue) []driver.Value {
	out := make([]driver.Value, len(args))
	for i, a := range args {
		out[i] = a.Value
	}
	return out
}
