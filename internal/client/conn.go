package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// Sentinel errors.
var (
	// ErrClosed is the error of a connection that has ended: Close was
	// called (Err is ErrClosed itself), or the relay or the network ended
	// it (Err wraps ErrClosed and the cause, a *websocket.CloseError when
	// the relay sent a close frame).
	ErrClosed = errors.New("client: connection closed")
	// ErrURL means the relay URL is not a ws:// or wss:// URL.
	ErrURL = errors.New("client: not a ws:// or wss:// URL")
	// ErrSubscribed means the subscription id is already routed on this
	// connection.
	ErrSubscribed = errors.New("client: subscription id already in use on this connection")
	// ErrUnsubscribed is what Sub.Next returns once the Sub was
	// unsubscribed and its buffered messages are read.
	ErrUnsubscribed = errors.New("client: subscription no longer routed")
	// ErrNoChallenge means the relay has sent no NIP-42 AUTH challenge on
	// this connection yet.
	ErrNoChallenge = errors.New("client: the relay has sent no AUTH challenge")
	// ErrRefused is wrapped by a *ClosedError: the relay answered a
	// request with CLOSED.
	ErrRefused = errors.New("client: refused by the relay")
)

// Defaults of Options.
const (
	DefaultHandshakeTimeout = 15 * time.Second
	DefaultWriteTimeout     = 30 * time.Second
	DefaultMaxMessageSize   = 16 << 20
	DefaultSubBuffer        = 256
	DefaultInboxSize        = 256
)

// bufferSize is the WebSocket read and write buffer of a connection.
const bufferSize = 64 << 10

// Options change how Dial connects and how the Conn delivers. The zero
// value works; every zero field takes the default in its comment.
type Options struct {
	// HandshakeTimeout bounds the TCP connect, TLS and WebSocket upgrade
	// (the context given to Dial may end it sooner). Default 15s.
	HandshakeTimeout time.Duration
	// WriteTimeout bounds every send: a relay that stops reading makes a
	// send fail after it, not hang. Default 30s.
	WriteTimeout time.Duration
	// MaxMessageSize is the largest message read from the relay, in
	// bytes; a larger one ends the connection (Err wraps
	// websocket.ErrReadLimit). Default 16 MiB; negative: no limit.
	MaxMessageSize int64
	// Header is sent with the upgrade request.
	Header http.Header
	// NetDial, if set, makes the TCP connection (a source address, socket
	// options, a proxy).
	NetDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLSConfig is used for wss:// URLs; nil: the default configuration.
	TLSConfig *tls.Config
	// SubBuffer is the number of messages a Sub buffers before the reader
	// waits for its consumer. Default 256.
	SubBuffer int
	// InboxSize is the number of unrouted messages the inbox holds.
	// Default 256.
	InboxSize int
	// InboxWait makes the reader wait while the inbox is full, instead of
	// dropping what arrives (for a consumer that reads every message).
	InboxWait bool
	// PingInterval, if positive, makes the Conn send a WebSocket ping
	// every interval and end the connection when nothing (no frame, no
	// pong) has come from the relay for two intervals, so that a relay or
	// network that vanished without closing is noticed (Err then says
	// so). Default 0: no pings.
	PingInterval time.Duration
	// Paused dials without reading: the reader starts at Resume. Until
	// then nothing is read from the socket, so the relay's messages pile
	// up in the kernel's buffers.
	Paused bool
	// Compression offers permessage-deflate (RFC 7692, without context
	// takeover); Conn.Compressed reports whether the relay accepted.
	Compression bool
}

func (o *Options) normalize() {
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = DefaultMaxMessageSize
	}
	if o.SubBuffer <= 0 {
		o.SubBuffer = DefaultSubBuffer
	}
	if o.InboxSize <= 0 {
		o.InboxSize = DefaultInboxSize
	}
}

// HandshakeError is a refused upgrade: the server answered the upgrade
// request with an HTTP status instead of 101.
type HandshakeError struct {
	URL    string
	Status int
	Err    error
}

// Error names the URL and the HTTP status.
func (e *HandshakeError) Error() string {
	return fmt.Sprintf("client: connect to %s: HTTP %d: %v", e.URL, e.Status, e.Err)
}

// Unwrap returns the WebSocket library's error.
func (e *HandshakeError) Unwrap() error { return e.Err }

// DialError is a connection that failed before the relay answered the
// upgrade with any HTTP status: nothing listened at the address, the
// name did not resolve, the TCP, TLS or HTTP exchange failed, or the
// context ended first. (An upgrade answered with a status other than 101
// is a HandshakeError.)
type DialError struct {
	URL string
	Err error
}

