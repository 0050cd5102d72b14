package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// The PROXY protocol (HAProxy's proxy-protocol.txt, versions 1 and 2): a
// load balancer that forwards TCP connections (HAProxy in TCP mode with
// send-proxy-v2 or send-proxy, a cloud network load balancer) starts each
// one with a header that names the client it forwards. This file parses
// the header; proxyconn.go reads it off a connection
// (Config.ProxyProtocol).

var (
	// errProxyShort: the bytes are the start of a header that does not
	// yet say what the parser needs; more must be read.
	errProxyShort = errors.New("server: PROXY header incomplete")
	// errProxyNone: the bytes do not start with a PROXY header's
	// signature.
	errProxyNone = errors.New("server: no PROXY header")
	// errProxyInvalid: a signature followed by something the protocol
	// does not allow (wrapped with the reason).
	errProxyInvalid = errors.New("server: invalid PROXY header")
)

// proxyV2Sig is the 12 bytes that start a version 2 header.
var proxyV2Sig = []byte("\r\n\r\n\x00\r\nQUIT\n")

// proxyV1Sig starts a version 1 header, a line of text.
const proxyV1Sig = "PROXY "

const (
	// proxyV1Max is the longest version 1 line, CRLF included: the
	// protocol's own bound ("PROXY TCP6" and two full IPv6 addresses and
	// ports), so a receiver never waits for more.
	proxyV1Max = 107
	// proxyV2Fixed is the fixed part of a version 2 header: signature,
	// version and command, family and transport, length of the rest.
	proxyV2Fixed = 16
	// proxyHeldMax bounds what parseProxyHeader needs to see before it
	// answers: a whole version 1 line, or a version 2 header's fixed part
	// and addresses (16 + 36 for IPv6). The TLVs after the addresses are
	// not needed: a reader skips them without holding them.
	proxyHeldMax = proxyV1Max
)

// Version 2 commands, families and transports (the low and high nibbles
// of bytes 13 and 14).
const (
	proxyCmdLocal = 0x0
	proxyCmdProxy = 0x1

	proxyFamUnspec = 0x0
	proxyFamInet   = 0x1
	proxyFamInet6  = 0x2
	proxyFamUnix   = 0x3

	proxyTransUnspec = 0x0
	proxyTransStream = 0x1
	proxyTransDgram  = 0x2
)

// proxyCommand says what a header asks of the receiver.
type proxyCommand uint8

const (
	// proxyForward: the header names the client (source is valid).
	proxyForward proxyCommand = iota
	// proxyLocal: a version 2 LOCAL header, the proxy's own connection
	// (a health check): the connection's real endpoints stand.
	proxyLocal
	// proxyUnspec: a forwarded connection without a usable client
	// address (version 1 UNKNOWN; version 2 of the UNSPEC or UNIX family,
	// or over a datagram or unspecified transport): the real endpoints
	// stand.
	proxyUnspec
)

// proxyHeader is what a PROXY header says.
type proxyHeader struct {
	version int
	command proxyCommand
	// source is the client's address and port; valid only for
	// proxyForward, and never an IPv4-mapped IPv6 address.
	source netip.AddrPort
	// length is the header's length in bytes. For version 2 it may
	// exceed the bytes the parser was given: past the addresses come
	// TLVs, which petrel ignores and the caller skips as they arrive.
	length int
}

// proxySignature reports which version's signature b starts with:
// errProxyShort if b is shorter than a signature it starts like, and
// errProxyNone if it starts like neither (an HTTP request never does: its
// method is a token, "PROXY" is none petrel serves, and the v2 signature
// has a NUL after its empty lines).
func proxySignature(b []byte) (int, error) {
	if n := min(len(b), len(proxyV2Sig)); bytes.Equal(b[:n], proxyV2Sig[:n]) && n > 0 {
		if n < len(proxyV2Sig) {
			return 0, errProxyShort
		}
		return 2, nil
	}
	if n := min(len(b), len(proxyV1Sig)); string(b[:n]) == proxyV1Sig[:n] {
		if n < len(proxyV1Sig) {
			return 0, errProxyShort
		}
		return 1, nil
	}
	return 0, errProxyNone
}

