package server

import (
	"context"
	"errors"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"

	"github.com/lesismal/nbio"
	"github.com/lesismal/nbio/nbhttp"
	"github.com/lesismal/nbio/nbhttp/websocket"

	"github.com/petrel-relay/petrel/internal/relay"
)

// transport adapts one upgraded WebSocket to relay.Transport.
type transport struct {
	wsc     *websocket.Conn
	nbc     net.Conn
	sess    *relay.Session
	closing atomic.Bool
}

// Write hands pre-framed bytes to the socket. nbio's Write does not block:
// what the kernel does not take is buffered and flushed on EPOLLOUT, and
// progress is reported through onWritten.
func (t *transport) Write(b []byte) error {
	_, err := t.nbc.Write(b)
	return err
}

// Close sends a close frame (best effort) and closes the connection.
func (t *transport) Close(code int, reason string) {
	if !t.closing.CompareAndSwap(false, true) {
		return
	}
	if len(reason) > 120 {
		reason = reason[:120]
	}
	_ = t.wsc.WriteClose(code, reason)
	_ = t.nbc.Close()
}

// onOpen runs on the accept goroutine for each new TCP connection, before
// nbio registers it with a poller: it takes a connection slot or refuses
// the connection by closing it (nbio then never reads it). With the PROXY
// protocol it puts the header's reader in front of the HTTP parser
// (proxyconn.go).
func (s *Server) onOpen(c net.Conn) {
	// A trusted proxy's connection takes only the global slot here: it
	// is counted for the client it forwards once its PROXY header, or
	// its upgrade request, names the client.
	peer := connAddr(c)
	proxy := s.trusted(peer)
	if proxy {
		peer = netip.Addr{}
	}
	if s.relay.AllowConnect(peer) != nil { // policy.connect_rate; counted there
		_ = c.Close()
		return
	}
	if ok, perIP := s.slots.acquire(c, peer); !ok {
		s.relay.CountRejectedConnection(perIP)
		_ = c.Close()
		return
	}
	if s.cfg.ProxyProtocol {
		s.readProxyHeader(c, proxy)
	}
}

// onClose releases the connection's slot; slots.release is idempotent per
// connection, so every path (failed upgrade, refused PROXY header, panic,
// timeout, close) releases exactly once.
func (s *Server) onClose(c net.Conn, err error) {
	src, awaiting := s.slots.release(c)
	if awaiting {
		s.proxyStats.incomplete.Add(1) // header_timeout passed, or the proxy closed, mid-header
	}
	if err != nil && s.log.Enabled(context.Background(), slog.LevelDebug) {
		if src.IsValid() {
			s.log.Debug("connection closed", "remote", c.RemoteAddr().String(), "client", src.String(), "err", err)
			return
		}
		s.log.Debug("connection closed", "remote", c.RemoteAddr().String(), "err", err)
	}
}

// peer returns the address c speaks for: the client its PROXY header
// named, or its TCP peer.
func (s *Server) peer(c net.Conn) netip.Addr {
	if s.cfg.ProxyProtocol {
		if a, ok := s.slots.source(c); ok {
			return a
		}
	}
	return connAddr(c)
}

// onWritten reports socket progress to the session that owns the bytes.
func (s *Server) onWritten(c *nbio.Conn, _ []byte, n int) {
	wsc, ok := c.Session().(*websocket.Conn)
	if !ok {
		return
	}
	if t, ok := wsc.Session().(*transport); ok {
		t.sess.Written(n)
	}
}

func (s *Server) handleRoot(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	if isUpgrade(r) {
		s.upgrade(w, r)
		return
	}
	if r.Method == http.MethodPost && isNIP86(r) {
		// NIP-86: the management API lives on the WebSocket URI.
		s.nip86.ServeHTTP(w, r)
		return
	}
	if r.Method == http.MethodOptions {
		if strings.EqualFold(r.Header.Get("Access-Control-Request-Method"), http.MethodPost) {
			s.nip86.ServeHTTP(w, r) // preflight of a NIP-86 call
			return
		}
		setCORS(w)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD, POST, OPTIONS")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if strings.Contains(r.Header.Get("Accept"), "application/nostr+json") {
		s.serveNIP11(w, r)
		return
	}
	if wantsHTML(r) {
		s.serveDashboard(w, r) // a browser
		return
	}
	s.serveLanding(w, r)
}

