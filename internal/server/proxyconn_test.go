package server_test

// The PROXY protocol end to end (server.proxy_protocol): clients reach a
// real relay through a TCP hop that starts each connection with a PROXY
// header, as HAProxy in TCP mode with send-proxy-v2 does.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/server"
)

// v2Header is a PROXY v2 header for a TCP client at src (IPv4 or IPv6),
// with tlv bytes of TLVs after the addresses.
func v2Header(src string, tlv int) []byte {
	s := netip.MustParseAddrPort(src)
	var body []byte
	fam := byte(0x11) // IPv4, stream
	if s.Addr().Is4() {
		a := s.Addr().As4()
		body = append(append(body, a[:]...), 192, 0, 2, 200)
	} else {
		fam = 0x21 // IPv6, stream
		a, d := s.Addr().As16(), netip.MustParseAddr("2001:db8::200").As16()
		body = append(append(body, a[:]...), d[:]...)
	}
	body = binary.BigEndian.AppendUint16(body, s.Port())
	body = binary.BigEndian.AppendUint16(body, 443)
	if tlv > 0 {
		t := make([]byte, tlv) // one NOOP TLV
		t[0] = 0x04
		binary.BigEndian.PutUint16(t[1:], uint16(tlv-3))
		body = append(body, t...)
	}
	return v2Raw(0x21, fam, body)
}

// v2Raw is a v2 header with the given version and command byte, family
// and transport byte, and body.
func v2Raw(verCmd, fam byte, body []byte) []byte {
	b := []byte("\r\n\r\n\x00\r\nQUIT\n")
	b = append(b, verCmd, fam)
	b = binary.BigEndian.AppendUint16(b, uint16(len(body)))
	return append(b, body...)
}

// v2Local is the header of the proxy's own connection (a health check).
var v2Local = v2Raw(0x20, 0x00, nil)

// hop is a TCP forwarder in front of a relay, as HAProxy in TCP mode is:
// for each client it connects to the relay from its own address (from),
// writes the header header(client) gives, then copies both ways. With
// pieces, the header is written in parts split at those offsets, with a
// pause after each, so that the relay reads it in several.
type hop struct {
	URL    string // ws:// URL of the hop
	addr   string
	relay  string
	from   string
	header func(client netip.AddrPort) []byte
	pieces []int
}

func startHop(t *testing.T, r *relaytest.Relay, from string, header func(client netip.AddrPort) []byte, pieces ...int) *hop {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	h := &hop{URL: "ws://" + ln.Addr().String(), addr: ln.Addr().String(), relay: r.Server.Addr().String(), from: from, header: header, pieces: pieces}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go h.serve(c)
		}
	}()
	return h
}

// sending returns a header function that sends b whoever the client is.
func sending(b []byte) func(netip.AddrPort) []byte {
	return func(netip.AddrPort) []byte { return b }
}

func (h *hop) serve(client net.Conn) {
	defer client.Close()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(h.from)}, Timeout: relaytest.DefaultTimeout}
	up, err := d.Dial("tcp", h.relay)
	if err != nil {
		return
	}
	defer up.Close()
	if err := writePieces(up, h.header(netip.MustParseAddrPort(client.RemoteAddr().String())), h.pieces...); err != nil {
		return
	}
	go func() {
		_, _ = io.Copy(up, client)
		_ = up.(*net.TCPConn).CloseWrite()
	}()
	_, _ = io.Copy(client, up)
}

// writePieces writes b split at the offsets, pausing after each part.
func writePieces(w io.Writer, b []byte, at ...int) error {
	from := 0
	for _, to := range at {
		if _, err := w.Write(b[from:to]); err != nil {
			return err
		}
		from = to
		time.Sleep(20 * time.Millisecond)
	}
	_, err := w.Write(b[from:])
	return err
}

