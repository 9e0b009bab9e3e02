package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// shortTimeouts make payd's connection timeouts short enough to test.
// The provider timeout is short too: the write timeout must outlast it.
var shortTimeouts = env{"PAYD_READ_TIMEOUT": "1s", "PAYD_WRITE_TIMEOUT": "2s", "PAYD_IDLE_TIMEOUT": "1s", "PAYD_PROVIDER_TIMEOUT": "1s"}

// closedWithin reports whether the server closes conn within d: a read
// returns EOF (or a reset) rather than timing out. Anything the server
// sends first (an error response) is read and dropped.
func closedWithin(conn net.Conn, d time.Duration) bool {
	_ = conn.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	return !errors.As(err, &ne) || !ne.Timeout()
}

// TestSlowClientIsCut: a client that trickles its body one byte at a time
// is cut once the read timeout passes, and a keep-alive connection left
// idle is closed after the idle timeout.
func TestSlowClientIsCut(t *testing.T) {
	s := start(t, on("sqlite"), withEnv(shortTimeouts))
	_, tok := s.register("slow@example.com")
	addr := strings.TrimPrefix(s.base, "http://")

	t.Run("trickled body", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		body := `{"items":[{"sku":"` + s.priced("1.00") + `","quantity":1}]}`
		fmt.Fprintf(conn, "POST /v1/orders HTTP/1.1\r\nHost: payd\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", tok, len(body))
		closed := make(chan time.Duration, 1)
		start := time.Now()
		go func() {
			if closedWithin(conn, 10*time.Second) {
				closed <- time.Since(start)
			}
		}()
		for i := 0; i < len(body); i++ {
			select {
			case d := <-closed:
				if d > 3*time.Second {
					t.Errorf("trickled body cut after %v, want about the 1s read timeout", d)
				}
				return
			case <-time.After(300 * time.Millisecond):
				if _, err := conn.Write([]byte{body[i]}); err != nil {
					return // cut: the server closed the connection
				}
			}
		}
		t.Errorf("a body sent a byte every 300ms was read for %v, want it cut after the 1s read timeout", time.Since(start))
	})

	t.Run("idle keep-alive", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprint(conn, "GET /healthz HTTP/1.1\r\nHost: payd\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /healthz = %v, %v", resp, err)
		}
		resp.Body.Close()
		start := time.Now()
		if !closedWithin(conn, 4*time.Second) {
			t.Errorf("an idle keep-alive connection was still open after %v, want it closed after the 1s idle timeout", time.Since(start))
		}
	})

	t.Run("event stream outlives the timeouts", func(t *testing.T) {
		id := s.order(tok, "3.00")
		req, _ := http.NewRequest("GET", s.base+"/v1/orders/"+id+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET events = %v, %v", resp, err)
		}
		defer resp.Body.Close()
		events := make(chan string, 8)
		go func() {
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					events <- data
				}
			}
			close(events)
		}()
		if e := <-events; !strings.Contains(e, `"pending"`) {
			t.Fatalf("first event = %s, want the pending order", e)
		}
		time.Sleep(3500 * time.Millisecond) // past the read, write and idle timeouts
		if r := s.do(request{method: "POST", path: "/v1/orders/" + id + "/cancel", token: tok, key: uuid.NewString()}); r.Status != http.StatusOK {
			t.Fatalf("cancel = %d %s", r.Status, r.Body)
		}
		select {
		case e, ok := <-events:
			if !ok || !strings.Contains(e, `"cancelled"`) {
				t.Errorf("event after the timeouts = %q (open %v), want the cancelled order", e, ok)
			}
		case <-time.After(5 * time.Second):
			t.Error("no event after the timeouts passed, want the stream still open")
		}
	})
}
