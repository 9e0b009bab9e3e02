package app

import (
	"os"
	"strings"

	"github.com/payd/payd/repository"
)

// startFiles are the files a start of payd made that were not there
// before: its SQLite database, the in-process sandbox's, the development
// secrets file. A start that fails removes them, and only them, so a wrong
// flag leaves the folder as it found it; a start that serves keeps them.
type startFiles struct {
	made []string
}

// sqliteFile is the file a sqlite:// URL names, "" for any other URL, an
// in-memory database, a file: URI (whose path payd does not pick apart) or
// a URL with parameters (which Open refuses).
func sqliteFile(databaseURL string) string {
	scheme, path, _ := strings.Cut(databaseURL, "://")
	if scheme != "sqlite" || path == "" || strings.Contains(path, ":memory:") || strings.HasPrefix(path, "file:") || strings.ContainsRune(path, '?') {
		return ""
	}
	return path
}

// createDB creates the SQLite file databaseURL names if there is none yet,
// empty (SQLite takes an empty file for a new database), and notes it as
// made by this start. Creating it here, exclusively, is what tells this
// start's file from one another payd made a moment before. A folder that
// is not there is left for Open to report.
func (f *startFiles) createDB(databaseURL string) {
	path := sqliteFile(databaseURL)
	if path == "" {
		return
	}
	file, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return // there already, or Open says why not
	}
	_ = file.Close()
	// SQLite's companions of a database it opens in WAL mode go with it,
	// and so does the lock its migrations take (ADR 56).
	f.made = append(f.made, path, path+"-wal", path+"-shm", path+"-journal", path+repository.MigrationLockSuffix)
}

// add notes path as made by this start.
func (f *startFiles) add(path string) {
	if path != "" {
		f.made = append(f.made, path)
	}
}

// remove deletes the files this start made; a file already gone is fine.
// Called once the start has failed, after the databases were closed.
func (f *startFiles) remove() {
	for _, path := range f.made {
		_ = os.Remove(path) // gone already, or not ours to fight for: the start's own error is what is reported
	}
	f.made = nil
}
