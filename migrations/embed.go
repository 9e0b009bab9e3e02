// Package migrations holds payd's schema as plain numbered SQL files, one
// folder per dialect, embedded into the binary and applied by goose. They
// are the only source of schema: tests apply the same files.
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
)

//go:embed mysql/*.sql sqlite/*.sql
var files embed.FS

// Dialect names a folder of migrations.
type Dialect string

// The dialects payd runs on.
const (
	MySQL  Dialect = "mysql"
	SQLite Dialect = "sqlite"
)

// FS returns the migrations of payd's own database for dialect d.
func FS(d Dialect) (fs.FS, error) {
	switch d {
	case MySQL, SQLite:
		return fs.Sub(files, string(d))
	}
	return nil, fmt.Errorf("migrations: unknown dialect %q", d)
}
