package nemesis

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// server is a TCP server for the links' tests: it answers each connection
// with serve and closes it when serve returns.
func server(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				serve(c)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func echo(c net.Conn) { io.Copy(c, c) }

// newLink is a link to upstream on a Net closed at the end of the test.
func newLink(t *testing.T, upstream string) (*Net, *Link) {
	t.Helper()
	n := NewNet()
	t.Cleanup(n.Close)
	l, err := n.Link("test", DBLink, upstream)
	if err != nil {
		t.Fatal(err)
	}
	return n, l
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads as many bytes back, within 10 s.
func roundTrip(c net.Conn, msg string) (string, error) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		return "", err
	}
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

func addToxic(t *testing.T, l *Link, f Fault) string {
	t.Helper()
	name, err := l.Add(f)
	if err != nil {
		t.Fatalf("Add(%v) = %v", f, err)
	}
	return name
}

func TestLinkForwards(t *testing.T) {
	_, l := newLink(t, server(t, echo))
	if _, port, err := net.SplitHostPort(l.Addr()); err != nil || port == "0" {
		t.Fatalf("Addr() = %q, want the port bound", l.Addr())
	}
	c := dial(t, l.Addr())
	for _, msg := range []string{"hello", "payd"} {
		if got, err := roundTrip(c, msg); err != nil || got != msg {
			t.Fatalf("roundTrip(%q) = %q, %v; want it echoed", msg, got, err)
		}
	}
}

func TestLinkAtListensThere(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // free again, for the link
	n := NewNet()
	t.Cleanup(n.Close)
	l, err := n.LinkAt("fixed", RedisLink, addr, server(t, echo))
	if err != nil {
		t.Fatal(err)
	}
	if l.Addr() != addr {
		t.Fatalf("Addr() = %s, want %s", l.Addr(), addr)
	}
	if got, err := roundTrip(dial(t, addr), "x"); err != nil || got != "x" {
		t.Fatalf("roundTrip = %q, %v", got, err)
	}
	if _, err := n.LinkAt("fixed", RedisLink, "127.0.0.1:0", addr); err == nil {
		t.Fatal("a second link named fixed was made")
	}
}

func TestLatencyDelays(t *testing.T) {
	_, l := newLink(t, server(t, echo))
	c := dial(t, l.Addr())
	if _, err := roundTrip(c, "warm"); err != nil {
		t.Fatal(err)
	}
	const latency = 300 * time.Millisecond
	addToxic(t, l, Fault{Kind: Latency, Stream: Downstream, Latency: latency})
	for _, c := range []net.Conn{c, dial(t, l.Addr())} { // open before, and new
		start := time.Now()
		if got, err := roundTrip(c, "late"); err != nil || got != "late" {
			t.Fatalf("roundTrip = %q, %v", got, err)
		}
		if took := time.Since(start); took < latency {
			t.Fatalf("round trip took %s with a latency of %s", took, latency)
		}
	}
}

func TestTimeoutBlackHoleHoldsUntilHealed(t *testing.T) {
	_, l := newLink(t, server(t, echo))
	name := addToxic(t, l, Fault{Kind: Timeout, Stream: Downstream})
	c := dial(t, l.Addr())
	io.WriteString(c, "lost")
	c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	var ne net.Error
	if n, err := c.Read(make([]byte, 8)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read through a black hole = %d, %v; want no answer and no close", n, err)
	}
	if err := l.Remove(name); err != nil {
		t.Fatal(err)
	}
	if len(l.Toxics()) != 0 {
		t.Fatalf("Toxics() = %v after Remove", l.Toxics())
	}
	if got, err := roundTrip(dial(t, l.Addr()), "back"); err != nil || got != "back" {
		t.Fatalf("roundTrip after the heal = %q, %v", got, err)
	}
}

func TestTimeoutClosesAfterItsTimeout(t *testing.T) {
	_, l := newLink(t, server(t, echo))
	const timeout = 300 * time.Millisecond
	addToxic(t, l, Fault{Kind: Timeout, Stream: Downstream, Timeout: timeout})
	c := dial(t, l.Addr())
	start := time.Now()
	io.WriteString(c, "lost")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(make([]byte, 8))
	if n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read = %d, %v; want the connection closed", n, err)
	}
	if took := time.Since(start); took < timeout {
		t.Fatalf("closed after %s, before the timeout of %s", took, timeout)
	}
}

func TestResetPeerResets(t *testing.T) {
	_, l := newLink(t, server(t, echo))
	addToxic(t, l, Fault{Kind: ResetPeer, Stream: Upstream})
	c := dial(t, l.Addr())
	_, err := roundTrip(c, "reset")
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("roundTrip through reset_peer = %v, want %v", err, syscall.ECONNRESET)
	}
}

func TestLimitDataCuts(t *testing.T) {
	reply := bytes.Repeat([]byte("0123456789"), 100)
	_, l := newLink(t, server(t, func(c net.Conn) { c.Write(reply) }))
	addToxic(t, l, Fault{Kind: LimitData, Stream: Downstream, Bytes: 25})
	c := dial(t, l.Addr())
	c.SetDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatal(err)
	}
	if !bytes.Equal(got, reply[:25]) {
		t.Fatalf("read %d bytes (%q), want the reply cut after 25", len(got), got)
	}
}

