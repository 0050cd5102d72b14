package server

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func TestForwardedClient(t *testing.T) {
	proxies, err := parseTrusted([]string{"127.0.0.1", "10.0.0.0/8", " ::1 ", "::ffff:192.0.2.1"})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{proxies: proxies}
	for _, c := range []struct {
		values []string
		want   string // "" : none
	}{
		{nil, ""},
		{[]string{""}, ""},
		{[]string{"203.0.113.5"}, "203.0.113.5"},
		{[]string{" 203.0.113.5 , 10.1.2.3"}, "203.0.113.5"},                // the trusted hop is skipped
		{[]string{"198.51.100.1, 203.0.113.5"}, "203.0.113.5"},              // rightmost untrusted: the left one may be forged
		{[]string{"198.51.100.1", "203.0.113.5, 127.0.0.1"}, "203.0.113.5"}, // several header lines
		{[]string{"10.0.0.1, 127.0.0.1"}, "10.0.0.1"},                       // all trusted: the leftmost
		{[]string{"203.0.113.5:4711"}, "203.0.113.5"},
		{[]string{"[2001:db8::1]:4711"}, "2001:db8::1"},
		{[]string{"2001:db8::1"}, "2001:db8::1"},
		{[]string{"::ffff:203.0.113.5"}, "203.0.113.5"},
		{[]string{"192.0.2.1, 10.0.0.1"}, "192.0.2.1"}, // 192.0.2.1 trusted (mapped form): leftmost
		{[]string{"unknown"}, ""},
		{[]string{"203.0.113.5, garbage"}, ""}, // the entry that counts is not an address
		{[]string{"garbage, 203.0.113.5"}, "203.0.113.5"},
		{[]string{"fe80::1%eth0"}, ""},
	} {
		a, ok := s.forwardedClient(c.values)
		got := ""
		if ok {
			got = a.String()
		}
		if got != c.want {
			t.Errorf("forwardedClient(%q) = %q, want %q", c.values, got, c.want)
		}
	}
	if !s.trusted(netip.MustParseAddr("::ffff:127.0.0.1")) || s.trusted(netip.MustParseAddr("127.0.0.2")) || s.trusted(netip.Addr{}) {
		t.Error("trusted: wrong answer for a mapped trusted address, an untrusted one or none")
	}
	for _, bad := range []string{"localhost", "10.0.0.0/33", ""} {
		if _, err := parseTrusted([]string{bad}); err == nil {
			t.Errorf("parseTrusted(%q) accepted", bad)
		}
	}
}

// TestSlotsAttach: a proxy's connection takes only a global slot at
// accept, and its per-address part at attach, at and past the cap.
func TestSlotsAttach(t *testing.T) {
	sl := newSlots(0, 2, 0)
	a := netip.MustParseAddr("203.0.113.5")
	var conns [4]fakeConn
	for i := range conns {
		if ok, _ := sl.acquire(&conns[i], netip.Addr{}); !ok {
			t.Fatalf("global slot %d refused", i)
		}
	}
	if !sl.attach(&conns[0], a) || !sl.attach(&conns[1], a) {
		t.Fatal("attach at the cap refused")
	}
	if sl.attach(&conns[2], a) {
		t.Fatal("attach past the cap accepted")
	}
	if !sl.attach(&conns[1], a) { // again, same address: no change
		t.Fatal("re-attach to the same address refused")
	}
	if ok, perIP := sl.acquire(&fakeConn{}, a); ok || !perIP {
		t.Fatal("a direct connection from a full address accepted")
	}
	sl.detach(&conns[0])
	if !sl.attach(&conns[2], a) {
		t.Fatal("attach after a detach refused")
	}
	sl.release(&conns[1])
	sl.release(&conns[2])
	sl.release(&conns[3])
	sl.release(&conns[3]) // twice: no effect
	if sl.active() != 1 || len(sl.perIP) != 0 {
		t.Fatalf("after release: %d active, %d addresses", sl.active(), len(sl.perIP))
	}
}

