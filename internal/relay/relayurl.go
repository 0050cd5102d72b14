package relay

import (
	"net/netip"
	"net/url"
	"strings"
)

// normalizeRelayURL returns the form in which relay URLs are compared
// (NIP-42 "relay" tags, NIP-62 "relay" tags, Config.URL): scheme ws or wss
// (http and https are taken as ws and wss), lower-case host, no default
// port (80 for ws, 443 for wss), path without trailing slashes, query kept
// as is, fragment dropped. ok is false for anything that is not an
// absolute ws, wss, http or https URL with a host and no user info.
func normalizeRelayURL(s string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Host == "" || u.User != nil || u.Opaque != "" {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	switch scheme {
	case "ws", "wss":
	case "http":
		scheme = "ws"
	case "https":
		scheme = "wss"
	default:
		return "", false
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", false
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	port := u.Port()
	if port != "" && !(scheme == "ws" && port == "80") && !(scheme == "wss" && port == "443") {
		host += ":" + port
	}
	out := scheme + "://" + host + strings.TrimRight(u.EscapedPath(), "/")
	if u.RawQuery != "" {
		out += "?" + u.RawQuery
	}
	return out, true
}

// isLoopbackURL reports whether s is a relay URL (as normalizeRelayURL
// accepts) whose host is localhost or a loopback address.
func isLoopbackURL(s string) bool {
	if _, ok := normalizeRelayURL(s); !ok {
		return false
	}
	u, _ := url.Parse(strings.TrimSpace(s))
	return isLoopbackHost(u.Hostname())
}

// isLoopbackHost reports whether host (no port, no brackets) is
// "localhost" or a loopback address.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	return a.Unmap().IsLoopback()
}

// matchesOwnURL reports whether a "relay" tag value names this relay:
// equal to Config.URL once both are normalized, or, when Config.URL is not
// set, any URL whose host is a loopback address.
func (r *Relay) matchesOwnURL(v string) bool {
	if r.ownURL == "" {
		return isLoopbackURL(v)
	}
	n, ok := normalizeRelayURL(v)
	return ok && n == r.ownURL
}
