package dbtest

import (
	"errors"
	"fmt"
	"sync/atomic"

	"gorm.io/gorm"

	"github.com/payd/payd/repository"
)

// Counter counts the SQL statements a database handle sends, for tests and
// benchmarks that bound statements per request: those GORM builds, through
// its callbacks, and those the stores write out and send on their
// executor, through the handle's hook (OnDirectStatement). BEGIN and COMMIT are not counted: they do not pass through
// GORM's callbacks.
type Counter struct{ n atomic.Int64 }

// counterID keeps callback names unique when several counters watch one
// handle.
var counterID atomic.Int64

// CountStatements registers callbacks on db that count every statement it
// (and every session or transaction derived from it) executes from now on.
func CountStatements(db *repository.DB) *Counter {
	c := &Counter{}
	db.OnDirectStatement(func() { c.n.Add(1) })
	name := fmt.Sprintf("dbtest:count_%d", counterID.Add(1))
	count := func(tx *gorm.DB) {
		if tx.Statement.SQL.Len() > 0 {
			c.n.Add(1)
		}
	}
	cb := db.Gorm().Callback()
	err := errors.Join(
		cb.Create().After("gorm:create").Register(name, count),
		cb.Query().After("gorm:query").Register(name, count),
		cb.Update().After("gorm:update").Register(name, count),
		cb.Delete().After("gorm:delete").Register(name, count),
		cb.Row().After("gorm:row").Register(name, count),
		cb.Raw().After("gorm:raw").Register(name, count),
	)
	if err != nil {
		panic("dbtest: register statement counter: " + err.Error())
	}
	return c
}

// Load returns the number of statements counted since the last Reset.
func (c *Counter) Load() int64 { return c.n.Load() }

// Reset sets the count back to zero.
func (c *Counter) Reset() { c.n.Store(0) }
