package server

import (
	"errors"
	"net"
	"net/netip"
	"sync/atomic"

	"github.com/lesismal/nbio"
)

// Reading the PROXY header off a connection (Config.ProxyProtocol).
//
// nbhttp hands OnOpen each connection with its data handler (the HTTP
// parser) set and before its poller reads it (patched nbio,
// third_party/nbio/PATCHES.md, change 7). onOpen puts a proxyReader in
// front of that handler: it takes the connection's first bytes, acts on
// the header, and puts the parser back with the bytes after the header,
// so from then on a read costs what it did without the PROXY protocol.
//
//   - From a trusted proxy the header is required. A header naming a
//     client makes that client's address the connection's: it takes the
//     per-address slot for it there and then (over
//     max_connections_per_ip the connection is closed, as a direct one
//     is at accept), and the session and the write policy see it. If
//     that address is itself a trusted proxy (a proxy in front of the
//     balancer), the connection is treated as that proxy's: its client
//     comes from real_ip_header at the upgrade. A LOCAL header (the
//     balancer's health checks) or one without a usable address leaves
//     the connection the proxy's own.
//   - Any other peer's connection that starts with a PROXY signature is
//     closed: only a trusted proxy may say who the client is.
//   - The header has no deadline of its own: nbhttp's head deadline
//     (HeaderTimeout), armed before the first read, covers the header and
//     the request head after it.
//
// Every refusal is a close: OnClose releases the slot as for any other
// connection, and the slot table tells it whether the header was still
// awaited (counted as incomplete).

// proxyStats counts what the PROXY protocol readers saw.
type proxyStats struct {
	forwarded, local, unspec                atomic.Int64 // headers read, by command
	untrusted, missing, invalid, incomplete atomic.Int64 // connections refused, by reason
}

// ProxyProtocolStats is the /stats document's account of the PROXY
// protocol (server.proxy_protocol): headers read from trusted proxies, by
// what they said, and connections closed for their header, by reason.
type ProxyProtocolStats struct {
	// Forwarded counts headers that named a client: the connection
	// counted as that client's.
	Forwarded int64 `json:"forwarded"`
	// Local counts LOCAL headers (the proxy's own connections, such as
	// health checks): the connection stayed the proxy's.
	Local int64 `json:"local"`
	// Unspec counts headers of a forwarded connection without a usable
	// client address (version 1 UNKNOWN; version 2 UNSPEC or UNIX family,
	// or a datagram transport): the connection stayed the proxy's.
	Unspec int64 `json:"unspec"`
	// Untrusted counts connections closed for starting with a PROXY
	// header when their peer is not a trusted proxy.
	Untrusted int64 `json:"refused_untrusted"`
	// Missing counts connections from a trusted proxy closed for
	// starting without a PROXY header.
	Missing int64 `json:"refused_missing"`
	// Invalid counts connections from a trusted proxy closed for a
	// malformed header.
	Invalid int64 `json:"refused_invalid"`
	// Incomplete counts connections from a trusted proxy that closed
	// before their header was complete: header_timeout passed, or the
	// proxy closed them.
	Incomplete int64 `json:"incomplete"`
}

func (ps *proxyStats) snapshot() ProxyProtocolStats {
	return ProxyProtocolStats{
		Forwarded:  ps.forwarded.Load(),
		Local:      ps.local.Load(),
		Unspec:     ps.unspec.Load(),
		Untrusted:  ps.untrusted.Load(),
		Missing:    ps.missing.Load(),
		Invalid:    ps.invalid.Load(),
		Incomplete: ps.incomplete.Load(),
	}
}

// proxyReader reads the PROXY header at the start of one connection, in
// front of nbhttp's data handler (next). It lives from accept until the
// header is read (or the connection refused) and is used only by nbio's
// reads of the connection, which are serial.
type proxyReader struct {
	s       *Server
	next    func(*nbio.Conn, []byte)
	trusted bool   // the TCP peer is a trusted proxy: the header is required
	held    []byte // the start of a header split across reads (< proxyHeldMax bytes)
	skip    int    // version 2 bytes still to discard (TLVs)
}

