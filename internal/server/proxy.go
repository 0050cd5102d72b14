package server

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// Reverse proxies (Config.TrustedProxies): a connection whose TCP peer is
// a trusted proxy takes its client address from Config.RealIPHeader at
// the WebSocket upgrade; everything per address (max_connections_per_ip,
// the relay's blocked IPs and per-address rate limits) then applies to
// that address. A header from any other peer is ignored: a client that
// reaches the relay directly could write whatever it likes there.

// parseTrusted parses the TrustedProxies entries: CIDR prefixes or single
// addresses.
func parseTrusted(entries []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if p, err := netip.ParsePrefix(e); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(e)
		if err != nil {
			return nil, fmt.Errorf("server: trusted_proxies: %q is neither an address nor a CIDR prefix", e)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// trusted reports whether a is one of the trusted proxies.
func (s *Server) trusted(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	a = a.Unmap()
	for _, p := range s.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// forwardedClient returns the client address a trusted proxy forwarded in
// the header values (each a comma-separated list, appended to by every
// proxy on the way): the rightmost address that is not itself a trusted
// proxy, or the leftmost if they all are. ok is false when the header is
// absent or that entry is not an address.
func (s *Server) forwardedClient(values []string) (netip.Addr, bool) {
	var entries []string
	for _, v := range values {
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				entries = append(entries, e)
			}
		}
	}
	for i := len(entries) - 1; i >= 0; i-- {
		a, ok := parseForwarded(entries[i])
		if !ok {
			return netip.Addr{}, false
		}
		if i == 0 || !s.trusted(a) {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// parseForwarded parses one forwarded address: "192.0.2.1", "2001:db8::1",
// or either with a port ("192.0.2.1:4711", "[2001:db8::1]:4711").
func parseForwarded(e string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(e); err == nil && a.Zone() == "" {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(e); err == nil && ap.Addr().Zone() == "" {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}

// proxiedClient returns the client address a trusted proxy (peer) forwarded
// with an upgrade request, or peer itself, counted in
// Stats.ProxyHeaderMissing, when the header is missing or unusable.
func (s *Server) proxiedClient(peer netip.Addr, r *http.Request) netip.Addr {
	if a, ok := s.forwardedClient(r.Header.Values(s.cfg.RealIPHeader)); ok {
		return a
	}
	s.proxyNoClient.Add(1)
	return peer
}
