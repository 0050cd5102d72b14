package bench

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// DialConfig says how Dial connects.
type DialConfig struct {
	// URL is the relay's ws:// (or wss://) URL.
	URL string
	// LocalIP binds the connection's source address (for example
	// 127.0.0.5); nil leaves the choice to the kernel.
	LocalIP net.IP
	// ReadBuffer sets the socket's receive buffer (SO_RCVBUF) in bytes;
	// 0 keeps the system default. A small value makes a slow reader push
	// back on the relay quickly.
	ReadBuffer int
	// HandshakeTimeout bounds the TCP connect and WebSocket upgrade.
	// Default 10s.
	HandshakeTimeout time.Duration
	// BufferSize is the client's read and write buffer size in bytes.
	// Default 16 KiB.
	BufferSize int
	// WriteBufferPool, if set, lends write buffers between writes (for many
	// mostly idle connections).
	WriteBufferPool websocket.BufferPool
	// FastEvents hands EVENT messages to the handler without parsing the
	// event: the message carries SubID and, in EventID, the event's id, and
	// Event and RawEvent are nil. It is for subscribers that only count
	// deliveries of events they already know, where a full parse would
	// make the client, not the relay, the bottleneck. A message the fast
	// path cannot read with certainty (escapes in the subscription id, no
	// `"id":"<64 hex>"` member) is parsed in full as usual.
	FastEvents bool
	// Compress offers permessage-deflate (RFC 7692, without context
	// takeover); Conn.Compressed says whether the relay accepted.
	Compress bool
	// WireIn, if set, is added the bytes read from the TCP connection
	// (what the relay sent on the wire, compressed or not).
	WireIn *atomic.Int64
}

// countingConn adds the bytes it reads to n.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// Handler receives each relay message of a connection, on the
// connection's reader goroutine, with the time it was read. The message is
// the handler's to keep. A slow handler is a slow reader: the relay's
// messages queue up behind it.
type Handler func(m *nostr.RelayMessage, at time.Time)

// writeTimeout bounds one write to the relay, so a relay that stops reading
// cannot hang a scenario past its deadline.
const writeTimeout = 30 * time.Second

// Conn is one WebSocket connection to a relay, with a reader goroutine that
// parses every message with nostr.ParseRelayMessage and hands it to the
// Handler. Send is safe for concurrent use. A Conn lives until Close or
// until the relay closes it; Done is closed when its reader has stopped,
// after which the handler is never called again.
type Conn struct {
	ws      *websocket.Conn
	h       Handler
	wmu     sync.Mutex
	closing atomic.Bool
	done    chan struct{}
	err     error // set before done is closed

	fast       bool
	compressed bool // permessage-deflate was negotiated

	// BadMessages counts relay messages that could not be parsed;
	// FirstBad holds the first one's error (guarded by badMu).
	BadMessages atomic.Int64
	badMu       sync.Mutex
	firstBad    string
}

// Compressed reports whether the relay accepted permessage-deflate
// (DialConfig.Compress).
func (c *Conn) Compressed() bool { return c.compressed }

// Dial connects to cfg.URL and starts the reader. h must not be nil.
func Dial(ctx context.Context, cfg DialConfig, h Handler) (*Conn, error) {
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	if cfg.BufferSize <= 0 {
		cfg.BufferSize = 16 << 10
	}
	nd := &net.Dialer{Timeout: cfg.HandshakeTimeout}
	if cfg.LocalIP != nil {
		nd.LocalAddr = &net.TCPAddr{IP: cfg.LocalIP}
	}
	if cfg.ReadBuffer > 0 {
		n := cfg.ReadBuffer
		nd.Control = func(network, address string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
			})
			if err != nil {
				return err
			}
			return serr
		}
	}
	dial := nd.DialContext
	if cfg.WireIn != nil {
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := nd.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{Conn: c, n: cfg.WireIn}, nil
		}
	}
	d := websocket.Dialer{
		NetDialContext:    dial,
		HandshakeTimeout:  cfg.HandshakeTimeout,
		ReadBufferSize:    cfg.BufferSize,
		WriteBufferSize:   cfg.BufferSize,
		WriteBufferPool:   cfg.WriteBufferPool,
		EnableCompression: cfg.Compress,
	}
	ws, resp, err := d.DialContext(ctx, cfg.URL, http.Header{})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("dial %s: %w (HTTP %s)", cfg.URL, err, resp.Status)
		}
		return nil, fmt.Errorf("dial %s: %w", cfg.URL, err)
	}
	ws.SetReadLimit(-1)
	c := &Conn{ws: ws, h: h, done: make(chan struct{}), fast: cfg.FastEvents}
	c.compressed = cfg.Compress && resp != nil && strings.Contains(resp.Header.Get("Sec-WebSocket-Extensions"), "permessage-deflate")
	go c.readLoop()
	return c, nil
}

