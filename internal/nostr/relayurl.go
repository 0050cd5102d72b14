package nostr

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// Relay URLs: the one rule by which petrel decides whether a URL names a
// relay. The relay applies it to NIP-42 "relay" tags and NIP-62 "relay"
// tags, `petrel import` to NIP-62 "relay" tags, and the NIP-86 handler to
// NIP-98 "u" tags, so that they can never disagree.

// AllRelays is the NIP-62 "relay" tag value that addresses a request to
// vanish to every relay. It is matched exactly (upper case).
const AllRelays = "ALL_RELAYS"

// ErrRelayURL means a URL that should name a relay is not an absolute ws,
// wss, http or https URL with a host (see NormalizeRelayURL).
var ErrRelayURL = errors.New("nostr: not a relay URL")

// NormalizeRelayURL returns the form in which relay URLs are compared:
// scheme ws or wss, with http taken as ws and https as wss (a relay's
// WebSocket URL and the HTTP URL of the same endpoint, as NIP-11 and
// NIP-98 use it, name the same relay); lower-case host (an IPv6 literal
// in its canonical text, RFC 5952); no default port
// (80 for ws, 443 for wss); path as escaped, without trailing slashes; a
// non-empty query kept as is, but for spaces and non-ASCII bytes, which
// are percent-encoded; no fragment. Surrounding white space is
// ignored. ok is false for anything that is not an absolute ws, wss, http
// or https URL with a host and without user info (opaque URLs such as
// "wss:relay.example.com", empty hosts such as "wss://:443").
//
// The result is itself a URL that NormalizeRelayURL maps to itself.
func NormalizeRelayURL(s string) (normalized string, ok bool) {
	n, _, ok := normalizeRelayURL(s)
	return n, ok
}

// normalizeRelayURL is NormalizeRelayURL, also returning the host (lower
// case, without brackets or port) for the loopback rule.
func normalizeRelayURL(s string) (normalized, host string, ok bool) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Opaque != "" || u.User != nil {
		return "", "", false
	}
	var scheme string
	switch strings.ToLower(u.Scheme) {
	case "ws", "http":
		scheme = "ws"
	case "wss", "https":
		scheme = "wss"
	default:
		return "", "", false
	}
	host = strings.ToLower(u.Hostname())
	if host == "" {
		return "", "", false
	}
	hostport := host
	if strings.Contains(host, ":") {
		// An IPv6 literal, in its canonical text ("ws://::" has host ":"
		// to net/url: refused). A zone may hold only unreserved ASCII.
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || !strings.HasPrefix(u.Host, "[") || strings.ContainsFunc(a.Zone(), notUnreserved) {
			return "", "", false
		}
		host = a.String()
		hostport = "[" + host + "]"
	}
	if port := u.Port(); port != "" && !(scheme == "ws" && port == "80") && !(scheme == "wss" && port == "443") {
		hostport += ":" + port
	}
	// url.URL escapes what the parser unescaped in the host (non-ASCII
	// bytes, the "%" of an IPv6 zone), so the result parses back to it.
	var b strings.Builder
	b.WriteString(scheme)
	b.WriteString(":")
	b.WriteString((&url.URL{Host: hostport}).String())
	b.WriteString(strings.TrimRight(u.EscapedPath(), "/"))
	if u.RawQuery != "" {
		b.WriteString("?")
		writeQuery(&b, u.RawQuery)
	}
	return b.String(), host, true
}

// notUnreserved reports whether r is not an unreserved URL character
// (RFC 3986: letters, digits, "-", ".", "_", "~").
func notUnreserved(r rune) bool {
	return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '.' || r == '_' || r == '~')
}

// writeQuery writes the raw query q to b with spaces and non-ASCII bytes
// percent-encoded, as net/url leaves them in a query but they cannot stay
// in a normalized URL (trailing white space would be trimmed off it).
func writeQuery(b *strings.Builder, q string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(q); i++ {
		if c := q[i]; c <= ' ' || c >= 0x7f {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		} else {
			b.WriteByte(c)
		}
	}
}

// IsLoopbackHost reports whether host (without port or brackets) is
// "localhost", in any case, or a loopback address (127.0.0.0/8, ::1, or
// 127.0.0.0/8 mapped into IPv6).
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// OwnURL is a relay's own URL in the form NormalizeRelayURL returns, the
// URL that "relay" tags must name. The zero value stands for a relay
// whose URL is not configured: such a relay is named by any URL whose
// host is a loopback address (IsLoopbackHost), which is right for a relay
// reached on loopback only; a public relay must configure its URL.
//
// OwnURL(s) is valid only for an s that NormalizeRelayURL returned, or
// "": use ParseOwnURL otherwise. An OwnURL is a plain value, safe for
// concurrent use.
type OwnURL string

// ParseOwnURL returns the OwnURL of a configured relay URL: the zero
// OwnURL for "", else s normalized, or an error wrapping ErrRelayURL if s
// is not a relay URL.
func ParseOwnURL(s string) (OwnURL, error) {
	if s == "" {
		return "", nil
	}
	n, ok := NormalizeRelayURL(s)
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrRelayURL, s)
	}
	return OwnURL(n), nil
}

// Names reports whether the URL v (a NIP-42 or NIP-62 "relay" tag value,
// a NIP-98 "u" tag value) names the relay whose URL is o: v normalizes to
// o, or, for the zero OwnURL, v is a relay URL with a loopback host.
func (o OwnURL) Names(v string) bool {
	n, host, ok := normalizeRelayURL(v)
	if !ok {
		return false
	}
	if o == "" {
		return IsLoopbackHost(host)
	}
	return n == string(o)
}

// VanishAddressedTo reports whether the request to vanish ev (NIP-62,
// kind 62; the kind is not checked) is addressed to the relay whose URL
// is own: one of its "relay" tags is AllRelays or names own (OwnURL.Names).
// The relay refuses a request not addressed to it, and `petrel import`
// skips one, so that neither applies a request meant for another relay.
func VanishAddressedTo(ev *Event, own OwnURL) bool {
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == "relay" && (t[1] == AllRelays || own.Names(t[1])) {
			return true
		}
	}
	return false
}
