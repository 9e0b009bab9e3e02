package notify

import (
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestInWords: a request that got no answer is told in words that say
// what happened and to which host, whatever Go's error chain says.
func TestInWords(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAt := closed.Addr().String()
	closed.Close()

	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(time.Second):
		}
	}))
	defer slow.Close()
	hangUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer hangUp.Close()
	selfSigned := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	selfSigned.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	selfSigned.StartTLS()
	defer selfSigned.Close()

	for _, tt := range []struct {
		name, url, want string
	}{
		{"refused", "http://" + refusedAt + "/hooks", "connection refused: nothing listens there (" + refusedAt + ")"},
		{"timeout", slow.URL, "no answer in time (" + strings.TrimPrefix(slow.URL, "http://") + ")"},
		{"hung up", hangUp.URL, "connection closed before an answer (" + strings.TrimPrefix(hangUp.URL, "http://") + ")"},
		{"untrusted certificate", selfSigned.URL, "TLS certificate not accepted: signed by an authority payd does not trust (" + strings.TrimPrefix(selfSigned.URL, "https://") + ")"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Only the slow server is waited out; the others get time
			// enough for a TLS handshake on a loaded machine.
			client := &http.Client{Timeout: 10 * time.Second}
			if tt.name == "timeout" {
				client.Timeout = 200 * time.Millisecond
			}
			res, err := client.Post(tt.url, "application/json", strings.NewReader("{}"))
			if err == nil {
				res.Body.Close()
				t.Fatalf("POST %s answered %d, want no answer", tt.url, res.StatusCode)
			}
			if got := inWords(err); got != tt.want {
				t.Errorf("inWords(%v) = %q, want %q", err, got, tt.want)
			}
		})
	}
	if got := inWords(ErrRefusedAddress); got != ErrRefusedAddress.Error() {
		t.Errorf("inWords(ErrRefusedAddress) = %q, want it as it is", got)
	}
}