// dialHop connects a WebSocket client through h from the local address
// from ("" for the kernel's choice).
func dialHop(t *testing.T, h *hop, from string, header http.Header) (*relaytest.Client, error) {
	t.Helper()
	return relaytest.DialWith(t, h.URL, relaytest.DialOptions{LocalIP: from, Header: header})
}

// works checks that a WebSocket client gets answers.
func works(t *testing.T, c *relaytest.Client) {
	t.Helper()
	c.Req(fmt.Sprintf("s%d", time.Now().UnixNano()), `{"kinds":[1],"limit":1}`)
}

// refusedAtTCP checks that a dial failed without an HTTP answer: the
// relay closed the connection before reading a request.
func refusedAtTCP(t *testing.T, what string, err error) {
	t.Helper()
	var he *relaytest.HandshakeError
	if err == nil || errors.As(err, &he) {
		t.Fatalf("%s: %v, want the connection closed without an answer", what, err)
	}
}

// rawFrom connects to the relay from the local address from.
func rawFrom(t *testing.T, r *relaytest.Relay, from string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: relaytest.DefaultTimeout}
	c, err := d.Dial("tcp", r.Server.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// expectClosed checks that the relay closes c without sending anything.
func expectClosed(t *testing.T, what string, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(relaytest.DefaultTimeout))
	n, err := c.Read(make([]byte, 1))
	var ne net.Error
	if n != 0 || err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("%s: read %d bytes, %v; want the connection closed", what, n, err)
	}
}

// waitFor polls cond until it holds; the timeout is a hang guard.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(relaytest.DefaultTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitReleased waits until no connection holds a slot and the slot table
// is empty.
func waitReleased(t *testing.T, r *relaytest.Relay) {
	t.Helper()
	waitFor(t, "every slot released", func() bool {
		conns, addrs, proxied := r.Server.SlotTable()
		return r.Server.StatsDoc().SlotsActive == 0 && conns == 0 && addrs == 0 && proxied == 0
	})
}

func proxyStats(r *relaytest.Relay) server.ProxyProtocolStats {
	return r.Server.StatsDoc().ProxyProtocol
}

