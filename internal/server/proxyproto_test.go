package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// proxyV2Header builds a version 2 header: byte 13 (version and command),
// byte 14 (family and transport), then body, whose length it states.
func proxyV2Header(verCmd, famTrans byte, body []byte) []byte {
	b := append([]byte(nil), proxyV2Sig...)
	b = append(b, verCmd, famTrans)
	b = binary.BigEndian.AppendUint16(b, uint16(len(body)))
	return append(b, body...)
}

// proxyV2Addrs is the address block of a header for src and dst (both
// IPv4 or both IPv6), then tlv bytes of TLVs.
func proxyV2Addrs(src, dst netip.AddrPort, tlv int) []byte {
	var b []byte
	if src.Addr().Is4() {
		s, d := src.Addr().As4(), dst.Addr().As4()
		b = append(append(b, s[:]...), d[:]...)
	} else {
		s, d := src.Addr().As16(), dst.Addr().As16()
		b = append(append(b, s[:]...), d[:]...)
	}
	b = binary.BigEndian.AppendUint16(b, src.Port())
	b = binary.BigEndian.AppendUint16(b, dst.Port())
	if tlv > 0 {
		// One TLV of type 0x04 (NOOP) filling tlv bytes.
		t := make([]byte, tlv)
		t[0] = 0x04
		binary.BigEndian.PutUint16(t[1:], uint16(tlv-3))
		b = append(b, t...)
	}
	return b
}

// proxyV2For is the header a proxy sends for a TCP client at src.
func proxyV2For(src string) []byte {
	s := netip.MustParseAddrPort(src)
	d := netip.AddrPortFrom(netip.MustParseAddr("192.0.2.200"), 443)
	fam := byte(proxyFamInet<<4 | proxyTransStream)
	if s.Addr().Is6() {
		d = netip.AddrPortFrom(netip.MustParseAddr("2001:db8::200"), 443)
		fam = proxyFamInet6<<4 | proxyTransStream
	}
	return proxyV2Header(0x20|proxyCmdProxy, fam, proxyV2Addrs(s, d, 0))
}

// proxyV2Local is the header of a proxy's own connection.
var proxyV2Local = proxyV2Header(0x20|proxyCmdLocal, proxyFamUnspec<<4|proxyTransUnspec, nil)