// readProxyHeader puts a proxyReader in front of c's data handler; trusted
// says whether c's TCP peer is a trusted proxy. c must not have been read
// yet (onOpen).
func (s *Server) readProxyHeader(c net.Conn, trusted bool) {
	nbc, ok := c.(*nbio.Conn)
	var next func(*nbio.Conn, []byte)
	if ok {
		next = nbc.DataHandler()
	}
	if next == nil {
		// nbio without change 7 of PATCHES.md: the header cannot be read
		// before the HTTP parser, and the parser must not read it.
		s.log.Error("server: proxy_protocol: no data handler to read the PROXY header in front of (nbio without petrel's change 7?); connection closed")
		_ = c.Close()
		return
	}
	if trusted {
		s.slots.expectHeader(c)
	}
	p := &proxyReader{s: s, next: next, trusted: trusted}
	nbc.OnData(p.onData)
}

// onData is c's data handler until the header is read.
func (p *proxyReader) onData(c *nbio.Conn, data []byte) {
	if p.skip > 0 {
		n := min(p.skip, len(data))
		p.skip -= n
		if p.skip == 0 {
			p.done(c, nil, data[n:])
		}
		return
	}
	// Look at what is held and what arrived together, holding no more
	// than parseProxyHeader needs (nbio reuses data's buffer).
	old := len(p.held)
	b := data
	if old > 0 {
		p.held = append(p.held, data[:min(len(data), proxyHeldMax-old)]...)
		b = p.held
	}
	if !p.trusted {
		switch _, err := proxySignature(b); {
		case errors.Is(err, errProxyShort):
			p.hold(data, old)
		case errors.Is(err, errProxyNone):
			p.done(c, p.held[:old], data)
		default: // a header from a peer that may not send one
			p.refuse(c, &p.s.proxyStats.untrusted)
		}
		return
	}
	h, err := parseProxyHeader(b)
	switch {
	case errors.Is(err, errProxyShort):
		p.hold(data, old)
		return
	case errors.Is(err, errProxyNone):
		p.refuse(c, &p.s.proxyStats.missing)
		return
	case err != nil:
		p.refuse(c, &p.s.proxyStats.invalid)
		return
	}
	if !p.s.proxyAdmit(c, h) {
		c.OnData(discardData)
		return
	}
	// The header ends h.length bytes into b, which starts old bytes
	// before data (the held ones were all the header's).
	used := h.length - old
	if used > len(data) {
		p.held, p.skip = nil, used-len(data)
		return
	}
	p.done(c, nil, data[used:])
}

// hold keeps the start of a header until more arrives: data is copied
// (old == 0), or was appended to what is held already.
func (p *proxyReader) hold(data []byte, old int) {
	if old == 0 {
		p.held = append([]byte(nil), data...)
	}
}

// done puts nbhttp's handler back and hands it what followed the header
// (or, from a peer that sent none, everything read so far: held, then
// rest).
func (p *proxyReader) done(c *nbio.Conn, held, rest []byte) {
	c.OnData(p.next)
	p.held = nil
	if len(held) > 0 {
		// One call: a parser that refuses the first bytes closes the
		// connection, and must not be handed more after that.
		rest = append(held, rest...)
	}
	if len(rest) > 0 {
		p.next(c, rest)
	}
}

// refuse closes c, counted in n.
func (p *proxyReader) refuse(c *nbio.Conn, n *atomic.Int64) {
	n.Add(1)
	p.held = nil
	c.OnData(discardData)
	p.s.slots.headerRead(c, netip.Addr{}, false)
	_ = c.Close()
}

// discardData is the data handler of a connection refused while its
// header was read: what nbio reads before the close is dropped.
func discardData(*nbio.Conn, []byte) {}

// proxyAdmit applies a trusted proxy's header to c. It reports false if
// c is refused (and closed): its client's address is at the per-address
// cap or past policy.connect_rate, or c was closed meanwhile.
func (s *Server) proxyAdmit(c net.Conn, h proxyHeader) bool {
	switch h.command {
	case proxyLocal:
		s.proxyStats.local.Add(1)
		s.slots.headerRead(c, netip.Addr{}, false)
		return true
	case proxyUnspec:
		s.proxyStats.unspec.Add(1)
		s.slots.headerRead(c, netip.Addr{}, false)
		return true
	}
	src := h.source.Addr()
	// A trusted source forwards clients of its own (real_ip_header): the
	// per-address slot is taken at the upgrade, as for any proxy, and so
	// is the connection rate's token.
	client := !s.trusted(src)
	if client && s.relay.AllowConnect(src) != nil { // counted there
		s.slots.headerRead(c, netip.Addr{}, false)
		_ = c.Close()
		return false
	}
	ok, atCap := s.slots.headerRead(c, src, client)
	if !ok {
		if atCap {
			s.relay.CountRejectedConnection(true)
		}
		_ = c.Close()
		return false
	}
	s.proxyStats.forwarded.Add(1)
	return true
}
