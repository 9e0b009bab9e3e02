package nemesis

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// TestLinkUnderTraffic puts and takes every kind of toxic on a link while
// clients talk through it, as a schedule does: Add, Remove, Heal and Close
// must each return, whatever the connections are doing.
func TestLinkUnderTraffic(t *testing.T) {
	n, l := newLink(t, server(t, echo))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				c, err := net.DialTimeout("tcp", l.Addr(), time.Second)
				if err != nil {
					continue
				}
				for range 5 {
					c.SetDeadline(time.Now().Add(300 * time.Millisecond))
					if _, err := exchange(c, "payload-payload-payload"); err != nil {
						break
					}
				}
				c.Close()
			}
		})
	}
	faults := []Fault{
		{Kind: Latency, Stream: Downstream, Latency: 20 * time.Millisecond, Jitter: 10 * time.Millisecond},
		{Kind: Timeout, Stream: Upstream},
		{Kind: Timeout, Stream: Downstream, Timeout: 50 * time.Millisecond},
		{Kind: ResetPeer, Stream: Upstream, Timeout: 10 * time.Millisecond},
		{Kind: SlowClose, Stream: Downstream, Timeout: 50 * time.Millisecond},
		{Kind: Bandwidth, Stream: Upstream, RateKB: 1},
		{Kind: LimitData, Stream: Downstream, Bytes: 10},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for round := range 30 {
			// A toxic on each direction, of every kind in turn.
			up, down := faults[round%len(faults)], faults[(round+3)%len(faults)]
			up.Stream, down.Stream = Upstream, Downstream
			var names []string
			for _, f := range []Fault{up, down} {
				name, err := l.Add(f)
				if err != nil {
					t.Error(err)
					continue
				}
				names = append(names, name)
			}
			if _, err := l.Add(up); err == nil {
				t.Error("a second toxic on the upstream direction was added")
			}
			time.Sleep(20 * time.Millisecond)
			if round%2 == 0 {
				for _, name := range names {
					if err := l.Remove(name); err != nil {
						t.Error(err)
					}
				}
			} else if err := n.Heal(); err != nil {
				t.Error(err)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("adding and removing toxics under traffic did not return")
	}
	cancel()
	wg.Wait()
}

// exchange is roundTrip within the connection's own deadline.
func exchange(c net.Conn, msg string) (string, error) {
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}
