package galeratest

import (
	"os"
	"testing"
)

// TestRequireSkips: without PAYD_TEST_GALERA=1 a Galera test skips and
// touches no cluster.
func TestRequireSkips(t *testing.T) {
	if os.Getenv(EnvGalera) == "1" {
		t.Skip("PAYD_TEST_GALERA=1: a cluster is configured")
	}
	t.Setenv(EnvRequireGalera, "")
	skipped := false
	t.Run("galera", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		Require(t)
	})
	if !skipped {
		t.Errorf("Require without %s: test not skipped, want skipped", EnvGalera)
	}
}

// TestPorts: node n answers SQL on 4305+n, as scripts/galera.sh sets it up.
func TestPorts(t *testing.T) {
	c := &Cluster{}
	for n, want := range map[int]int{1: 4306, 2: 4307, 3: 4308} {
		if got := c.Port(n); got != want {
			t.Errorf("Port(%d) = %d, want %d", n, got, want)
		}
	}
}
