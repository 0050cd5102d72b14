package relay_test

// Reverse proxies: server.trusted_proxies and server.real_ip_header.

import (
	"errors"
	"net/http"
	"testing"

	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/server"
)

// TestTrustedProxy: connections from a trusted proxy (127.0.0.1 here)
// count, and are policed, under the client address it forwards; from any
// other peer the header is ignored.
func TestTrustedProxy(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{
		Server: server.Config{TrustedProxies: []string{"127.0.0.1"}, MaxConnectionsPerIP: 2},
		Policy: policy.Config{BlockedIPs: []string{"203.0.113.66"}},
	})
	from := func(local, xff string) relaytest.DialOptions {
		o := relaytest.DialOptions{LocalIP: local}
		if xff != "" {
			o.Header = http.Header{"X-Forwarded-For": {xff}}
		}
		return o
	}
	dial := func(o relaytest.DialOptions) *relaytest.Client {
		t.Helper()
		c, err := relaytest.DialWith(t, r.URL, o)
		if err != nil {
			t.Fatalf("dial from %s as %v: %v", o.LocalIP, o.Header, err)
		}
		return c
	}
	// Two clients of one forwarded address reach the per-IP cap (the
	// client is the rightmost address that is not a trusted proxy); the
	// third is refused with 429, and nothing else is disturbed.
	a1 := dial(from("127.0.0.1", "203.0.113.5"))
	a2 := dial(from("127.0.0.1", "198.51.100.9, 203.0.113.5"))
	_, err := relaytest.DialWith(t, r.URL, from("127.0.0.1", "203.0.113.5"))
	var he *relaytest.HandshakeError
	if !errors.As(err, &he) || he.Status != http.StatusTooManyRequests {
		t.Fatalf("third connection of 203.0.113.5: %v, want HTTP 429", err)
	}
	if v := trips(r, "max_connections_per_ip"); v != 1 {
		t.Fatalf("max_connections_per_ip = %d, want 1", v)
	}
	if v := r.Stats().ConnectionsRejected; v != 1 {
		t.Fatalf("connections_rejected = %d, want 1", v)
	}
	others := []*relaytest.Client{
		a1, a2,
		dial(from("127.0.0.1", "203.0.113.6")),
		dial(from("127.0.0.1", "203.0.113.7, 127.0.0.1")), // the proxy itself is skipped
		dial(from("127.0.0.1", "[2001:db8::1]:4711")),
		dial(from("127.0.0.1", "")), // no header: counted as the proxy
	}
	for _, c := range others {
		expectWorks(t, c)
	}
	if v := statsJSON(t, r)["proxy_header_missing"]; v != float64(1) {
		t.Fatalf("proxy_header_missing = %v, want 1", v)
	}
	// A closed connection frees its client's slot.
	a1.Close()
	waitFor(t, "203.0.113.5's slot", func() bool {
		c, err := relaytest.DialWith(t, r.URL, from("127.0.0.1", "203.0.113.5"))
		if err != nil {
			return false
		}
		expectWorks(t, c)
		return true
	})
	// The relay's policy sees the forwarded address.
	blocked := dial(from("127.0.0.1", "203.0.113.66"))
	if m := blocked.Read(); m.Type != "NOTICE" || m.Message != "blocked: your address is blocked by this relay" {
		t.Fatalf("blocked forwarded address: got %s", describe(m))
	}
	// Another peer's header is ignored: 127.0.0.2 is counted (and
	// checked) as itself, and refused at accept past the cap.
	before := trips(r, "max_connections_per_ip") // the wait above may have tripped it
	u1 := dial(from("127.0.0.2", "203.0.113.66"))
	u2 := dial(from("127.0.0.2", "203.0.113.8"))
	expectWorks(t, u1)
	expectWorks(t, u2)
	_, err = relaytest.DialWith(t, r.URL, from("127.0.0.2", "203.0.113.9"))
	if err == nil || errors.As(err, &he) {
		t.Fatalf("third connection from 127.0.0.2: %v, want the socket closed at accept", err)
	}
	if v := trips(r, "max_connections_per_ip"); v != before+1 {
		t.Fatalf("max_connections_per_ip = %d, want %d", v, before+1)
	}
}