func (c *Conn) readLoop() {
	defer close(c.done)
	buf := make([]byte, 0, 4096)
	for {
		// Read each message into one reused buffer: parsed messages never
		// alias their input.
		_, rd, err := c.ws.NextReader()
		if err == nil {
			buf, err = readAll(rd, buf[:0])
		}
		if err != nil {
			if !c.closing.Load() {
				c.err = err
			}
			return
		}
		data := buf
		if cap(buf) > 1<<20 {
			buf = make([]byte, 0, 4096) // do not keep a huge buffer
		}
		at := time.Now()
		if c.fast {
			if m, ok := fastEvent(data); ok {
				c.h(m, at)
				continue
			}
		}
		m, perr := nostr.ParseRelayMessage(data)
		if perr != nil {
			if c.BadMessages.Add(1) == 1 {
				c.badMu.Lock()
				c.firstBad = fmt.Sprintf("%v: %.200q", perr, data)
				c.badMu.Unlock()
			}
			continue
		}
		c.h(m, at)
	}
}

// ErrClosed reports a send on a connection that is closed.
var ErrClosed = errors.New("bench: connection closed")

// Send writes one text frame. It fails once the connection is closed.
func (c *Conn) Send(frame []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.done:
		return ErrClosed
	default:
	}
	c.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
	return c.ws.WriteMessage(websocket.TextMessage, frame)
}

// Close sends a normal close frame and closes the socket. It is
// idempotent and safe to call from any goroutine; it does not wait for the
// reader (see Done).
func (c *Conn) Close() {
	if c.closing.Swap(true) {
		return
	}
	_ = c.ws.WriteControl(websocket.CloseMessage,
		websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	_ = c.ws.Close()
}

// Done is closed when the reader has stopped.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the reader stopped when the relay (or the network)
// ended the connection, and nil while it runs or after Close. Call it
// after Done is closed.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Lost reports whether the connection ended without Close being called.
func (c *Conn) Lost() bool {
	select {
	case <-c.done:
		return c.err != nil
	default:
		return false
	}
}

// FirstBad returns the first unparseable message's error, or "".
func (c *Conn) FirstBad() string {
	c.badMu.Lock()
	defer c.badMu.Unlock()
	return c.firstBad
}

// readAll appends everything r yields to buf.
func readAll(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// fastEvent reads ["EVENT","<subid>",{..."id":"<hex>"...}] without parsing
// the event. It reports false for anything else, or anything it cannot
// read with certainty (then the caller parses in full). Inside a JSON
// string a quote is always escaped, so the first `"id":"` in the object is
// its id member.
func fastEvent(data []byte) (*nostr.RelayMessage, bool) {
	const head = `["EVENT","`
	if !bytes.HasPrefix(data, []byte(head)) {
		return nil, false
	}
	rest := data[len(head):]
	q := bytes.IndexByte(rest, '"')
	if q < 0 || bytes.IndexByte(rest[:q], '\\') >= 0 || len(rest) < q+2 || rest[q+1] != ',' {
		return nil, false
	}
	sub := rest[:q]
	obj := rest[q+2:]
	if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != ']' {
		return nil, false
	}
	k := bytes.Index(obj, []byte(`"id":"`))
	if k < 0 || len(obj) < k+6+65 || obj[k+6+64] != '"' {
		return nil, false
	}
	m := &nostr.RelayMessage{Type: nostr.LabelEvent, SubID: string(sub)}
	if _, err := hex.Decode(m.EventID[:], obj[k+6:k+6+64]); err != nil {
		return nil, false
	}
	for _, ch := range obj[k+6 : k+6+64] {
		if ch >= 'A' && ch <= 'F' {
			return nil, false // NIP-01 ids are lowercase: let the parser judge
		}
	}
	return m, true
}
