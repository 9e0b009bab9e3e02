package sandbox

import (
	"embed"
	"fmt"
	"io/fs"
)

// migrationFiles is the schema of the sandbox's own database, one folder per
// dialect. It is kept apart from payd's migrations: the sandbox stands in
// for a foreign provider and never shares tables or migration history with
// payd.
//
//go:embed migrations/mysql/*.sql migrations/sqlite/*.sql
var migrationFiles embed.FS

// schemaDialect names a folder of sandbox migrations.
type schemaDialect string

// The dialects the sandbox runs on.
const (
	schemaMySQL  schemaDialect = "mysql"
	schemaSQLite schemaDialect = "sqlite"
)

// migrationFS returns the sandbox's migrations for dialect d.
func migrationFS(d schemaDialect) (fs.FS, error) {
	switch d {
	case schemaMySQL, schemaSQLite:
		return fs.Sub(migrationFiles, "migrations/"+string(d))
	}
	return nil, fmt.Errorf("sandbox: unknown migration dialect %q", d)
}