// isNIP86 reports whether r has the NIP-86 Content-Type.
func isNIP86(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == NIP86ContentType
}

func isUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

func (s *Server) upgrade(w http.ResponseWriter, r *http.Request) {
	c, ok := responseConn(w)
	if !ok {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	// A connection admitted past max_connections, in the HTTP reserve,
	// becomes a WebSocket only if a slot has freed since.
	if !s.slots.upgrade(c) {
		s.relay.CountRejectedConnection(false)
		w.Header().Set("Connection", "close")
		http.Error(w, "relay is full", http.StatusServiceUnavailable)
		return
	}
	// The client's address, for the write policy: the TCP peer or the
	// client its PROXY header named (whose per-address slot it took when
	// the header was read), or, from a trusted proxy, the client it
	// forwards in real_ip_header, whose per-address slot the proxy's
	// connection takes here, before upgrading.
	var client netip.Addr
	var proxied net.Conn
	if len(s.proxies) > 0 {
		peer := s.peer(c)
		if !s.trusted(peer) {
			client = peer
		} else {
			client = s.proxiedClient(peer, r)
			if rej := s.relay.AllowConnect(client); rej != nil {
				w.Header().Set("Connection", "close")
				http.Error(w, rej.Error(), http.StatusTooManyRequests)
				return
			}
			if !s.slots.attach(c, client) {
				s.relay.CountRejectedConnection(true)
				w.Header().Set("Connection", "close")
				http.Error(w, "too many connections from your address", http.StatusTooManyRequests)
				return
			}
			proxied = c
		}
	}
	wsc, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		// The upgrader has answered with an HTTP error; the slot is
		// released when the connection closes. A proxy's connection may
		// carry other clients' requests meanwhile: it stops counting for
		// this one.
		if proxied != nil {
			s.slots.detach(proxied)
		}
		return
	}
	nbc := wsc.UnderlayerConn()
	if !client.IsValid() {
		client = connAddr(nbc)
	}
	ip := ""
	if client.IsValid() {
		ip = client.String()
	}
	t := &transport{wsc: wsc, nbc: nbc}
	t.sess = s.relay.NewSession(t, ip)
	if bits := wsc.CompressionWindowBits(); bits != 0 {
		t.sess.EnableCompression(bits)
	}
	wsc.SetSession(t)
	// Only now may the session write: onWritten finds it through
	// wsc.Session(), and bytes it could not attribute would leave the
	// out-queue believing the socket is still busy.
	t.sess.Start()
}

func (s *Server) onMessage(c *websocket.Conn, mt websocket.MessageType, data []byte) {
	t, ok := c.Session().(*transport)
	if !ok {
		return
	}
	t.sess.HandleMessage(data, mt == websocket.BinaryMessage)
}

func (s *Server) onWSClose(c *websocket.Conn, err error) {
	if t, ok := c.Session().(*transport); ok {
		// nbio has already sent close 1009 for these; count the trip.
		// (Its error reads "message exceeds the configured limit": match
		// the sentinel, not a text.)
		if errors.Is(err, websocket.ErrMessageTooLarge) {
			s.relay.CountOversizedMessage()
		}
		t.closing.Store(true)
		t.sess.Closed()
		if why := t.sess.LimitClosed(); why != "" {
			// The client went past a limit (its trip is counted in
			// limits_tripped): who, and which. At debug: nothing is
			// logged per connection at info (docs/operations.md, Logs).
			s.log.Debug("connection closed by the relay", "client", t.sess.IP(), "reason", why)
		}
	}
}

// responseConn returns the connection an nbio response goes out on: the
// one onOpen took a slot for (slots are keyed by it).
func responseConn(w http.ResponseWriter) (net.Conn, bool) {
	res, ok := w.(*nbhttp.Response)
	if !ok || res.Parser == nil || res.Parser.Conn == nil {
		return nil, false
	}
	c := res.Parser.Conn
	if hc, ok := c.(*nbhttp.Conn); ok {
		c = hc.Conn // the *nbio.Conn that holds the slot
	}
	return c, c != nil
}
