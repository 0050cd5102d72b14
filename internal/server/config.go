package server

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/petrel-relay/petrel/internal/nip19"
	"github.com/petrel-relay/petrel/internal/nostr"
)

// Config configures the network edge. The zero value works (Normalize
// fills in defaults); negative limits mean "no limit".
type Config struct {
	// Listen is the TCP address to listen on. Default "127.0.0.1:7447".
	Listen string `toml:"listen"`
	// MaxConnections caps open connections relay-wide. Default 0 (or
	// negative): no cap (the process's open-file limit is the cap). Past it, HTTPReserve
	// more connections are admitted for plain HTTP.
	MaxConnections int `toml:"max_connections"`
	// HTTPReserve is how many connections are admitted past
	// MaxConnections for plain HTTP requests (NIP-11, /stats, /metrics,
	// NIP-86), so that scrapes and health checks are answered exactly
	// when the relay is full. Such a connection may not become a
	// WebSocket unless a slot under MaxConnections has freed meanwhile
	// (otherwise its upgrade is answered 503 and counted as a refused
	// connection); past the reserve, connections are closed at accept.
	// Ignored without MaxConnections. Default 16; negative: no reserve.
	HTTPReserve int `toml:"http_reserve"`
	// MaxConnectionsPerIP caps open connections per client address (IPv4
	// address, or IPv6 /64); with many nodes, on all of them together
	// (give or take a few: docs/operations.md). Default 128; negative: no
	// cap.
	MaxConnectionsPerIP int `toml:"max_connections_per_ip"`
	// HeaderTimeout is how long a client has to send a complete HTTP
	// request head (and, for keep-alive, the next one); with
	// ProxyProtocol, the PROXY header and the first request head
	// together. Default 10s.
	HeaderTimeout time.Duration `toml:"header_timeout"`
	// ShutdownTimeout bounds the final flush of out-queues on shutdown
	// before sockets are closed with 1001. Default 5s.
	ShutdownTimeout time.Duration `toml:"shutdown_timeout"`
	// Pollers is the number of epoll goroutines. Default: the number of
	// CPUs.
	Pollers int `toml:"pollers"`
	// TrustedProxies lists the reverse proxies (addresses or CIDR
	// prefixes, e.g. "127.0.0.1" or "10.0.0.0/8") whose RealIPHeader is
	// believed, and, with ProxyProtocol, whose PROXY header. A WebSocket
	// from one of them is counted, limited and policed
	// (max_connections_per_ip, blocked IPs, per-address rate limits)
	// under the client address the proxy forwarded; connections from any
	// other address use their TCP peer address, whatever headers they
	// send. Default empty: every peer is a client.
	TrustedProxies []string `toml:"trusted_proxies"`
	// RealIPHeader is the request header a trusted proxy puts the client
	// address in: a comma-separated list, each proxy appending the address
	// it received from, of which the rightmost that is not itself a
	// trusted proxy is the client ("X-Real-IP" with one address works the
	// same). A trusted proxy's request without a usable header is counted
	// under the proxy's own address (and in /stats proxy_header_missing).
	// Default "X-Forwarded-For".
	RealIPHeader string `toml:"real_ip_header"`
	// ProxyProtocol makes every connection from one of TrustedProxies
	// start with a PROXY protocol header (HAProxy's send-proxy-v2 or
	// send-proxy: versions 2 and 1 are read), which names the client the
	// proxy forwards. That address is then the connection's: counted,
	// limited and policed (max_connections_per_ip, blocked IPs,
	// per-address rate limits) as a direct client's would be, from the
	// header on. A LOCAL header (the proxy's health checks) leaves the
	// connection the proxy's, and so does a header naming a trusted
	// proxy (one in front of the balancer): their WebSockets take their
	// client from RealIPHeader. A trusted proxy's connection without a
	// valid header is closed, and so is any other peer's connection that
	// starts with one (only a trusted proxy may name the client); both
	// are counted in /stats proxy_protocol. The header and the HTTP
	// request head after it must arrive within HeaderTimeout. Requires
	// TrustedProxies. Default false.
	ProxyProtocol bool `toml:"proxy_protocol"`
	// Admins lists the pubkeys (hex, npub or nprofile) allowed to call
	// the NIP-86 management API (a POST of type
	// application/nostr+json+rpc to "/", authorized with NIP-98).
	// Default empty: every call is answered 401, and NIP-11 does not
	// list 86.
	Admins []string `toml:"admins"`
	// Compression negotiates permessage-deflate (RFC 7692) with clients
	// that offer it (browsers and most client libraries do): events are
	// then sent compressed, each compressed once however many subscribers
	// it goes to, and clients may send compressed messages, inflated up to
	// relay.max_message_bytes (past it the connection is closed with 1009).
	// Neither side keeps a compression window between messages (the
	// server answers server_no_context_takeover and
	// client_no_context_takeover), so an idle connection holds no
	// compression state. Default true; false declines every offer.
	Compression *bool `toml:"compression"`
	// CompressionLevel is the DEFLATE level events are compressed at, 1
	// (fastest) to 9 (smallest). A live event is compressed once for all
	// its subscribers; a stored one once per REQ that returns it. Default
	// 1.
	CompressionLevel int `toml:"compression_level"`
	// CompressionMinBytes: EVENT frames shorter than this go uncompressed
	// without trying (control frames, OK, EOSE, CLOSED, NOTICE, always do;
	// so does any frame compression would not make smaller). Default 256;
	// negative: try every event.
	CompressionMinBytes int `toml:"compression_min_bytes"`
	// CompressionCacheBytes is the memory for the compressed bodies of
	// recent events (about 60% of an event's size, plus 96 bytes each), so
	// that an event that many REQs return, or that a REQ asks for after
	// its live fan-out, is compressed once. It fills only with events
	// sent to connections that negotiated compression, and its size does
	// not depend on how many there are. Default 16 MiB; negative: no cache
	// (every REQ compresses what it returns).
	CompressionCacheBytes int `toml:"compression_cache_bytes"`
	// PprofListen, when set, serves Go's net/http/pprof profiles and the
	// relay's OK trace (POST /debug/petrel/oktrace/start and /stop: each
	// EVENT's stage times, for `petrel bench ladder --oktrace`) on this
	// separate address (keep it on loopback: both expose internals, with
	// no authentication; another address is warned about at start).
	// Default "": off.
	PprofListen string `toml:"pprof_listen"`
}

