package nbio

import (
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestDeadlineArmedBeforeRegistration: a connection added with a read
// deadline has it armed by the time its poller first reads it, so a
// handler that clears the deadline on the first bytes (as a WebSocket
// upgrade does) always comes after, and the connection outlives it.
func TestDeadlineArmedBeforeRegistration(t *testing.T) {
	g := NewEngine(Config{NPoller: 1})
	var mu sync.Mutex
	armed := map[*Conn]bool{} // at the poller's first read of each connection
	g.OnReadBufferAlloc(func(c *Conn) *[]byte {
		c.mux.Lock()
		a := c.rTimer != nil
		c.mux.Unlock()
		mu.Lock()
		if _, seen := armed[c]; !seen {
			armed[c] = a
		}
		mu.Unlock()
		return g.PollerBufferPtr(c)
	})
	g.OnData(func(c *Conn, data []byte) {
		if string(data) == "clear" {
			_ = c.SetReadDeadline(time.Time{})
		}
		_, _ = c.Write(data)
	})
	closed := make(chan error, 64)
	g.OnClose(func(c *Conn, err error) { closed <- err })
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	const deadline = 200 * time.Millisecond
	roundTrip := func(c net.Conn, msg string) error {
		if _, err := c.Write([]byte(msg)); err != nil {
			return err
		}
		buf := make([]byte, len(msg))
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := io.ReadFull(c, buf)
		return err
	}
	dial := func() (net.Conn, *Conn) {
		t.Helper()
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		std, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		// The client writes before the connection is added: the poller
		// reads it as soon as it is registered.
		if _, err := client.Write([]byte("clear")); err != nil {
			t.Fatal(err)
		}
		c, err := g.AddConnWithReadDeadline(std, time.Now().Add(deadline))
		if err != nil {
			t.Fatal(err)
		}
		echo := make([]byte, len("clear"))
		if _, err := io.ReadFull(client, echo); err != nil { // "clear" was handled
			t.Fatal(err)
		}
		return client, c
	}

	var clients []net.Conn
	for i := 0; i < 10; i++ {
		client, c := dial()
		defer client.Close()
		mu.Lock()
		a, seen := armed[c]
		mu.Unlock()
		if !seen || !a {
			t.Fatalf("connection %d: read before its deadline was armed", i)
		}
		clients = append(clients, client)
	}
	time.Sleep(3 * deadline)
	for i, c := range clients {
		if err := roundTrip(c, "y"); err != nil {
			t.Fatalf("connection %d, its deadline cleared by its first bytes: %v after the deadline", i, err)
		}
	}
	select {
	case err := <-closed:
		t.Fatalf("a connection closed: %v", err)
	default:
	}

	// Not cleared, the deadline closes an idle connection.
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	std, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.AddConnWithReadDeadline(std, time.Now().Add(deadline)); err != nil {
		t.Fatal(err)
	}
	if err := <-closed; !errors.Is(err, errReadTimeout) {
		t.Fatalf("the idle connection closed with %v, want the read timeout", err)
	}
}

// TestClosedBeforeRegistration: a connection its OnOpen handler closes is
// not registered: AddConn reports net.ErrClosed, OnClose runs once, and
// the poller does not watch the descriptor (whose number another socket
// may get at once).
func TestClosedBeforeRegistration(t *testing.T) {
	g := NewEngine(Config{NPoller: 1})
	g.OnOpen(func(c *Conn) { _ = c.Close() })
	closed := make(chan *Conn, 4)
	g.OnClose(func(c *Conn, err error) { closed <- c })
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	std, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	nbc, err := NBConn(std)
	if err != nil {
		t.Fatal(err)
	}
	fd, ino := nbc.fd, inode(nbc.fd)
	if _, err := g.AddConn(nbc); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("AddConn of a connection OnOpen closed: %v, want net.ErrClosed", err)
	}
	if c := <-closed; c != nbc {
		t.Fatal("OnClose for another connection")
	}
	if g.connsUnix[nbc.fd] != nil {
		t.Fatal("the closed connection is in the poller's table")
	}
	// The poller does not watch it: removing it from the epoll instance
	// finds nothing (ENOENT), or no descriptor at all once the poller has
	// closed it (EBADF).
	err = syscall.EpollCtl(g.pollers[0].epfd, syscall.EPOLL_CTL_DEL, fd, &syscall.EpollEvent{})
	if err != syscall.ENOENT && err != syscall.EBADF {
		t.Fatalf("the closed connection's descriptor is watched (EPOLL_CTL_DEL: %v)", err)
	}
	// And its poller closes it. (Waiting for that also keeps Stop from
	// coming before the poller's loop has started: nbio's loop clears
	// the flag Stop sets, and would then wait forever.)
	deadline := time.Now().Add(10 * time.Second)
	for inode(fd) == ino {
		if time.Now().After(deadline) {
			t.Fatal("the poller never closed the refused connection's descriptor")
		}
		time.Sleep(time.Millisecond)
	}
}
