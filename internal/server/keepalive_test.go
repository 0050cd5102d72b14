package server

import (
	"net"
	"syscall"
	"testing"
)

// TestListenNoKeepalive: the connections the relay's listener accepts
// have TCP keepalive off (the relay pings idle WebSocket connections
// itself; a kernel probe per connection every 15 s aborted sockets at a
// million connections), while a plain net.Listen, for comparison, turns
// it on, so the check can tell the two apart.
func TestListenNoKeepalive(t *testing.T) {
	keepalive := func(ln net.Listener) int {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		a, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		rc, err := a.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var v int
		var gerr error
		if err := rc.Control(func(fd uintptr) {
			v, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
		}); err != nil {
			t.Fatal(err)
		}
		if gerr != nil {
			t.Fatal(gerr)
		}
		return v
	}

	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if keepalive(plain) == 0 {
		t.Fatal("a plain net.Listen accepted a connection without keepalive: the check below proves nothing")
	}

	s := &Server{}
	ln, err := s.listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if v := keepalive(ln); v != 0 {
		t.Fatalf("SO_KEEPALIVE = %d on a connection the relay accepted, want 0", v)
	}
}
