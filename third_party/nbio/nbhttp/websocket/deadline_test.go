package websocket

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lesismal/nbio/nbhttp"
)

// dialWebSocket opens a WebSocket to addr with a hand-written handshake.
func dialWebSocket(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	req := "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %s", res.Status)
	}
	return c, r
}

// echo sends a text message (masked with a zero key) and reads it back.
func echo(c net.Conn, r *bufio.Reader, msg string) error {
	frame := append([]byte{0x81, 0x80 | byte(len(msg)), 0, 0, 0, 0}, msg...)
	if _, err := c.Write(frame); err != nil {
		return err
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, 2+len(msg))
	if _, err := io.ReadFull(r, got); err != nil {
		return err
	}
	if string(got[2:]) != msg {
		return io.ErrUnexpectedEOF
	}
	return nil
}

// TestUpgradeOutlivesHeadDeadline: the engine's KeepaliveTime bounds the
// wait for a request head, armed before the connection can be read; an
// upgrade that clears it (Upgrader.KeepaliveTime 0) is not undone by it,
// so WebSockets outlive it, while a connection that sends nothing is
// closed when it passes.
func TestUpgradeOutlivesHeadDeadline(t *testing.T) {
	const headTimeout = 200 * time.Millisecond
	u := NewUpgrader()
	u.KeepaliveTime = 0
	u.OnMessage(func(c *Conn, mt MessageType, data []byte) { _ = c.WriteMessage(mt, data) })
	e := nbhttp.NewEngine(nbhttp.Config{
		Network:       "tcp",
		Addrs:         []string{"127.0.0.1:0"},
		KeepaliveTime: headTimeout,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = u.Upgrade(w, r, nil)
		}),
	})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	defer e.Stop()

	idle, err := net.Dial("tcp", e.Addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	type ws struct {
		c net.Conn
		r *bufio.Reader
	}
	var wss []ws
	for i := 0; i < 20; i++ {
		c, r := dialWebSocket(t, e.Addrs[0])
		defer c.Close()
		wss = append(wss, ws{c, r})
	}
	time.Sleep(3 * headTimeout)
	for i, w := range wss {
		if err := echo(w.c, w.r, strings.Repeat("x", i+1)); err != nil {
			t.Fatalf("WebSocket %d after three head timeouts: %v", i, err)
		}
	}
	_ = idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := idle.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("the idle connection: read %d, %v; want it closed by the head deadline", n, err)
	}
}