// Error names the URL and the cause.
func (e *DialError) Error() string {
	return fmt.Sprintf("client: connect to %s: %v", e.URL, e.Err)
}

// Unwrap returns the cause (often a *net.OpError).
func (e *DialError) Unwrap() error { return e.Err }

// Message is a message of the inbox: one frame received from the relay
// that nobody had registered for. The Message is the receiver's to keep.
type Message struct {
	// Raw is the frame's payload as received.
	Raw []byte
	// Relay is the parsed message; nil when Err is set.
	Relay *nostr.RelayMessage
	// Err says why the frame is not a relay message (a
	// *nostr.ParseError).
	Err error
}

// Stats are a connection's counters.
type Stats struct {
	// Sent and Received are WebSocket payload bytes.
	Sent, Received int64
	// Dropped counts messages that arrived while the inbox was full.
	Dropped int64
}

// Conn is one WebSocket connection to a relay. Its methods are safe for
// concurrent use. A Conn holds one reader goroutine from Dial (or Resume)
// until it ends; call Close to end it.
type Conn struct {
	url        string
	ws         *websocket.Conn
	o          Options
	compressed bool // permessage-deflate was negotiated

	wmu  sync.Mutex
	wbuf []byte // the frame being built; c.wmu must be held

	sent, recv, dropped atomic.Int64
	pongs               atomic.Int64 // pongs received (PingInterval)
	silent              atomic.Bool  // the pinger ended the connection

	mu        sync.Mutex
	subs      map[string]*Sub
	oks       map[nostr.ID][]chan<- *nostr.RelayMessage
	challenge string
	ended     bool // finish ran: nothing is routed any more

	inbox   chan *Message
	start   sync.Once
	stop    chan struct{} // closed by Close: the reader stops waiting
	closing atomic.Bool
	done    chan struct{}
	err     error // set before done is closed
}

// Dial connects to the relay at rawURL (ws:// or wss://). The context
// bounds the connection's establishment only.
func Dial(ctx context.Context, rawURL string, o Options) (*Conn, error) {
	if err := CheckURL(rawURL); err != nil {
		return nil, err
	}
	o.normalize()
	d := websocket.Dialer{
		HandshakeTimeout: o.HandshakeTimeout,
		ReadBufferSize:   bufferSize,
		WriteBufferSize:  bufferSize,
		NetDialContext:   o.NetDial,
		TLSClientConfig:  o.TLSConfig,
		// gorilla offers "permessage-deflate; server_no_context_takeover;
		// client_no_context_takeover" and sends its own messages
		// uncompressed unless told otherwise.
		EnableCompression: o.Compression,
	}
	// gorilla bounds the handshake by ctx's deadline only: a ctx cancelled
	// (a command interrupted) while the relay is silent would wait out
	// the whole timeout. The connection is closed then, which ends the
	// handshake at once. (Not its deadline moved to the past: gorilla
	// sets the deadline itself just after the dial, which would undo an
	// abort that came first.) A ctx past its deadline is left to
	// gorilla's own deadline.
	netDial := o.NetDial
	if netDial == nil {
		netDial = (&net.Dialer{}).DialContext
	}
	var dialedMu sync.Mutex
	var dialed net.Conn
	cancelled := false // under dialedMu
	d.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := netDial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		dialedMu.Lock()
		defer dialedMu.Unlock()
		if cancelled {
			nc.Close()
			return nil, context.Canceled
		}
		dialed = nc
		return nc, nil
	}
	abort := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.Canceled) {
			return
		}
		dialedMu.Lock()
		defer dialedMu.Unlock()
		cancelled = true
		if dialed != nil {
			dialed.Close()
		}
	})
	ws, resp, err := d.DialContext(ctx, rawURL, o.Header)
	if !abort() {
		// ctx ended during the dial: wait for the abort to be done.
		dialedMu.Lock()
		dialedMu.Unlock()
		if errors.Is(ctx.Err(), context.Canceled) {
			// The handshake was cut short, or it had just ended and
			// its connection is closed: cancelled.
			if ws != nil {
				ws.Close()
				ws = nil
			}
			err = ctx.Err()
		}
	}
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		if resp != nil && !errors.Is(err, context.Canceled) {
			return nil, &HandshakeError{URL: rawURL, Status: resp.StatusCode, Err: err}
		}
		return nil, &DialError{URL: rawURL, Err: err}
	}
	if o.MaxMessageSize > 0 {
		ws.SetReadLimit(o.MaxMessageSize)
	}
	compressed := o.Compression && resp != nil && strings.Contains(resp.Header.Get("Sec-WebSocket-Extensions"), "permessage-deflate")
	c := &Conn{
		url:        rawURL,
		ws:         ws,
		o:          o,
		compressed: compressed,
		subs:       make(map[string]*Sub),
		oks:        make(map[nostr.ID][]chan<- *nostr.RelayMessage),
		inbox:      make(chan *Message, o.InboxSize),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	if o.PingInterval > 0 {
		// Called on the reader goroutine, inside a read.
		ws.SetPongHandler(func(string) error { c.pongs.Add(1); return nil })
	}
	if !o.Paused {
		c.Resume()
	}
	return c, nil
}

