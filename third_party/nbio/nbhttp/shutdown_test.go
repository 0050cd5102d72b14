package nbhttp

import (
	"context"
	"net"
	"testing"
	"time"
)

// TestShutdownIdleEngine: Shutdown of an engine with no connection open
// returns at once, without waiting for its ticker (petrel patch 15). The
// tick is made an hour long here, so that an engine that waits for it
// cannot pass; the 10-second bound detects that wait, it is not a timing.
// An engine that served a connection, closed since, stops the same way.
func TestShutdownIdleEngine(t *testing.T) {
	defer func(d time.Duration) { shutdownTick = d }(shutdownTick)
	shutdownTick = time.Hour
	for _, served := range []bool{false, true} {
		e := NewEngine(Config{Network: "tcp", Addrs: []string{"127.0.0.1:0"}, NPoller: 1})
		closed := make(chan struct{}, 1)
		e.OnClose(func(c net.Conn, err error) { closed <- struct{}{} })
		if err := e.Start(); err != nil {
			t.Fatal(err)
		}
		if served {
			addr := e.Addrs[0]
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("the engine has not seen the connection close after 10s")
			}
			// OnClose runs just before the engine forgets the connection.
			for deadline := time.Now().Add(10 * time.Second); e.openConns() > 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the engine still holds a closed connection after 10s")
				}
			}
		}
		done := make(chan error, 1)
		go func() { done <- e.Shutdown(context.Background()) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Shutdown (served a connection: %v): %v", served, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Shutdown of an engine with no connection open (served one: %v) has not returned after 10s", served)
		}
	}
}
