package repository_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/payd/payd/repository"
)

// TestOpenSQLiteMissingFolder: a SQLite path in a folder that does not
// exist (or is a file) is refused with that reason, not the driver's "out
// of memory (14)".
func TestOpenSQLiteMissingFolder(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for url, want := range map[string]string{
		"sqlite:///no/such/dir/x.db":     "folder /no/such/dir does not exist",
		"sqlite://" + file + "/x.db":     "is not a folder",
		"sqlite://no-such-relative/x.db": "folder no-such-relative does not exist",
	} {
		db, err := repository.Open(context.Background(), url)
		if err == nil {
			db.Close()
		}
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "out of memory") {
			t.Errorf("Open(%s) = %v, want an error saying %q", url, err, want)
		}
	}
}