// ping sends a ping every Options.PingInterval and closes the socket
// when nothing has come from the relay for two intervals. It stops when
// the connection ends.
func (c *Conn) ping() {
	t := time.NewTicker(c.o.PingInterval)
	defer t.Stop()
	heard := func() int64 { return c.recv.Load() + c.pongs.Load() }
	last, quiet := heard(), 0
	for {
		select {
		case <-t.C:
		case <-c.done:
			return
		}
		if h := heard(); h != last {
			last, quiet = h, 0
		} else if quiet++; quiet >= 2 {
			c.silent.Store(true)
			_ = c.ws.Close() // the reader fails and finishes the Conn
			return
		}
		// WriteControl may run concurrently with a writer.
		_ = c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.o.PingInterval))
	}
}

// CheckURL returns nil if rawURL is a ws:// or wss:// URL with a host, an
// error wrapping ErrURL otherwise.
func CheckURL(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("%w: %q: %w", ErrURL, rawURL, err)
	}
	if (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return fmt.Errorf("%w: %q", ErrURL, rawURL)
	}
	return nil
}

// Compressed reports whether the relay accepted permessage-deflate
// (Options.Compression).
func (c *Conn) Compressed() bool { return c.compressed }

// URL returns the URL the Conn was dialled to.
func (c *Conn) URL() string { return c.url }

// Resume starts the reader of a Conn dialled with Options.Paused. It does
// nothing on a Conn that reads already or has been closed.
func (c *Conn) Resume() {
	c.start.Do(func() {
		go c.read()
		if c.o.PingInterval > 0 {
			go c.ping()
		}
	})
}

// Close ends the connection: it sends a close frame (normal closure),
// closes the socket and waits for the reader to stop. It is idempotent,
// and may be called while other goroutines send or wait.
func (c *Conn) Close() {
	if c.closing.CompareAndSwap(false, true) {
		close(c.stop)
		// WriteControl may run concurrently with a writer.
		_ = c.ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		_ = c.ws.Close()
		c.start.Do(func() { c.finish(ErrClosed) }) // a Paused Conn never read
	}
	<-c.done
}

// Done is closed when the connection has ended and its reader stopped.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended (see ErrClosed), or nil while it
// is open.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Stats returns the connection's counters.
func (c *Conn) Stats() Stats {
	return Stats{Sent: c.sent.Load(), Received: c.recv.Load(), Dropped: c.dropped.Load()}
}

// WebSocket returns the underlying connection, for tests that must
// misbehave below the protocol (write a malformed frame, cut the TCP
// connection). Reading from it or writing to it without WriteFrame
// breaks the Conn.
func (c *Conn) WebSocket() *websocket.Conn { return c.ws }

// Challenge returns the last NIP-42 challenge the relay sent, or "".
func (c *Conn) Challenge() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.challenge
}

// Inbox returns the channel of unrouted messages, in arrival order. It is
// closed after the last message once the connection has ended.
func (c *Conn) Inbox() <-chan *Message { return c.inbox }

