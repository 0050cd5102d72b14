package server_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/server"
)

// TestConnectRate: policy.connect_rate limits the connections one client
// address opens, however it arrives: directly (closed at accept), behind
// a trusted proxy's X-Forwarded-For (429 with the "rate-limited:"
// message) or its PROXY header (closed when the header is read). At the
// burst, accepted; one past it, refused; other addresses untouched. The
// rate refills a token in 100 s, so nothing refills while it runs.
func TestConnectRate(t *testing.T) {
	t.Parallel()
	pc := policy.Config{ConnectRate: 0.01, ConnectBurst: 3}
	r := relaytest.Start(t, relaytest.Options{Server: server.Config{TrustedProxies: []string{"127.0.0.1"}}, Policy: pc})
	trips := func() int64 { return r.Stats().LimitTrips["connect_rate_ip"] }
	dial := func(what string, o relaytest.DialOptions) {
		t.Helper()
		c, err := relaytest.DialWith(t, r.URL, o)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		works(t, c)
	}

	// Directly, from 127.0.0.2.
	for range 3 {
		dial("direct, within the burst", relaytest.DialOptions{LocalIP: "127.0.0.2"})
	}
	_, err := relaytest.DialWith(t, r.URL, relaytest.DialOptions{LocalIP: "127.0.0.2"})
	refusedAtTCP(t, "a 4th connection from 127.0.0.2", err)
	dial("another address", relaytest.DialOptions{LocalIP: "127.0.0.3"})
	if trips() != 1 || r.Stats().ConnectionsRejected != 1 {
		t.Fatalf("connect_rate_ip %d, connections_rejected %d; want 1, 1", trips(), r.Stats().ConnectionsRejected)
	}

	// Behind the proxy, by X-Forwarded-For (the proxy's own connections
	// take nothing).
	xff := func(client string) relaytest.DialOptions {
		return relaytest.DialOptions{LocalIP: "127.0.0.1", Header: http.Header{"X-Forwarded-For": {client}}}
	}
	for range 3 {
		dial("forwarded, within the burst", xff("203.0.113.5"))
	}
	_, err = relaytest.DialWith(t, r.URL, xff("203.0.113.5"))
	var he *relaytest.HandshakeError
	if !errors.As(err, &he) || he.Status != http.StatusTooManyRequests || !strings.Contains(he.Error(), "429") {
		t.Fatalf("a 4th forwarded connection of 203.0.113.5: %v, want HTTP 429", err)
	}
	dial("another forwarded address", xff("203.0.113.6"))

	if trips() != 2 || r.Stats().ConnectionsRejected != 2 {
		t.Fatalf("connect_rate_ip %d, connections_rejected %d; want 2, 2", trips(), r.Stats().ConnectionsRejected)
	}
	if st := r.Relay.PolicyStats().ConnectRateIP; st.Limited != 2 {
		t.Fatalf("policy.connect_rate_ip %+v, want 2 limited", st)
	}

	// Behind a proxy that sends PROXY headers (another relay: with
	// proxy_protocol on, the proxy's every connection sends one).
	r = relaytest.Start(t, relaytest.Options{Server: server.Config{TrustedProxies: []string{"127.0.0.1"}, ProxyProtocol: true}, Policy: pc})
	h := startHop(t, r, "127.0.0.1", sending(v2Header("198.51.100.7:4711", 0)))
	for range 3 {
		c, err := dialHop(t, h, "", nil)
		if err != nil {
			t.Fatalf("PROXY header, within the burst: %v", err)
		}
		works(t, c)
	}
	_, err = dialHop(t, h, "", nil)
	refusedAtTCP(t, "a 4th connection of 198.51.100.7 by PROXY header", err)

	if trips() != 1 || r.Stats().ConnectionsRejected != 1 {
		t.Fatalf("connect_rate_ip %d, connections_rejected %d; want 1, 1", trips(), r.Stats().ConnectionsRejected)
	}
}