// Check reports what New would refuse in c, all of it, without starting
// anything (petrel serve --check): a listen or pprof address that is not
// host:port, admins that are not pubkeys (hex, npub or nprofile),
// trusted proxies that are neither addresses nor prefixes,
// proxy_protocol without trusted proxies.
func (c Config) Check() error {
	_, err := c.parse()
	return err
}

// parsedConfig is what New takes from c's lists, parsed.
type parsedConfig struct {
	admins  []nostr.PubKey
	proxies []netip.Prefix
}

// parse is Check, keeping what it parsed.
func (c Config) parse() (parsedConfig, error) {
	c = c.Normalize()
	var p parsedConfig
	var errs []error
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("listen on %s: %v", c.Listen, err)) // as when the bind fails
	}
	if c.PprofListen != "" {
		if _, _, err := net.SplitHostPort(c.PprofListen); err != nil {
			errs = append(errs, fmt.Errorf("pprof listen on %s: %v", c.PprofListen, err))
		}
	}
	var err error
	if p.admins, err = parseAdmins(c.Admins); err != nil {
		errs = append(errs, err)
	}
	if p.proxies, err = parseTrusted(c.TrustedProxies); err != nil {
		errs = append(errs, err)
	}
	if c.ProxyProtocol && len(c.TrustedProxies) == 0 {
		errs = append(errs, errors.New("server: proxy_protocol needs trusted_proxies: only a trusted proxy may send a PROXY header"))
	}
	return p, errors.Join(errs...)
}

// parseAdmins parses server.admins (hex, npub or nprofile, as every
// pubkey list of the config).
func parseAdmins(list []string) ([]nostr.PubKey, error) {
	var admins []nostr.PubKey
	for _, a := range list {
		pk, err := nip19.ParsePubKey(a)
		if err != nil {
			// nip19's error quotes the value, but never an nsec.
			return nil, fmt.Errorf("server: admins: %s", nip19.Reason(err))
		}
		admins = append(admins, pk)
	}
	return admins, nil
}

// Normalize returns c with defaults filled in.
func (c Config) Normalize() Config {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:7447"
	}
	if c.MaxConnectionsPerIP == 0 {
		c.MaxConnectionsPerIP = 128
	}
	if c.HTTPReserve == 0 {
		c.HTTPReserve = 16
	}
	if c.RealIPHeader == "" {
		c.RealIPHeader = "X-Forwarded-For"
	}
	if c.HeaderTimeout <= 0 {
		c.HeaderTimeout = 10 * time.Second
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 5 * time.Second
	}
	if c.Compression == nil {
		on := true
		c.Compression = &on
	}
	if c.CompressionLevel == 0 {
		c.CompressionLevel = 1
	}
	if c.CompressionCacheBytes == 0 {
		c.CompressionCacheBytes = 16 << 20
	}
	if c.CompressionMinBytes == 0 {
		c.CompressionMinBytes = 256
	} else if c.CompressionMinBytes < 0 {
		c.CompressionMinBytes = 0
	}
	return c
}