// Next returns the next message of the inbox, waiting for one until ctx
// ends. Once the connection has ended and the inbox is empty it returns
// the connection's error.
func (c *Conn) Next(ctx context.Context) (*Message, error) {
	select {
	case m, ok := <-c.inbox:
		if !ok {
			return nil, c.err
		}
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// read is the reader goroutine: it reads frames until the connection
// ends and routes each one.
func (c *Conn) read() {
	var err error
	for {
		var data []byte
		_, data, err = c.ws.ReadMessage()
		if err != nil {
			break
		}
		c.recv.Add(int64(len(data)))
		if !c.route(data) {
			break // Close was called
		}
	}
	if c.closing.Load() {
		err = ErrClosed
	} else if c.silent.Load() {
		err = &ConnClosedError{URL: c.url, Err: fmt.Errorf("nothing received for %v, not even a pong", 2*c.o.PingInterval)}
	} else {
		err = &ConnClosedError{URL: c.url, Err: err}
	}
	c.finish(err)
}

// ConnClosedError is the error of a connection the relay or the network
// ended: Err is the cause, a *websocket.CloseError when the relay sent a
// close frame (code 1006 when the connection ended without one). It
// wraps ErrClosed.
type ConnClosedError struct {
	URL string
	Err error
}

func (e *ConnClosedError) Error() string {
	return fmt.Sprintf("%v: %s: %v", ErrClosed, e.URL, e.Err)
}

// Unwrap returns ErrClosed and the cause.
func (e *ConnClosedError) Unwrap() []error { return []error{ErrClosed, e.Err} }

// route delivers one frame. It returns false when Close interrupted a
// wait for a consumer.
func (c *Conn) route(data []byte) bool {
	m, err := nostr.ParseRelayMessage(data)
	if err != nil {
		return c.toInbox(&Message{Raw: data, Err: err})
	}
	switch m.Type {
	case nostr.LabelOK:
		if ch := c.takeOK(m.EventID); ch != nil {
			select {
			case ch <- m:
				return true
			case <-c.stop:
				return false
			}
		}
	case nostr.LabelNotice:
	case nostr.LabelAuth:
		c.mu.Lock()
		c.challenge = m.Message
		c.mu.Unlock()
	default: // messages of a subscription
		c.mu.Lock()
		s := c.subs[m.SubID]
		c.mu.Unlock()
		if s != nil {
			select {
			case s.ch <- m:
				return true
			case <-s.gone: // unsubscribed meanwhile: unrouted
			case <-c.stop:
				return false
			}
		}
	}
	return c.toInbox(&Message{Raw: data, Relay: m})
}

// toInbox delivers an unrouted message: dropped and counted when the
// inbox is full, unless Options.InboxWait.
func (c *Conn) toInbox(m *Message) bool {
	if c.o.InboxWait {
		select {
		case c.inbox <- m:
			return true
		case <-c.stop:
			return false
		}
	}
	select {
	case c.inbox <- m:
	default:
		c.dropped.Add(1)
	}
	return true
}

// finish ends the connection's routing: it records err, closes the
// channels of the Subs still registered and the inbox, then done. It runs
// once, on the reader goroutine (or in Close when no reader ever ran), so
// no send on those channels can follow.
func (c *Conn) finish(err error) {
	c.err = err
	c.mu.Lock()
	c.ended = true
	for _, s := range c.subs {
		close(s.ch)
	}
	c.subs, c.oks = nil, nil
	c.mu.Unlock()
	close(c.inbox)
	close(c.done)
}

// takeOK removes and returns the first channel waiting for the OK of id,
// or nil.
func (c *Conn) takeOK(id nostr.ID) chan<- *nostr.RelayMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.oks[id]
	if len(w) == 0 {
		return nil
	}
	if len(w) == 1 {
		delete(c.oks, id)
	} else {
		c.oks[id] = w[1:]
	}
	return w[0]
}

// waitOK registers ch for the next OK of id.
func (c *Conn) waitOK(id nostr.ID, ch chan<- *nostr.RelayMessage) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return c.err
	}
	c.oks[id] = append(c.oks[id], ch)
	return nil
}

// forgetOK removes the first registration of ch for id and reports
// whether there was one (false: the reader has taken it, or the
// connection has ended).
func (c *Conn) forgetOK(id nostr.ID, ch chan<- *nostr.RelayMessage) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.oks[id]
	for i, x := range w {
		if x == ch {
			if len(w) == 1 {
				delete(c.oks, id)
			} else {
				c.oks[id] = append(w[:i:i], w[i+1:]...)
			}
			return true
		}
	}
	return false
}

// WriteFrame writes one frame of type typ (websocket.TextMessage,
// websocket.BinaryMessage) as it is. It is for tests; SendRaw sends a
// text frame.
func (c *Conn) WriteFrame(typ int, data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeLocked(typ, data)
}

// SendRaw sends msg as one text frame. msg is not retained.
func (c *Conn) SendRaw(msg []byte) error { return c.WriteFrame(websocket.TextMessage, msg) }

// send builds a frame with build (appending to the slice it is given)
// and sends it as text.
func (c *Conn) send(build func([]byte) []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf = build(c.wbuf[:0])
	err := c.writeLocked(websocket.TextMessage, c.wbuf)
	if cap(c.wbuf) > bufferSize {
		c.wbuf = nil // keep no large buffer between sends
	}
	return err
}

// writeLocked writes one frame. c.wmu must be held.
func (c *Conn) writeLocked(typ int, data []byte) error {
	if c.closing.Load() {
		return ErrClosed
	}
	select {
	case <-c.done: // the relay ended it
		return c.err
	default:
	}
	_ = c.ws.SetWriteDeadline(time.Now().Add(c.o.WriteTimeout))
	if err := c.ws.WriteMessage(typ, data); err != nil {
		if c.closing.Load() {
			return ErrClosed
		}
		return fmt.Errorf("client: send to %s: %w", c.url, err)
	}
	c.sent.Add(int64(len(data)))
	return nil
}
