package preload

import (
	"testing"

	"github.com/payd/payd/internal/testdeps"
)

// TestMain runs the tests, then says what they skipped for want of MySQL
// (see internal/testdeps).
func TestMain(m *testing.M) { testdeps.Main(m) }