func TestBandwidthSlows(t *testing.T) {
	reply := bytes.Repeat([]byte("x"), 5000)
	_, l := newLink(t, server(t, func(c net.Conn) { c.Write(reply) }))
	const rateKB = 10 // 5000 bytes at 10 KB/s: 500 ms
	addToxic(t, l, Fault{Kind: Bandwidth, Stream: Downstream, RateKB: rateKB})
	start := time.Now()
	c := dial(t, l.Addr())
	c.SetDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || len(got) != len(reply) {
		t.Fatalf("read %d bytes, %v; want %d", len(got), err, len(reply))
	}
	if took, least := time.Since(start), 400*time.Millisecond; took < least {
		t.Fatalf("5000 bytes at %d KB/s took %s, want at least %s", rateKB, took, least)
	}
}

func TestSlowCloseDelaysTheClose(t *testing.T) {
	_, l := newLink(t, server(t, func(c net.Conn) { io.WriteString(c, "bye") }))
	const delay = 400 * time.Millisecond
	addToxic(t, l, Fault{Kind: SlowClose, Stream: Downstream, Timeout: delay})
	start := time.Now()
	c := dial(t, l.Addr())
	c.SetDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "bye" {
		t.Fatalf("ReadAll = %q, %v", got, err)
	}
	if took := time.Since(start); took < delay {
		t.Fatalf("closed after %s, want the close delayed %s", took, delay)
	}
}

func TestAddRefusesWhatIsNotAWireFault(t *testing.T) {
	_, l := newLink(t, server(t, echo))
	for _, f := range []Fault{
		{Kind: KillReplica},
		{Kind: Bandwidth, Stream: Downstream},            // no rate
		{Kind: Latency, Stream: "sideways", Latency: 10}, // no such stream
	} {
		if name, err := l.Add(f); err == nil {
			t.Errorf("Add(%v) = %s, want an error", f, name)
		}
	}
}

func TestHealRestoresEveryLink(t *testing.T) {
	n := NewNet()
	t.Cleanup(n.Close)
	up := server(t, echo)
	a, err := n.Link("a", DBLink, up)
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.Link("b", ProviderLink, up)
	if err != nil {
		t.Fatal(err)
	}
	addToxic(t, a, Fault{Kind: Timeout, Stream: Upstream})
	addToxic(t, a, Fault{Kind: Latency, Stream: Downstream, Latency: time.Second})
	b.Disable()
	if c, err := net.DialTimeout("tcp", b.Addr(), time.Second); err == nil {
		c.Close()
		t.Fatal("a disabled link accepted a connection")
	}
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	for _, l := range n.Links() {
		if len(l.Toxics()) != 0 {
			t.Errorf("%s: Toxics() = %v after Heal", l.Name, l.Toxics())
		}
		start := time.Now()
		if got, err := roundTrip(dial(t, l.Addr()), "ok"); err != nil || got != "ok" {
			t.Errorf("%s: roundTrip after Heal = %q, %v", l.Name, got, err)
		}
		if took := time.Since(start); took >= time.Second {
			t.Errorf("%s: round trip took %s: the latency is still on", l.Name, took)
		}
	}
	if got, ok := n.Lookup("b"); !ok || got != b {
		t.Fatalf("Lookup(b) = %v, %v", got, ok)
	}
}

func TestCloseStopsListenersAndConnections(t *testing.T) {
	up := server(t, echo)
	// The held connection's upstream reads and says so, and never answers:
	// bytes crossing a timeout toxic as Close removes it can leave a
	// Toxiproxy 2.5.0 stub blocked for good, handing them to the removed
	// toxic.
	arrived := make(chan struct{}, 1)
	silent := server(t, func(c net.Conn) {
		if _, err := io.ReadFull(c, make([]byte, len("held"))); err != nil {
			return
		}
		arrived <- struct{}{}
		io.Copy(io.Discard, c)
	})
	before := runtime.NumGoroutine()
	n := NewNet()
	l, err := n.Link("a", DBLink, up)
	if err != nil {
		t.Fatal(err)
	}
	held, err := n.Link("held", DBLink, silent)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, l.Addr())
	if _, err := roundTrip(c, "open"); err != nil {
		t.Fatal(err)
	}
	addToxic(t, held, Fault{Kind: Timeout, Stream: Downstream})
	h := dial(t, held.Addr())
	io.WriteString(h, "held")
	// dial returns once the kernel has the connection, before Toxiproxy
	// takes it: closed before then, the link resets its toxics first and
	// may start the connection after, with no toxic on it. The upstream
	// reading "held" says it is proxied.
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the held connection's bytes never reached the upstream")
	}

	n.Close()
	for _, c := range []net.Conn{c, h} {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("Read after Close = %v, want the connection closed", err)
		}
	}
	if c, err := net.DialTimeout("tcp", l.Addr(), time.Second); err == nil {
		c.Close()
		t.Error("a closed net accepted a connection")
	}
	if _, err := n.Link("late", DBLink, up); err == nil {
		t.Error("Link after Close made a link")
	}
	// Every goroutine of the links ends (the echo server's may take a moment too).
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := runtime.NumGoroutine(); got > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines after Close, %d before:\n%s", got, before, buf[:runtime.Stack(buf, true)])
	}
}
