package nbio

import (
	"io"
	"net"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// pollerState returns the scheduling state of the goroutine running a
// poller's loop ("IO wait", "syscall", "runnable", ...) and whether it
// waits in epollWaiter.wait, or "" if there is no such goroutine.
func pollerState() (state string, inWaiter bool) {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	header := regexp.MustCompile(`^goroutine \d+ \[([^,\]]+)`)
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "nbio.(*poller).readWriteLoop(") {
			continue
		}
		m := header.FindStringSubmatch(g)
		if m == nil {
			return "", false
		}
		return m[1], strings.Contains(g, "nbio.(*epollWaiter).wait(")
	}
	return "", false
}

// TestIdlePollerParksInNetpoller: an idle poller waits in the Go
// netpoller (state "IO wait", holding no P) on its epoll descriptor, not
// in a blocking epoll_wait (state "syscall"), and wakes for the next
// event.
func TestIdlePollerParksInNetpoller(t *testing.T) {
	g := NewEngine(Config{NPoller: 1})
	g.OnData(func(c *Conn, data []byte) { _, _ = c.Write(data) })
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
	if _, err := g.AddConn(std); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		// Wait for the poller to settle into its wait. On its way it
		// passes through system calls (a non-blocking epoll_wait among
		// them); one that blocks in epoll_wait never gets to "IO wait".
		deadline := time.Now().Add(10 * time.Second)
		for {
			state, inWaiter := pollerState()
			if state == "IO wait" {
				if !inWaiter {
					t.Fatalf("round %d: the poller waits for IO outside epollWaiter.wait", round)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the idle poller never parked in the netpoller (state %q: a blocking epoll_wait if \"syscall\")", round, state)
			}
			time.Sleep(time.Millisecond)
		}
		// It wakes for the next event.
		if _, err := client.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 4)
		if _, err := io.ReadFull(client, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("round %d: echo %q, %v", round, buf, err)
		}
	}
}
