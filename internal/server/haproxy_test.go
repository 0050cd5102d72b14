package server_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/server"
)

// TestProxyProtocolHAProxy: the real sender. HAProxy in TCP mode with
// send-proxy-v2, as docs/operations.md sets it up, in front of a relay:
// its health checks arrive as LOCAL headers and succeed, each client is
// counted under its own address (at the cap accepted, past it refused),
// and every slot is released when the clients leave. Skipped where
// haproxy is not installed.
func TestProxyProtocolHAProxy(t *testing.T) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy is not installed")
	}
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{
		Server: server.Config{TrustedProxies: []string{"127.0.0.9"}, ProxyProtocol: true, MaxConnectionsPerIP: 2},
	})
	// A free port for HAProxy's frontend.
	ln, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	front := ln.Addr().String()
	ln.Close()
	cfg := strings.Join([]string{
		"defaults",
		"    mode tcp",
		"    timeout connect 5s",
		"    timeout client 1h",
		"    timeout server 1h",
		"    timeout check 5s", // a check slowed by -race is not a failure
		"frontend relay",
		"    bind " + front,
		"    default_backend petrel",
		"backend petrel",
		"    balance leastconn",
		"    source 127.0.0.9", // HAProxy's address, as the relay sees it
		"    option httpchk",
		"    http-check send meth GET uri / ver HTTP/1.1 hdr Host relay.example.com",
		"    http-check expect status 200",
		"    default-server check inter 200ms rise 1 fall 3 send-proxy-v2",
		"    server n1 " + r.Server.Addr().String(),
		"",
	}, "\n")
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-db", "-f", path)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("haproxy's output:\n%s", out.String())
		}
	})
	// The server is up once a health check got through.
	waitFor(t, "HAProxy's first health check", func() bool { return proxyStats(r).Local >= 2 })
	h := &hop{URL: "ws://" + front}
	var open []*relaytest.Client
	for _, from := range []string{"127.0.0.5", "127.0.0.5", "127.0.0.6"} {
		c, err := dialHop(t, h, from, nil)
		if err != nil {
			t.Fatalf("from %s through HAProxy: %v", from, err)
		}
		works(t, c)
		open = append(open, c)
	}
	_, err = dialHop(t, h, "127.0.0.5", nil)
	refusedAtTCP(t, "a third client from 127.0.0.5 through HAProxy", err)
	if v := r.Stats().LimitTrips["max_connections_per_ip"]; v != 1 {
		t.Fatalf("max_connections_per_ip %d, want 1", v)
	}
	st := proxyStats(r)
	if st.Forwarded != 3 || st.Untrusted+st.Missing+st.Invalid != 0 {
		t.Fatalf("proxy_protocol %+v, want 3 forwarded and no refusal", st)
	}
	for _, c := range open {
		c.Close()
	}
	// Health checks go on meanwhile: wait for the clients' slots only.
	waitFor(t, "the clients' slots released", func() bool {
		_, addrs, proxied := r.Server.SlotTable()
		return addrs == 0 && proxied == 0
	})
}
