package nbhttp

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// get sends a GET on c and returns the response body.
func get(t *testing.T, c net.Conn, r *bufio.Reader) string {
	t.Helper()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOnOpenRefusal: an OnOpen handler refuses a connection by closing
// it. The connection is never registered with a poller (its descriptor
// number may already be another socket's), the engine does not count it,
// and Shutdown does not wait for it; the connections it admits are
// served.
func TestOnOpenRefusal(t *testing.T) {
	e := NewEngine(Config{
		Network: "tcp",
		Addrs:   []string{"127.0.0.1:0"},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }),
	})
	var opened int32
	e.OnOpen(func(c net.Conn) {
		if atomic.AddInt32(&opened, 1)%2 == 0 {
			_ = c.Close() // refuse every second connection
		}
	})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	var served []net.Conn
	for i := 1; i <= 20; i++ {
		c, err := net.Dial("tcp", e.Addrs[0])
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		r := bufio.NewReader(c)
		if i%2 == 0 {
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, err := r.Read(make([]byte, 1)); n != 0 || err == nil {
				t.Fatalf("connection %d, refused: read %d, %v; want the connection closed", i, n, err)
			}
			continue
		}
		if body := get(t, c, r); body != "ok" {
			t.Fatalf("connection %d: %q", i, body)
		}
		served = append(served, c)
	}
	if n := e.Online(); n != len(served) {
		t.Fatalf("%d connections online, want the %d admitted", n, len(served))
	}
	for _, c := range served {
		_ = c.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v (it waited for a refused connection)", err)
	}
}
