package nbio

import (
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// openFDs returns the process's open descriptors and what each refers
// to ("socket:[123]", "anon_inode:[eventpoll]", a path).
func openFDs(t *testing.T, pid string) map[int]string {
	t.Helper()
	dir := "/proc/" + pid + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fds := map[int]string{}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if link, err := os.Readlink(dir + "/" + e.Name()); err == nil {
			fds[fd] = link
		}
	}
	return fds
}

// closeOnExec reports whether fd has FD_CLOEXEC set (false if it is not
// open).
func closeOnExec(fd int) (flag, open bool) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0)
	if e != 0 {
		return false, false
	}
	return r&syscall.FD_CLOEXEC != 0, true
}

// acceptInto starts an engine and hands it a connection accepted from
// a loopback listener; it returns the engine's connection and the
// client's end.
func acceptInto(t *testing.T, g *Engine) (*Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c, err := g.AddConn(sc)
	if err != nil {
		t.Fatal(err)
	}
	return c, client
}

// TestDescriptorsCloseOnExec: every descriptor the engine creates (an
// accepted connection's copy, each poller's epoll instance, its eventfd
// and the copy of the epoll fd it parks on) has FD_CLOEXEC set. dup(2),
// epoll_create1(0) and eventfd without EFD_CLOEXEC leave it clear.
func TestDescriptorsCloseOnExec(t *testing.T) {
	before := openFDs(t, "self")
	const pollers = 2
	g := NewEngine(Config{NPoller: pollers})
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	c, _ := acceptInto(t, g)

	// The pollers make their copy of the epoll fd when their loop starts.
	var epolls, eventfds int
	for deadline := time.Now().Add(10 * time.Second); ; {
		epolls, eventfds = 0, 0
		for fd, link := range openFDs(t, "self") {
			if _, old := before[fd]; old {
				continue
			}
			switch link {
			case "anon_inode:[eventpoll]":
				epolls++
			case "anon_inode:[eventfd]":
				eventfds++
			}
		}
		if epolls >= 2*pollers || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if epolls < 2*pollers || eventfds < pollers {
		t.Fatalf("new descriptors: %d epoll, %d eventfd; want %d and %d", epolls, eventfds, 2*pollers, pollers)
	}
	if flag, open := closeOnExec(c.fd); !open || !flag {
		t.Errorf("accepted connection's descriptor %d: open %v, FD_CLOEXEC %v", c.fd, open, flag)
	}
	for fd, link := range openFDs(t, "self") {
		if _, old := before[fd]; old {
			continue
		}
		if flag, open := closeOnExec(fd); open && !flag {
			t.Errorf("descriptor %d (%s) is not close-on-exec", fd, link)
		}
	}
}

// TestChildDoesNotHoldConnection: a process started after a connection
// is accepted holds none of the engine's descriptors, so that closing
// the connection reaches the peer while that process runs. When the
// child held a copy, the peer saw no end of stream until it exited, and
// the copy kept the socket in the engine's epoll set.
func TestChildDoesNotHoldConnection(t *testing.T) {
	g := NewEngine(Config{NPoller: 1})
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	c, client := acceptInto(t, g)
	sock, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(c.fd))
	if err != nil || !strings.HasPrefix(sock, "socket:") {
		t.Fatalf("connection's descriptor %d: %q, %v", c.fd, sock, err)
	}

	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	defer func() {
		_ = child.Process.Kill()
		_ = child.Wait()
	}()
	for fd, link := range openFDs(t, strconv.Itoa(child.Process.Pid)) {
		if link == sock || strings.HasPrefix(link, "anon_inode:") {
			t.Errorf("the child holds descriptor %d: %s", fd, link)
		}
	}

	_ = c.Close()
	_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := client.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("client read after the engine closed the connection, the child running: %d, %v; want EOF", n, err)
	}
}