func TestParseProxyHeader(t *testing.T) {
	ok := func(name string, in []byte, cmd proxyCommand, src string, length int) {
		t.Helper()
		h, err := parseProxyHeader(in)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		var want netip.AddrPort
		if src != "" {
			want = netip.MustParseAddrPort(src)
		}
		if h.command != cmd || h.source != want || h.length != length {
			t.Errorf("%s: got command %d, source %v, length %d; want %d, %v, %d", name, h.command, h.source, h.length, cmd, want, length)
		}
	}
	bad := func(name string, in []byte, want error) {
		t.Helper()
		h, err := parseProxyHeader(in)
		if !errors.Is(err, want) {
			t.Errorf("%s: got %+v, %v; want %v", name, h, err, want)
		}
	}
	v4 := netip.MustParseAddrPort("203.0.113.5:4711")
	v6 := netip.MustParseAddrPort("[2001:db8::1]:4711")
	dst4 := netip.MustParseAddrPort("192.0.2.200:443")
	dst6 := netip.MustParseAddrPort("[2001:db8::200]:443")
	stream4 := byte(proxyFamInet<<4 | proxyTransStream)
	stream6 := byte(proxyFamInet6<<4 | proxyTransStream)
	const cmdProxy, cmdLocal = 0x20 | proxyCmdProxy, 0x20 | proxyCmdLocal

	// Version 2.
	ok("v2 IPv4", proxyV2For("203.0.113.5:4711"), proxyForward, "203.0.113.5:4711", 28)
	ok("v2 IPv4, then the request", append(proxyV2For("203.0.113.5:4711"), "GET / HTTP/1.1\r\n"...), proxyForward, "203.0.113.5:4711", 28)
	ok("v2 IPv6", proxyV2For("[2001:db8::1]:4711"), proxyForward, "[2001:db8::1]:4711", 52)
	ok("v2 IPv4-mapped IPv6", proxyV2For("[::ffff:203.0.113.5]:4711"), proxyForward, "203.0.113.5:4711", 52)
	ok("v2 IPv4 with TLVs", proxyV2Header(cmdProxy, stream4, proxyV2Addrs(v4, dst4, 40)), proxyForward, "203.0.113.5:4711", 68)
	ok("v2 IPv4, TLVs not read yet", proxyV2Header(cmdProxy, stream4, proxyV2Addrs(v4, dst4, 40))[:28], proxyForward, "203.0.113.5:4711", 68)
	ok("v2 LOCAL", proxyV2Local, proxyLocal, "", 16)
	ok("v2 LOCAL with addresses", proxyV2Header(cmdLocal, stream4, proxyV2Addrs(v4, dst4, 0)), proxyLocal, "", 28)
	ok("v2 LOCAL, addresses not read yet", proxyV2Header(cmdLocal, stream4, proxyV2Addrs(v4, dst4, 0))[:16], proxyLocal, "", 28)
	ok("v2 UNSPEC family", proxyV2Header(cmdProxy, proxyFamUnspec<<4|proxyTransStream, nil), proxyUnspec, "", 16)
	ok("v2 UNSPEC transport", proxyV2Header(cmdProxy, proxyFamInet<<4|proxyTransUnspec, proxyV2Addrs(v4, dst4, 0)), proxyUnspec, "", 28)
	ok("v2 UNIX family", proxyV2Header(cmdProxy, proxyFamUnix<<4|proxyTransStream, make([]byte, 216)), proxyUnspec, "", 232)
	ok("v2 IPv4 datagram", proxyV2Header(cmdProxy, proxyFamInet<<4|proxyTransDgram, proxyV2Addrs(v4, dst4, 0)), proxyUnspec, "", 28)
	bad("v2 unknown family", proxyV2Header(cmdProxy, 0x41, proxyV2Addrs(v4, dst4, 0)), errProxyInvalid)
	bad("v2 unknown family, LOCAL", proxyV2Header(cmdLocal, 0x40, nil), errProxyInvalid)
	bad("v2 unknown transport", proxyV2Header(cmdProxy, 0x13, proxyV2Addrs(v4, dst4, 0)), errProxyInvalid)
	bad("v2 version 1", proxyV2Header(0x10|proxyCmdProxy, stream4, proxyV2Addrs(v4, dst4, 0)), errProxyInvalid)
	bad("v2 version 3", proxyV2Header(0x30|proxyCmdProxy, stream4, proxyV2Addrs(v4, dst4, 0)), errProxyInvalid)
	bad("v2 command 2", proxyV2Header(0x22, stream4, proxyV2Addrs(v4, dst4, 0)), errProxyInvalid)

	// The address block: at the size its family needs (accepted), one
	// byte short (refused); the length at its most (the protocol's
	// bound: 16 bits), the TLVs still to come.
	ok("v2 IPv4, 12 bytes of addresses", proxyV2Header(cmdProxy, stream4, proxyV2Addrs(v4, dst4, 0)[:12]), proxyForward, "203.0.113.5:4711", 28)
	bad("v2 IPv4, 11 bytes of addresses", proxyV2Header(cmdProxy, stream4, proxyV2Addrs(v4, dst4, 0)[:11]), errProxyInvalid)
	ok("v2 IPv6, 36 bytes of addresses", proxyV2Header(cmdProxy, stream6, proxyV2Addrs(v6, dst6, 0)[:36]), proxyForward, "[2001:db8::1]:4711", 52)
	bad("v2 IPv6, 35 bytes of addresses", proxyV2Header(cmdProxy, stream6, proxyV2Addrs(v6, dst6, 0)[:35]), errProxyInvalid)
	long := proxyV2Header(cmdProxy, stream4, proxyV2Addrs(v4, dst4, 0xffff-12))
	ok("v2 length 65535", long, proxyForward, "203.0.113.5:4711", 16+0xffff)
	ok("v2 length 65535, TLVs not read yet", long[:28], proxyForward, "203.0.113.5:4711", 16+0xffff)

	// Truncated: every strict prefix of what the parser needs.
	for _, full := range [][]byte{proxyV2For("203.0.113.5:4711"), proxyV2For("[2001:db8::1]:4711"), proxyV2Local} {
		for n := 0; n < len(full); n++ {
			bad("v2 truncated", full[:n], errProxyShort)
		}
	}

	// Not a header.
	bad("a request", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), errProxyNone)
	bad("a request after an empty line", []byte("\r\nGET / HTTP/1.1\r\n"), errProxyNone)
	bad("two empty lines, then a request", []byte("\r\n\r\nGET / HTTP/1.1\r\n"), errProxyNone)
	bad("v2 signature, last byte wrong", append(append([]byte(nil), proxyV2Sig[:11]...), '\r', 0x21, 0x11, 0, 12), errProxyNone)
	bad("v2 signature, first byte wrong", append([]byte{'\n'}, proxyV2For("203.0.113.5:4711")[1:]...), errProxyNone)
	bad("PROXY without its space", []byte("PROXYTCP4 1.2.3.4 5.6.7.8 1 2\r\n"), errProxyNone)
	bad("lower case", []byte("proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n"), errProxyNone)
	bad("an empty line's start", []byte("\r\n"), errProxyShort)
	bad("PRO", []byte("PRO"), errProxyShort)

	// Version 1.
	ok("v1 TCP4", []byte("PROXY TCP4 203.0.113.5 192.0.2.200 4711 443\r\nGET /"), proxyForward, "203.0.113.5:4711", 45)
	ok("v1 TCP6", []byte("PROXY TCP6 2001:db8::1 2001:db8::200 4711 443\r\n"), proxyForward, "[2001:db8::1]:4711", 47)
	ok("v1 TCP6, IPv4-mapped", []byte("PROXY TCP6 ::ffff:203.0.113.5 ::1 4711 443\r\n"), proxyForward, "203.0.113.5:4711", 44)
	ok("v1 TCP4, ports 0 and 65535", []byte("PROXY TCP4 203.0.113.5 192.0.2.200 0 65535\r\n"), proxyForward, "203.0.113.5:0", 44)
	ok("v1 UNKNOWN", []byte("PROXY UNKNOWN\r\n"), proxyUnspec, "", 15)
	ok("v1 UNKNOWN with addresses", []byte("PROXY UNKNOWN whatever follows\r\n"), proxyUnspec, "", 32)
	bad("v1 without CR", []byte("PROXY TCP4 203.0.113.5 192.0.2.200 4711 443\n"), errProxyInvalid)
	bad("v1 TCP4 with IPv6", []byte("PROXY TCP4 2001:db8::1 2001:db8::200 4711 443\r\n"), errProxyInvalid)
	bad("v1 TCP4 with IPv4-mapped", []byte("PROXY TCP4 ::ffff:203.0.113.5 192.0.2.200 4711 443\r\n"), errProxyInvalid)
	bad("v1 TCP6 with IPv4", []byte("PROXY TCP6 203.0.113.5 192.0.2.200 4711 443\r\n"), errProxyInvalid)
	bad("v1 zone", []byte("PROXY TCP6 fe80::1%eth0 fe80::2 4711 443\r\n"), errProxyInvalid)
	bad("v1 bad destination", []byte("PROXY TCP4 203.0.113.5 192.0.2 4711 443\r\n"), errProxyInvalid)
	bad("v1 port 65536", []byte("PROXY TCP4 203.0.113.5 192.0.2.200 65536 443\r\n"), errProxyInvalid)
	bad("v1 port -1", []byte("PROXY TCP4 203.0.113.5 192.0.2.200 -1 443\r\n"), errProxyInvalid)
	bad("v1 port of 6 digits", []byte("PROXY TCP4 203.0.113.5 192.0.2.200 004711 443\r\n"), errProxyInvalid)
	bad("v1 four fields", []byte("PROXY TCP4 203.0.113.5 192.0.2.200 4711\r\n"), errProxyInvalid)
	bad("v1 two spaces", []byte("PROXY TCP4  203.0.113.5 192.0.2.200 4711 443\r\n"), errProxyInvalid)
	bad("v1 UDP4", []byte("PROXY UDP4 203.0.113.5 192.0.2.200 4711 443\r\n"), errProxyInvalid)
	bad("v1 empty", []byte("PROXY \r\n"), errProxyInvalid)
	bad("v1 truncated", []byte("PROXY TCP4 203.0.113.5 192.0.2.200 4711 443\r"), errProxyShort)

	// The line's bound, 107 bytes with its CRLF: at it (accepted) and
	// one byte past it (refused, without waiting for the end of line);
	// 106 bytes without an end of line yet are a header still arriving.
	max6 := "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
	at := "PROXY UNKNOWN " + max6 + " " + max6 + " 65535 65535\r\n"
	if len(at) != proxyV1Max {
		t.Fatalf("the longest line is %d bytes", len(at))
	}
	ok("v1 of 107 bytes", []byte(at), proxyUnspec, "", 107)
	bad("v1 of 108 bytes", []byte(strings.Replace(at, "65535 65535", "65535 655350", 1)), errProxyInvalid)
	bad("v1, 107 bytes and no end of line", []byte(at[:105]+"xx"), errProxyInvalid)
	bad("v1, 106 bytes and no end of line", []byte(at[:105]+"x"), errProxyShort)
}

