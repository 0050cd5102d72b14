package nbhttp

import (
	"net"
	"strings"
	"testing"
	"time"
)

// TestStartFailsWhenItCannotListen: Start on an address it cannot listen
// on (taken, malformed, a port out of range) returns the listener's
// error; it stopped the engine it had started and hung there. The
// 10-second bound detects a hang; it is not a timing.
func TestStartFailsWhenItCannotListen(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	f := func(addr, reason string) {
		t.Helper()
		e := NewEngine(Config{Network: "tcp", Addrs: []string{addr}, NPoller: 4})
		done := make(chan error, 1)
		go func() { done <- e.Start() }()
		select {
		case err := <-done:
			if err == nil {
				e.Stop()
				t.Fatalf("Start on %s: no error", addr)
			}
			if !strings.Contains(err.Error(), reason) {
				t.Fatalf("Start on %s: %v; want %q", addr, err, reason)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Start on %s has not returned after 10s", addr)
		}
	}
	for i := 0; i < 5; i++ {
		f(busy.Addr().String(), "address already in use")
		f("nonsense", "missing port in address")
		f("127.0.0.1:99999", "invalid port")
	}
}
