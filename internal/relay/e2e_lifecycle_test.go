package relay_test

// Connection lifecycle: many connect/REQ/close cycles, clean and abrupt,
// leave no goroutine, session, subscription, slot or queued byte behind.

import (
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/relaytest"
)

// TestConnectionCyclesReturnToBaseline is not parallel: it counts the
// process's goroutines (parallel tests only start after it).
func TestConnectionCyclesReturnToBaseline(t *testing.T) {
	r := relaytest.Start(t, relaytest.Options{})
	alice := relaytest.NewKey("cycles")
	seed(t, r, bigNotes(alice, 300, 2000, "cycle")) // a REQ for all streams ~600 KB
	host := strings.TrimPrefix(r.URL, "ws://")
	all := authorFilter(alice, "")
	one := authorFilter(alice, `"limit":1`)

	dropped := 0 // handshakes lost to the nbio descriptor-reuse race
	cycle := func(i int) {
		t.Helper()
		if i%10 == 9 { // a TCP connection that never upgrades
			conn, err := net.Dial("tcp", host)
			if err != nil {
				t.Fatal(err)
			}
			if i%20 == 19 {
				conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n")) // half a request
			}
			conn.Close()
			return
		}
		c, err := relaytest.DialWith(t, r.URL, relaytest.DialOptions{})
		if err != nil {
			// nbio v1.6.8 can drop a connection in its handshake when
			// another connection's socket dies at the same moment: a
			// write error closes that socket off the poller goroutine,
			// the accept reuses its descriptor number, and the poller
			// then applies the dead socket's pending EPOLLERR event to
			// the new connection (see the report). Retry, and count.
			dropped++
			if c, err = relaytest.DialWith(t, r.URL, relaytest.DialOptions{}); err != nil {
				t.Fatalf("cycle %d: dial: %v", i, err)
			}
		}
		switch i % 5 {
		case 0: // clean: REQ, EOSE, close frame
			c.Req("s", one)
			c.Close()
		case 1: // abrupt: TCP FIN without a close frame
			c.Req("s", one)
			c.Conn.UnderlyingConn().Close()
		case 2: // close frame while a big REQ is still streaming
			sendReq(t, c, "s", all)
			c.Close()
		case 3: // RST while a big REQ is streaming
			sendReq(t, c, "s", all)
			tc := c.Conn.UnderlyingConn().(*net.TCPConn)
			tc.SetLinger(0)
			tc.Close()
		case 4: // a live subscription and a pending event, then FIN
			sendReq(t, c, "live", one)
			c.SendRaw(`["EVENT",` + string(alice.Note("cycle").Raw) + `]`)
			c.Conn.UnderlyingConn().Close()
		}
	}
	// Warm up (lazily started goroutines), then take the baseline.
	for i := 0; i < 10; i++ {
		cycle(i)
	}
	settle(t, r)
	// The server keeps up to 64 handler goroutines waiting for the next
	// message (internal/server/handlers.go); a burst may leave more of
	// them than the warm-up did, so they are not counted.
	goroutines := func() int { return runtime.NumGoroutine() - r.Server.IdleHandlers() }
	base := goroutines()

	const n = 1000
	for i := 0; i < n; i++ {
		cycle(i)
	}
	settle(t, r)
	deadline := time.Now().Add(relaytest.DefaultTimeout)
	for goroutines() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines (less waiting handlers) after %d cycles, baseline %d\n%s", goroutines(), n, base, buf)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if dropped > n/100 {
		t.Fatalf("%d of %d handshakes failed", dropped, n)
	}
	st := r.Stats()
	if st.ConnectionsTotal < n-n/10 {
		t.Fatalf("connections_total = %d, want >= %d", st.ConnectionsTotal, n-n/10)
	}
	t.Logf("goroutines %d (baseline %d), connections_total %d, stored events sent %d, handshakes retried %d",
		goroutines(), base, st.ConnectionsTotal, st.StoredSent, dropped)
}

// settle waits until every connection is gone and all accounting is back
// to zero, and checks /stats agrees.
func settle(t *testing.T, r *relaytest.Relay) {
	t.Helper()
	waitFor(t, "connections and subscriptions to drain", func() bool {
		st := r.Stats()
		return st.ConnectionsActive == 0 && st.SubscriptionsActive == 0 && st.QueryBytesQueued == 0 && r.Relay.Sessions() == 0
	})
	waitFor(t, "connection slots to be released", func() bool { return slotsActive(t, r) == 0 })
	st := statsJSON(t, r)
	for _, k := range []string{"connections_active", "subscriptions_active", "query_bytes_queued"} {
		if v := st[k].(float64); v != 0 {
			t.Fatalf("/stats %s = %v, want 0", k, v)
		}
	}
}