// FuzzParseProxyHeader: any input gives a header or one of the three
// errors, without panicking; the answer never depends on bytes past what
// the parser needs, which is never more than proxyHeldMax; an incomplete
// header's prefixes are incomplete too; and a header's length is what
// its own bytes say.
func FuzzParseProxyHeader(f *testing.F) {
	v4 := netip.MustParseAddrPort("203.0.113.5:4711")
	dst4 := netip.MustParseAddrPort("192.0.2.200:443")
	for _, seed := range [][]byte{
		proxyV2For("203.0.113.5:4711"),
		proxyV2For("[2001:db8::1]:4711"),
		proxyV2Local,
		proxyV2Header(0x21, 0x11, proxyV2Addrs(v4, dst4, 20)),
		proxyV2Header(0x21, 0x31, make([]byte, 216)),
		[]byte("PROXY TCP4 203.0.113.5 192.0.2.200 4711 443\r\n"),
		[]byte("PROXY TCP6 2001:db8::1 2001:db8::200 4711 443\r\n"),
		[]byte("PROXY UNKNOWN\r\n"),
		[]byte("GET / HTTP/1.1\r\n"),
		[]byte("\r\n\r\n"),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseProxyHeader(b)
		switch {
		case err == nil:
			switch h.version {
			case 1:
				if h.length > proxyV1Max || h.length > len(b) || !bytes.HasSuffix(b[:h.length], []byte("\r\n")) {
					t.Fatalf("%q: v1 header of length %d", b, h.length)
				}
			case 2:
				if h.length != proxyV2Fixed+int(binary.BigEndian.Uint16(b[14:16])) {
					t.Fatalf("%q: v2 header of length %d", b, h.length)
				}
			default:
				t.Fatalf("%q: version %d", b, h.version)
			}
			if (h.command == proxyForward) != h.source.IsValid() || h.source.Addr().Is4In6() {
				t.Fatalf("%q: command %d with source %v", b, h.command, h.source)
			}
		case errors.Is(err, errProxyShort):
			if len(b) >= proxyHeldMax {
				t.Fatalf("%q: incomplete after %d bytes", b, len(b))
			}
			if len(b) > 0 {
				if _, err := parseProxyHeader(b[:len(b)-1]); !errors.Is(err, errProxyShort) {
					t.Fatalf("%q incomplete, its prefix: %v", b, err)
				}
			}
			return // more bytes may change the answer
		case errors.Is(err, errProxyNone), errors.Is(err, errProxyInvalid):
		default:
			t.Fatalf("%q: unexpected error %v", b, err)
		}
		// What follows the bytes the parser needed changes nothing.
		h2, err2 := parseProxyHeader(append(b[:len(b):len(b)], "\r\nGET / HTTP/1.1\r\n"...))
		if h2 != h || (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("%q: %+v, %v; with more bytes: %+v, %v", b, h, err, h2, err2)
		}
	})
}

