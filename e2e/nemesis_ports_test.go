package e2e

import (
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"testing"
)

// handedOut holds every address freeAddr has given, for the test binary's
// life.
var handedOut struct {
	sync.Mutex
	addrs map[string]bool
}

// freeAddr is a loopback address nothing listens on now and that no
// caller before was given, below the kernel's ephemeral ports (32768 and
// up), so that no listener on port 0 — a link, the provider — takes it
// before the replica binds it. The setups choose their replicas'
// addresses at once, and a replica the nemesis killed leaves its port
// unbound until it restarts: "nothing listens there now" alone would let
// two replicas share one.
func freeAddr(t *testing.T) string {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.addrs == nil {
		handedOut.addrs = make(map[string]bool)
	}
	for range 200 {
		addr := "127.0.0.1:" + strconv.Itoa(30500+rand.IntN(2200))
		if handedOut.addrs[addr] {
			continue
		}
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			handedOut.addrs[addr] = true
			return addr
		}
	}
	t.Fatal("no free port for a replica")
	return ""
}

func TestFreeAddrNeverRepeats(t *testing.T) {
	seen := make(map[string]bool)
	for range 300 {
		addr := freeAddr(t)
		if seen[addr] {
			t.Fatalf("freeAddr handed out %s twice", addr)
		}
		seen[addr] = true
	}
}