// TestProxyProtocolClients: behind a trusted proxy sending PROXY headers,
// each connection is its client's: the per-address cap applies to the
// header's address (IPv6 by /64), at the cap accepted and past it
// refused; the write policy sees it; and every slot is released.
func TestProxyProtocolClients(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{
		Server: server.Config{TrustedProxies: []string{"127.0.0.1"}, ProxyProtocol: true, MaxConnectionsPerIP: 2},
		Policy: policy.Config{BlockedIPs: []string{"203.0.113.66"}},
	})
	via := func(src string) *hop { return startHop(t, r, "127.0.0.1", sending(v2Header(src, 0))) }
	dial := func(h *hop) *relaytest.Client {
		t.Helper()
		c, err := dialHop(t, h, "", nil)
		if err != nil {
			t.Fatalf("dial through the hop: %v", err)
		}
		works(t, c)
		return c
	}
	var open []*relaytest.Client
	rejected := func() int64 { return r.Stats().ConnectionsRejected }
	perIP := func() int64 { return r.Stats().LimitTrips["max_connections_per_ip"] }

	// Two clients of 203.0.113.5 reach the cap; the third is refused
	// when its header is read, as a direct client is at accept.
	a := via("203.0.113.5:4711")
	a1 := dial(a)
	open = append(open, a1, dial(a))
	_, err := dialHop(t, a, "", nil)
	refusedAtTCP(t, "third connection of 203.0.113.5", err)
	if rejected() != 1 || perIP() != 1 {
		t.Fatalf("connections_rejected %d, max_connections_per_ip %d; want 1, 1", rejected(), perIP())
	}

	// IPv6 clients count by /64.
	open = append(open, dial(via("[2001:db8::1]:1")), dial(via("[2001:db8::2]:1")))
	_, err = dialHop(t, via("[2001:db8::3]:1"), "", nil)
	refusedAtTCP(t, "a third client in 2001:db8::/64", err)
	open = append(open, dial(via("[2001:db8:0:1::1]:1")))
	if perIP() != 2 {
		t.Fatalf("max_connections_per_ip %d, want 2", perIP())
	}

	// The client's real address, as HAProxy sends it: 127.0.0.5.
	actual := startHop(t, r, "127.0.0.1", func(client netip.AddrPort) []byte { return v2Header(client.String(), 0) })
	for range 2 {
		c, err := dialHop(t, actual, "127.0.0.5", nil)
		if err != nil {
			t.Fatal(err)
		}
		works(t, c)
		open = append(open, c)
	}
	_, err = dialHop(t, actual, "127.0.0.5", nil)
	refusedAtTCP(t, "a third connection from 127.0.0.5", err)

	// Version 1, and a version 2 header with TLVs read in four parts.
	open = append(open,
		dial(startHop(t, r, "127.0.0.1", sending([]byte("PROXY TCP4 198.51.100.7 192.0.2.200 4711 443\r\n")))),
		dial(startHop(t, r, "127.0.0.1", sending(v2Header("203.0.113.8:1", 200)), 5, 20, 100)),
		dial(startHop(t, r, "127.0.0.1", sending([]byte("PROXY TCP6 2001:db8:1::1 2001:db8::200 4711 443\r\n")), 3, 30)),
	)

	// The write policy sees the header's address.
	blocked, err := dialHop(t, via("203.0.113.66:1"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := blocked.Read(); m.Type != "NOTICE" || !strings.HasPrefix(m.Message, "blocked:") {
		t.Fatalf("blocked client address: got %s %q", m.Type, m.Message)
	}

	if st := proxyStats(r); st != (server.ProxyProtocolStats{Forwarded: 11}) {
		t.Fatalf("proxy_protocol %+v, want 11 forwarded and nothing else", st)
	}

	// A closed connection frees its client's slot.
	a1.Close()
	waitFor(t, "203.0.113.5's slot", func() bool {
		c, err := dialHop(t, a, "", nil)
		if err != nil {
			return false
		}
		works(t, c)
		c.Close()
		return true
	})
	for _, c := range open {
		c.Close()
	}
	blocked.Close()
	waitReleased(t, r)
}

// TestProxyProtocolLocal: a LOCAL header (the proxy's health checks)
// leaves the connection the proxy's own, as does a header naming a
// trusted proxy (a proxy in front of the balancer): their WebSockets take
// their client from real_ip_header, at the upgrade.
func TestProxyProtocolLocal(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{
		Server: server.Config{TrustedProxies: []string{"127.0.0.1", "10.0.0.0/8"}, ProxyProtocol: true, MaxConnectionsPerIP: 1},
	})
	local := startHop(t, r, "127.0.0.1", sending(v2Local))
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: relaytest.DefaultTimeout}
	req, _ := http.NewRequest(http.MethodGet, "http://"+local.addr+"/", nil)
	req.Header.Set("Accept", "application/nostr+json")
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"supported_nips"`) {
		t.Fatalf("health check: %s %q", res.Status, body)
	}

	// A WebSocket over a LOCAL connection: the header names the client.
	xff := func(a string) http.Header { return http.Header{"X-Forwarded-For": {a}} }
	c1, err := dialHop(t, local, "", xff("203.0.113.9"))
	if err != nil {
		t.Fatal(err)
	}
	works(t, c1)
	_, err = dialHop(t, local, "", xff("203.0.113.9"))
	var he *relaytest.HandshakeError
	if !errors.As(err, &he) || he.Status != http.StatusTooManyRequests {
		t.Fatalf("second WebSocket of 203.0.113.9 over LOCAL: %v, want HTTP 429", err)
	}
	// Without the header: counted under the proxy's address.
	c2, err := dialHop(t, local, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	works(t, c2)
	if v := r.Server.StatsDoc().ProxyHeaderMissing; v != 1 {
		t.Fatalf("proxy_header_missing %d, want 1", v)
	}

	// The header names 10.1.2.3, a trusted proxy: its client is the one
	// in X-Forwarded-For.
	chain := startHop(t, r, "127.0.0.1", sending(v2Header("10.1.2.3:1", 0)))
	c3, err := dialHop(t, chain, "", xff("203.0.113.10"))
	if err != nil {
		t.Fatal(err)
	}
	works(t, c3)
	_, err = dialHop(t, chain, "", xff("203.0.113.10"))
	if !errors.As(err, &he) || he.Status != http.StatusTooManyRequests {
		t.Fatalf("second WebSocket of 203.0.113.10 behind 10.1.2.3: %v, want HTTP 429", err)
	}
	// Headers without a usable client address leave the connection the
	// proxy's too: v1 UNKNOWN, v2 of the UNIX family.
	unknown := startHop(t, r, "127.0.0.1", sending([]byte("PROXY UNKNOWN\r\n")))
	c4, err := dialHop(t, unknown, "", xff("203.0.113.11"))
	if err != nil {
		t.Fatal(err)
	}
	works(t, c4)
	_, err = dialHop(t, unknown, "", xff("203.0.113.11"))
	if !errors.As(err, &he) || he.Status != http.StatusTooManyRequests {
		t.Fatalf("second WebSocket of 203.0.113.11 after PROXY UNKNOWN: %v, want HTTP 429", err)
	}
	unix := startHop(t, r, "127.0.0.1", sending(v2Raw(0x21, 0x31, make([]byte, 216))))
	res, err = hc.Get("http://" + unix.addr + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/stats after a UNIX-family header: %s", res.Status)
	}
	if st := proxyStats(r); st != (server.ProxyProtocolStats{Forwarded: 2, Local: 4, Unspec: 3}) {
		t.Fatalf("proxy_protocol %+v, want 2 forwarded, 4 local and 3 unspec", st)
	}
	if v := r.Stats().LimitTrips["max_connections_per_ip"]; v != 3 {
		t.Fatalf("max_connections_per_ip %d, want 3", v)
	}
	c1.Close()
	c2.Close()
	c3.Close()
	c4.Close()
	waitReleased(t, r)
}

// TestProxyProtocolRefused: a PROXY header from a peer that is not a
// trusted proxy, a trusted proxy's connection without one or with a
// malformed one, and one whose header does not arrive within
// header_timeout are closed, each counted; every slot is released; and
// the counters reach /metrics.
func TestProxyProtocolRefused(t *testing.T) {
	t.Parallel()
	// header_timeout is short so the stalled cases end soon, but not so
	// short that a loaded machine stalls a complete header past it (300
	// ms did once, under -race at load 60: the /metrics fetch below was
	// closed before its header was read).
	r := relaytest.Start(t, relaytest.Options{
		Server: server.Config{TrustedProxies: []string{"127.0.0.1"}, ProxyProtocol: true, HeaderTimeout: 1500 * time.Millisecond},
	})

	// Untrusted: 127.0.0.2 may not name a client, in either version.
	_, err := dialHop(t, startHop(t, r, "127.0.0.2", sending(v2Header("203.0.113.5:1", 0))), "", nil)
	refusedAtTCP(t, "a v2 header from 127.0.0.2", err)
	_, err = dialHop(t, startHop(t, r, "127.0.0.2", sending([]byte("PROXY TCP4 203.0.113.5 192.0.2.200 1 443\r\n")), 3), "", nil)
	refusedAtTCP(t, "a v1 header from 127.0.0.2", err)
	// Its clients without a header are served, one whose first read is
	// "P" (the start of a v1 signature) included.
	c, err := relaytest.DialWith(t, r.URL, relaytest.DialOptions{LocalIP: "127.0.0.2"})
	if err != nil {
		t.Fatal(err)
	}
	works(t, c)
	c.Close()
	raw := rawFrom(t, r, "127.0.0.2")
	if err := writePieces(raw, []byte("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"), 1); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(raw), nil)
	if err != nil || res.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("a direct POST, its first byte read alone: %v %v; want 405", res, err)
	}
	raw.Close()

	// Missing: the trusted proxy's connection starts with a request.
	raw = rawFrom(t, r, "127.0.0.1")
	if _, err := io.WriteString(raw, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, "a trusted proxy's request without a header", raw)

	// Invalid: version 3; a v1 line past 107 bytes.
	raw = rawFrom(t, r, "127.0.0.1")
	if _, err := raw.Write(v2Raw(0x31, 0x11, make([]byte, 12))); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, "a version 3 header", raw)
	raw = rawFrom(t, r, "127.0.0.1")
	if _, err := io.WriteString(raw, "PROXY UNKNOWN "+strings.Repeat("x", 100)); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, "a v1 line of 114 bytes", raw)

	// Incomplete: part of a header, then nothing until header_timeout;
	// nothing at all; part of one, then the proxy closes.
	raw = rawFrom(t, r, "127.0.0.1")
	if _, err := raw.Write(v2Header("203.0.113.5:1", 0)[:20]); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, "a header stalled after 20 bytes", raw)
	expectClosed(t, "a connection that sends nothing", rawFrom(t, r, "127.0.0.1"))
	raw = rawFrom(t, r, "127.0.0.1")
	if _, err := raw.Write(v2Header("203.0.113.5:1", 0)[:10]); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	// A whole header and then no request: the header counts, the
	// request head's deadline closes it.
	raw = rawFrom(t, r, "127.0.0.1")
	if _, err := raw.Write(v2Header("203.0.113.5:1", 0)); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, "a header and no request", raw)

	want := server.ProxyProtocolStats{Forwarded: 1, Untrusted: 2, Missing: 1, Invalid: 2, Incomplete: 3}
	waitFor(t, "the incomplete headers counted", func() bool { return proxyStats(r).Incomplete == want.Incomplete })
	if st := proxyStats(r); st != want {
		t.Fatalf("proxy_protocol %+v, want %+v", st, want)
	}
	if v := r.Stats().ConnectionsRejected; v != 0 {
		t.Fatalf("connections_rejected %d: no connection limit was reached", v)
	}
	waitReleased(t, r)

	// The counters in /metrics, fetched as a health check would be.
	local := startHop(t, r, "127.0.0.1", sending(v2Local))
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: relaytest.DefaultTimeout}
	res, err = hc.Get("http://" + local.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, line := range []string{
		`petrel_proxy_protocol_headers_total{command="forwarded"} 1`,
		`petrel_proxy_protocol_headers_total{command="local"} 1`,
		`petrel_proxy_protocol_headers_total{command="unspec"} 0`,
		`petrel_proxy_protocol_refused_total{reason="untrusted"} 2`,
		`petrel_proxy_protocol_refused_total{reason="missing"} 1`,
		`petrel_proxy_protocol_refused_total{reason="invalid"} 2`,
		`petrel_proxy_protocol_refused_total{reason="incomplete"} 3`,
	} {
		if !strings.Contains(string(body), line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	waitReleased(t, r)
}

// TestProxyProtocolNeedsTrustedProxies: the PROXY protocol without a
// trusted proxy is a configuration error.
func TestProxyProtocolNeedsTrustedProxies(t *testing.T) {
	_, err := server.New(server.Config{ProxyProtocol: true}, server.Options{Relay: relaytest.Start(t, relaytest.Options{}).Relay})
	if err == nil || !strings.Contains(err.Error(), "trusted_proxies") {
		t.Fatalf("New: %v, want an error naming trusted_proxies", err)
	}
}
