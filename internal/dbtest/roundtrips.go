package dbtest

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// CountRoundTrips puts a TCP proxy between payd and the MySQL server of
// the payd database URL rawURL and returns the URL to open through it and
// a Counter of the commands clients send through it. A command (a packet
// with sequence number 0: COM_QUERY, COM_PING, ...) is one round trip,
// whatever it holds: BEGIN, COMMIT and a multi-statement packet count one
// each (so do a new connection's session SET and COM_QUIT: the count errs
// high, never low). The URL must not ask for TLS or compression, which
// the proxy cannot read. Counting on the wire, below GORM and database/sql, no statement
// can go uncounted. The proxy stops when the test ends.
func CountRoundTrips(t testing.TB, rawURL string) (string, *Counter) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "mysql" {
		t.Fatalf("dbtest: CountRoundTrips needs a mysql:// URL")
	}
	upstream := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("dbtest: proxy: %v", err)
	}
	c := &Counter{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	track := func(cs ...net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if conns == nil {
			return false // stopped
		}
		conns = append(conns, cs...)
		return true
	}
	conns = []net.Conn{}
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.DialTimeout("tcp", upstream, 5*time.Second)
			if err != nil {
				client.Close()
				continue
			}
			if !track(client, server) {
				client.Close()
				server.Close()
				return
			}
			wg.Go(func() {
				_ = countCommands(server, client, c)
				server.Close()
			})
			wg.Go(func() {
				_, _ = io.Copy(client, server)
				client.Close()
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, cn := range conns {
			cn.Close()
		}
		conns = nil
		mu.Unlock()
		wg.Wait()
	})
	u.Host = ln.Addr().String()
	return u.String(), c
}

// countCommands copies MySQL packets from client to server, counting those
// that start a command (sequence number 0). A packet is a 3-byte
// little-endian length, a sequence number and the payload.
func countCommands(server io.Writer, client io.Reader, c *Counter) error {
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(client, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n := int64(binary.LittleEndian.Uint32(append(hdr[:3:3], 0)))
		if hdr[3] == 0 {
			c.n.Add(1)
		}
		if _, err := server.Write(hdr[:]); err != nil {
			return err
		}
		if _, err := io.CopyN(server, client, n); err != nil {
			return err
		}
	}
}