// parseProxyHeader parses the PROXY header at the start of b. It needs at
// most proxyHeldMax bytes to answer: the header, or errProxyShort (b is
// the start of one), errProxyNone (b does not start with a signature), or
// an error wrapping errProxyInvalid.
func parseProxyHeader(b []byte) (proxyHeader, error) {
	v, err := proxySignature(b)
	if err != nil {
		return proxyHeader{}, err
	}
	if v == 2 {
		return parseProxyV2(b)
	}
	return parseProxyV1(b)
}

func proxyInvalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errProxyInvalid, fmt.Sprintf(format, a...))
}

// parseProxyV2 parses a binary header; b starts with its signature.
func parseProxyV2(b []byte) (proxyHeader, error) {
	if len(b) < proxyV2Fixed {
		return proxyHeader{}, errProxyShort
	}
	if ver := b[12] >> 4; ver != 2 {
		return proxyHeader{}, proxyInvalid("version %d", ver)
	}
	cmd, fam, trans := b[12]&0xf, b[13]>>4, b[13]&0xf
	if cmd != proxyCmdLocal && cmd != proxyCmdProxy {
		return proxyHeader{}, proxyInvalid("command %#x", cmd)
	}
	if fam > proxyFamUnix {
		return proxyHeader{}, proxyInvalid("address family %#x", fam)
	}
	if trans > proxyTransDgram {
		return proxyHeader{}, proxyInvalid("transport %#x", trans)
	}
	n := int(binary.BigEndian.Uint16(b[14:16]))
	h := proxyHeader{version: 2, length: proxyV2Fixed + n}
	if cmd == proxyCmdLocal {
		// The receiver must skip the length whatever the family says.
		h.command = proxyLocal
		return h, nil
	}
	var addrLen int // source and destination addresses, then ports
	switch {
	case fam == proxyFamInet && trans == proxyTransStream:
		addrLen = 4
	case fam == proxyFamInet6 && trans == proxyTransStream:
		addrLen = 16
	default:
		h.command = proxyUnspec
		return h, nil
	}
	if n < 2*addrLen+4 {
		return proxyHeader{}, proxyInvalid("%d bytes of addresses, the family needs %d", n, 2*addrLen+4)
	}
	a := b[proxyV2Fixed:]
	if len(a) < 2*addrLen+4 {
		return proxyHeader{}, errProxyShort
	}
	src, _ := netip.AddrFromSlice(a[:addrLen])
	port := binary.BigEndian.Uint16(a[2*addrLen:])
	h.command = proxyForward
	h.source = netip.AddrPortFrom(src.Unmap(), port)
	return h, nil
}

// parseProxyV1 parses a text header; b starts with "PROXY ".
func parseProxyV1(b []byte) (proxyHeader, error) {
	end := bytes.IndexByte(b[:min(len(b), proxyV1Max)], '\n')
	if end < 0 {
		if len(b) >= proxyV1Max {
			return proxyHeader{}, proxyInvalid("version 1 line longer than %d bytes", proxyV1Max)
		}
		return proxyHeader{}, errProxyShort
	}
	if end == 0 || b[end-1] != '\r' {
		return proxyHeader{}, proxyInvalid("version 1 line not ended by CRLF")
	}
	h := proxyHeader{version: 1, length: end + 1}
	f := strings.Split(string(b[len(proxyV1Sig):end-1]), " ")
	if f[0] == "UNKNOWN" {
		// The rest of the line, whatever it is, is ignored.
		h.command = proxyUnspec
		return h, nil
	}
	if len(f) != 5 {
		return proxyHeader{}, proxyInvalid("version 1 line with %d fields", len(f)+1)
	}
	var want6 bool
	switch f[0] {
	case "TCP4":
	case "TCP6":
		want6 = true
	default:
		return proxyHeader{}, proxyInvalid("version 1 protocol %q", f[0])
	}
	var addrs [2]netip.Addr
	for i, s := range f[1:3] {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" || a.Is6() != want6 {
			return proxyHeader{}, proxyInvalid("version 1 %s address %q", f[0], s)
		}
		addrs[i] = a.Unmap()
	}
	var ports [2]uint16
	for i, s := range f[3:5] {
		p, err := strconv.ParseUint(s, 10, 16)
		if err != nil || len(s) > 5 {
			return proxyHeader{}, proxyInvalid("version 1 port %q", s)
		}
		ports[i] = uint16(p)
	}
	h.command = proxyForward
	h.source = netip.AddrPortFrom(addrs[0], ports[0])
	return h, nil
}
