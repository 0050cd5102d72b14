package nbhttp

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
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
	// The client sees a refused connection closed (by OnOpen) a moment
	// before the engine forgets it, so the count may lag the last refusal.
	for deadline := time.Now().Add(10 * time.Second); e.Online() != len(served); {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections online, want the %d admitted", e.Online(), len(served))
		}
		time.Sleep(time.Millisecond)
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

// acceptLoops returns the number of goroutines in Engine.listen's loop.
func acceptLoops() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "nbhttp.(*Engine).listen.func1(")
}

// TestClosedListenerEndsAcceptLoop: closing a listener (to stop accepting
// while the engine goes on serving) ends its accept loop, which went on
// calling Accept, failing at once, until the engine stopped.
func TestClosedListenerEndsAcceptLoop(t *testing.T) {
	before := acceptLoops()
	var ln net.Listener
	e := NewEngine(Config{
		Network: "tcp",
		Addrs:   []string{"127.0.0.1:0"},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }),
		Listen: func(network, addr string) (net.Listener, error) {
			l, err := net.Listen(network, addr)
			ln = l
			return l, err
		},
	})
	var acceptErrors int32
	e.OnAcceptError(func(error) { atomic.AddInt32(&acceptErrors, 1) })
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	c, err := net.Dial("tcp", e.Addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if body := get(t, c, r); body != "ok" {
		t.Fatalf("before the close: %q", body)
	}
	if n := acceptLoops(); n != before+1 {
		t.Fatalf("%d accept loops, want %d", n, before+1)
	}

	_ = ln.Close()
	deadline := time.Now().Add(10 * time.Second)
	for acceptLoops() != before {
		if time.Now().After(deadline) {
			t.Fatalf("the accept loop of a closed listener is still running (%d accept errors reported)", atomic.LoadInt32(&acceptErrors))
		}
		time.Sleep(time.Millisecond)
	}
	if n := atomic.LoadInt32(&acceptErrors); n != 0 {
		t.Fatalf("%d accept errors reported for a listener closed on purpose", n)
	}
	if body := get(t, c, r); body != "ok" {
		t.Fatalf("after the close, on a connection accepted before: %q", body)
	}
	if _, err := net.Dial("tcp", e.Addrs[0]); err == nil {
		t.Fatal("a closed listener accepted a connection")
	}
}