// FuzzProxyV2RoundTrip: a header built for any client address and port,
// with any TLVs, parses back to that client.
func FuzzProxyV2RoundTrip(f *testing.F) {
	f.Add([]byte{203, 0, 113, 5}, uint16(4711), uint16(0))
	f.Add([]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, uint16(443), uint16(100))
	f.Fuzz(func(t *testing.T, ip []byte, port, tlv uint16) {
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			return
		}
		src := netip.AddrPortFrom(a, port)
		dst := netip.AddrPortFrom(netip.IPv4Unspecified(), 443)
		fam := byte(proxyFamInet<<4 | proxyTransStream)
		if a.Is6() {
			dst = netip.AddrPortFrom(netip.IPv6Unspecified(), 443)
			fam = proxyFamInet6<<4 | proxyTransStream
		}
		body := proxyV2Addrs(src, dst, 0)
		tlv = max(tlv%(0xffff-uint16(len(body))), 3)
		body = proxyV2Addrs(src, dst, int(tlv))
		b := proxyV2Header(0x21, fam, body)
		h, err := parseProxyHeader(b)
		want := netip.AddrPortFrom(a.Unmap(), port)
		if err != nil || h.command != proxyForward || h.source != want || h.length != len(b) {
			t.Fatalf("%v: got %+v, %v", src, h, err)
		}
	})
}
