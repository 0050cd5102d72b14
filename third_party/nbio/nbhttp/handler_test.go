package nbhttp

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"
	"unsafe"

	"github.com/lesismal/nbio"
)

// TestDataHandlerShared: every connection gets the same data handler
// value, made once by the engine, not a method value made (and kept)
// per connection.
func TestDataHandlerShared(t *testing.T) {
	e := NewEngine(Config{
		Network: "tcp",
		Addrs:   []string{"127.0.0.1:0"},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
	})
	handlers := make(chan unsafe.Pointer, 4)
	e.OnOpen(func(c net.Conn) {
		h := c.(*nbio.Conn).DataHandler()
		handlers <- *(*unsafe.Pointer)(unsafe.Pointer(&h)) // the func value's closure
	})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	var got []unsafe.Pointer
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", e.Addrs[0])
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		select {
		case p := <-handlers:
			got = append(got, p)
		case <-time.After(10 * time.Second):
			t.Fatal("connection not opened")
		}
		// A response means the poller reads the connection: it is
		// registered. The OnOpen handler runs before that, and Stop
		// (deferred) racing the registration's WaitGroup Add was
		// reported by the race detector (1 run in about 300).
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 12)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "HTTP/1.1 200" {
			t.Fatalf("connection %d: response %q, %v", i, buf, err)
		}
	}
	for i, p := range got {
		if p == nil || p != got[0] {
			t.Fatalf("connection %d has a data handler of its own (%p, the first %p)", i, p, got[0])
		}
	}
}
