package nbio

import (
	"net"
	"sync"
	"syscall"
	"testing"
)

// pair is a client socket and the server side of it, registered with an
// engine.
type pair struct {
	client net.Conn
	server *Conn
}

// connect dials ln and registers the accepted connection with g.
func connect(t *testing.T, g *Engine, ln net.Listener) pair {
	t.Helper()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	std, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	server, err := g.AddConn(std)
	if err != nil {
		t.Fatal(err)
	}
	return pair{client, server}
}

// waitReadable waits, in an epoll instance of its own, until every fd
// is readable or hung up.
func waitReadable(t *testing.T, fds ...int) {
	t.Helper()
	ep, err := syscall.EpollCreate1(0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(ep)
	for _, fd := range fds {
		if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, fd, &syscall.EpollEvent{Fd: int32(fd), Events: syscall.EPOLLIN | syscall.EPOLLRDHUP}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[int32]bool{}
	events := make([]syscall.EpollEvent, len(fds))
	for len(seen) < len(fds) {
		n, err := syscall.EpollWait(ep, events, -1)
		if err != nil && err != syscall.EINTR {
			t.Fatal(err)
		}
		for _, ev := range events[:n] {
			seen[ev.Fd] = true
		}
	}
}

// inode returns the inode of what fd refers to, 0 if fd is not open.
func inode(fd int) uint64 {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return 0
	}
	return st.Ino
}

// TestCloseOffPollerWaitsForBatch: a connection closed off its poller
// goroutine while the poller holds an event for it (here: the hang-up of
// its peer, in the batch the poller is handling) keeps its descriptor
// open until the poller is done with the batch, so the number cannot go to
// a new connection that the stale event would then close. The poller then
// closes it, and connections made meanwhile are served.
func TestCloseOffPollerWaitsForBatch(t *testing.T) {
	g := NewEngine(Config{NPoller: 1})
	var mu sync.Mutex
	block := map[*Conn]chan struct{}{} // connections whose data blocks the poller
	entered := make(chan *Conn, 4)
	g.OnData(func(c *Conn, data []byte) {
		mu.Lock()
		ch := block[c]
		mu.Unlock()
		if ch != nil {
			entered <- c
			<-ch
			return
		}
		_, _ = c.Write(data) // echo
	})
	closes := make(chan *Conn, 8)
	g.OnClose(func(c *Conn, err error) { closes <- c })
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	w1, w2, a := connect(t, g, ln), connect(t, g, ln), connect(t, g, ln)
	defer w1.client.Close()
	defer w2.client.Close()
	release1, release2 := make(chan struct{}), make(chan struct{})
	var once1, once2 sync.Once
	free1 := func() { once1.Do(func() { close(release1) }) }
	free2 := func() { once2.Do(func() { close(release2) }) }
	defer free2() // on failure too: g.Stop waits for the poller
	defer free1()
	mu.Lock()
	block[w1.server], block[w2.server] = release1, release2
	mu.Unlock()

	// Hold the poller inside a batch (w1's data), and meanwhile make w2
	// readable and then a's peer hang up: the next batch holds w2's
	// event, then a's.
	if _, err := w1.client.Write([]byte("1")); err != nil {
		t.Fatal(err)
	}
	if c := <-entered; c != w1.server {
		t.Fatalf("the poller blocked on %v, want w1", c.fd)
	}
	if _, err := w2.client.Write([]byte("2")); err != nil {
		t.Fatal(err)
	}
	a.client.Close()
	waitReadable(t, w2.server.fd, a.server.fd)
	free1()
	if c := <-entered; c != w2.server {
		t.Fatalf("the poller blocked on %v, want w2", c.fd)
	}
	// The poller is inside the batch, before a's event.
	if closed, _ := a.server.IsClosed(); closed {
		t.Fatal("precondition: the poller handled a's hang-up before w2's data")
	}

	fd, ino := a.server.fd, inode(a.server.fd)
	if err := a.server.Close(); err != nil {
		t.Fatal(err)
	}
	if got := inode(fd); got != ino {
		t.Fatalf("closed off the poller mid-batch, fd %d went at once (inode %d, was %d)", fd, got, ino)
	}
	if c := <-closes; c != a.server {
		t.Fatalf("OnClose for fd %d, want a's", c.fd)
	}

	// A connection made now, then the batch ends: the stale event is
	// dropped and the new connection is served.
	n := connect(t, g, ln)
	defer n.client.Close()
	free2()
	if _, err := n.client.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := n.client.Read(buf); err != nil || string(buf) != "ping" {
		t.Fatalf("the connection made during the batch: read %q, %v", buf, err)
	}
	// The poller handled n's data in a later batch, so it has closed a's
	// descriptor by now.
	if got := inode(fd); got == ino {
		t.Fatalf("fd %d still open after the batch", fd)
	}
	select {
	case c := <-closes:
		t.Fatalf("an unexpected close, fd %d", c.fd)
	default:
	}
}