// TestSlotsHeaderRead: a trusted proxy's connection awaiting its PROXY
// header takes the per-address slot of the client the header names, at
// and past the cap; or none, for a trusted client or no client; and the
// release reports a header still awaited.
func TestSlotsHeaderRead(t *testing.T) {
	sl := newSlots(0, 2, 0)
	a := netip.MustParseAddr("2001:db8::1")
	var conns [6]fakeConn
	for i := range conns {
		if ok, _ := sl.acquire(&conns[i], netip.Addr{}); !ok {
			t.Fatalf("global slot %d refused", i)
		}
		sl.expectHeader(&conns[i])
	}
	f := func(c *fakeConn, src netip.Addr, perAddr, wantOK, wantAtCap bool) {
		t.Helper()
		ok, atCap := sl.headerRead(c, src, perAddr)
		if ok != wantOK || atCap != wantAtCap {
			t.Fatalf("headerRead(conn %d, %v, %v) = %v, %v; want %v, %v", c.id, src, perAddr, ok, atCap, wantOK, wantAtCap)
		}
		got, named := sl.source(c)
		if want := ok && src.IsValid(); named != want || (want && got != src) {
			t.Fatalf("conn %d: source %v, %v after headerRead(%v)", c.id, got, named, src)
		}
	}
	for i := range conns {
		conns[i].id = i
	}
	f(&conns[0], a, true, true, false)
	f(&conns[1], netip.MustParseAddr("2001:db8::2"), true, true, false) // the same /64: at the cap
	f(&conns[2], netip.MustParseAddr("2001:db8::3"), true, false, true) // past it
	f(&conns[3], netip.MustParseAddr("10.1.2.3"), false, true, false)   // a trusted client: no per-address part
	f(&conns[4], netip.Addr{}, false, true, false)                      // LOCAL
	if len(sl.perIP) != 1 || sl.perIP[ipKey(a)].n != 2 {
		t.Fatalf("per-address counts %v", sl.perIP)
	}
	// conns[5] still awaits its header; the others do not.
	for i := range conns {
		src, awaiting := sl.release(&conns[i])
		if awaiting != (i == 5) || src.IsValid() != (i <= 1 || i == 3) {
			t.Fatalf("release(conn %d) = %v, %v", i, src, awaiting)
		}
	}
	if _, awaiting := sl.release(&conns[5]); awaiting {
		t.Fatal("a second release reported the header awaited")
	}
	if ok, _ := sl.headerRead(&conns[0], a, true); ok {
		t.Fatal("headerRead accepted a released connection")
	}
	if sl.active() != 0 || len(sl.perIP) != 0 || len(sl.owners) != 0 || len(sl.proxied) != 0 {
		t.Fatalf("after release: %d active, %d addresses, %d owners, %d proxied", sl.active(), len(sl.perIP), len(sl.owners), len(sl.proxied))
	}
}

// fakeConn is a distinct net.Conn for the slot table (never used for I/O).
type fakeConn struct {
	net.Conn
	id int
}

// FuzzForwardedClient: any header value gives an address that appears in
// it, or none, without panicking.
func FuzzForwardedClient(f *testing.F) {
	for _, v := range []string{"203.0.113.5", "198.51.100.1, 10.0.0.1", "[2001:db8::1]:4711", "unknown", ",,", "::ffff:1.2.3.4, 127.0.0.1"} {
		f.Add(v)
	}
	proxies, _ := parseTrusted([]string{"127.0.0.1", "10.0.0.0/8"})
	s := &Server{proxies: proxies}
	f.Fuzz(func(t *testing.T, v string) {
		a, ok := s.forwardedClient([]string{v})
		if !ok {
			return
		}
		if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
			t.Fatalf("%q: got %v", v, a)
		}
		found := false
		for _, e := range strings.Split(v, ",") {
			if b, ok := parseForwarded(strings.TrimSpace(e)); ok && b == a {
				found = true
			}
		}
		if !found {
			t.Fatalf("%q: %v is not one of its entries", v, a)
		}
	})
}

// TestProxiedClientHeader: the client address comes from the configured
// header only; without a usable one the proxy's own address is used and
// counted.
func TestProxiedClientHeader(t *testing.T) {
	peer := netip.MustParseAddr("127.0.0.1")
	s := &Server{cfg: Config{RealIPHeader: "X-Real-IP"}.Normalize()}
	s.proxies, _ = parseTrusted([]string{"127.0.0.1"})
	req := func(h map[string]string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		for k, v := range h {
			r.Header.Set(k, v)
		}
		return r
	}
	if got := s.proxiedClient(peer, req(map[string]string{"X-Real-IP": "203.0.113.5", "X-Forwarded-For": "198.51.100.1"})); got.String() != "203.0.113.5" {
		t.Fatalf("X-Real-IP configured: got %v", got)
	}
	if got := s.proxiedClient(peer, req(map[string]string{"X-Forwarded-For": "198.51.100.1"})); got != peer || s.proxyNoClient.Load() != 1 {
		t.Fatalf("only X-Forwarded-For sent: got %v, missing %d", got, s.proxyNoClient.Load())
	}
	if got := s.proxiedClient(peer, req(map[string]string{"X-Real-IP": "not an address"})); got != peer || s.proxyNoClient.Load() != 2 {
		t.Fatalf("unusable X-Real-IP: got %v, missing %d", got, s.proxyNoClient.Load())
	}
	if d := (Config{}).Normalize().RealIPHeader; d != "X-Forwarded-For" {
		t.Fatalf("default real_ip_header %q", d)
	}
}
