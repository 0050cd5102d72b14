package bench

import (
	"bytes"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/klauspost/compress/flate"
	"github.com/lesismal/nbio"
	"github.com/lesismal/nbio/logging"
)

var nbioLogOnce sync.Once

// The conns scenario's client: many idle WebSocket connections on one
// nbio engine (one epoll poller goroutine), with no goroutine and no
// buffer per idle connection. A connection is dialled and upgraded in
// blocking mode by one of a few dial goroutines, sends its REQ, and is
// then handed to the poller, which reads every connection into one
// shared buffer and runs the frame parser below on it. A connection keeps
// bytes of its own only while a frame or a fragmented message is split
// across reads, and drops them when it completes.
//
// It speaks the client side of RFC 6455 that a Nostr subscriber needs:
// masked text frames out (REQ, pong, close), text, ping, pong, close and
// continuation frames in, and permessage-deflate (RFC 7692, no context
// takeover either way) on what it receives; it never compresses what it
// sends, which the extension allows. ws:// only.

// leanEngine is the poller the connections of one conns group share.
type leanEngine struct {
	eng *nbio.Engine
}

// newLeanEngine starts an nbio engine with one poller; closed is called
// (on a goroutine of nbio's) when a registered connection ends.
func newLeanEngine(data func(c *nbio.Conn, b []byte), closed func(c *nbio.Conn, err error)) (*leanEngine, error) {
	// nbio's default logger writes to stdout, which is the bench's
	// report (--json) and a worker's channel to its parent; and its
	// start and stop lines are noise there. (A relay in the same
	// process, as in tests, has set a logger of its own.)
	nbioLogOnce.Do(func() {
		logging.Output = os.Stderr
		logging.SetLevel(logging.LevelWarn)
	})
	e := &leanEngine{eng: nbio.NewEngine(nbio.Config{Name: "bench-conns", NPoller: 1, ReadBufferSize: 64 << 10})}
	e.eng.OnData(data)
	e.eng.OnClose(closed)
	if err := e.eng.Start(); err != nil {
		return nil, fmt.Errorf("bench: start the client poller: %w", err)
	}
	return e, nil
}

// Connection state bits (leanConn.state).
const (
	lsEnded   = 1 << iota // EOSE or CLOSED arrived
	lsClosed              // the subscription was CLOSED
	lsDone                // the connection has ended
	lsLost                // ... without Close being called
	lsClosing             // Close was called
	lsSettled             // its dial slot has been returned
	lsDeflate             // permessage-deflate negotiated
)

// leanConn is one idle subscribed connection (152 bytes, plus nbio's
// Conn).
type leanConn struct {
	nc  *nbio.Conn
	raw net.Conn // during the handshake, before nc exists
	idx int32    // connection First+idx of the spec

	state    atomic.Uint32
	seen     atomic.Uint64 // bit k: liveness event k arrived
	dup      atomic.Int32  // liveness deliveries of an event already seen
	recvAt   atomic.Int64  // unix nanos of the first liveness delivery
	lastAt   atomic.Int64  // unix nanos of the last liveness delivery
	started  int64         // unix nanos the dial started
	connectD int64         // nanos from started to EOSE
	err      error         // why it ended (set before lsDone)

	// Reader state, touched only by whoever reads the connection (the
	// dial goroutine before registration, the poller after).
	rest   []byte // an incomplete frame's bytes; nil when none
	frag   []byte // a fragmented message so far; nil when none
	fragZ  bool   // ... and whether it is compressed
	inFrag bool
}

func (c *leanConn) has(bit uint32) bool { return c.state.Load()&bit != 0 }

// set sets bit and reports whether this call set it.
func (c *leanConn) set(bit uint32) bool { return c.state.Or(bit)&bit == 0 }

// Lost reports whether the connection ended without Close.
func (c *leanConn) Lost() bool { return c.has(lsLost) }

// Err is why a lost connection ended.
func (c *leanConn) Err() error {
	if !c.has(lsDone) {
		return nil
	}
	return c.err
}

// ended records the end of the connection: lost (with err) unless Close
// was called.
func (c *leanConn) ended(err error) {
	if c.has(lsDone) {
		return
	}
	if !c.has(lsClosing) {
		if err == nil {
			err = io.EOF
		}
		c.err = err
		c.state.Or(lsLost | lsDone)
		return
	}
	c.state.Or(lsDone)
}

// send writes one masked client frame.
func (c *leanConn) send(op byte, payload []byte) error {
	frame := clientFrame(op, payload)
	if c.nc != nil {
		_, err := c.nc.Write(frame)
		return err
	}
	if c.raw == nil {
		return ErrClosed
	}
	_, err := c.raw.Write(frame)
	return err
}

// fail closes the connection because of what it read.
func (c *leanConn) fail(err error) {
	if c.nc != nil {
		c.err = err // the poller reports the close with no error
		if !c.has(lsClosing) {
			c.state.Or(lsLost)
		}
		_ = c.nc.CloseWithError(err)
		return
	}
	c.ended(err)
	if c.raw != nil {
		_ = c.raw.Close()
	}
}

// Close sends a normal close frame and closes the socket. It does not
// wait for nbio's close callback.
func (c *leanConn) Close() {
	if !c.set(lsClosing) || c.nc == nil {
		return
	}
	_ = c.send(wsClose, []byte{0x03, 0xe8}) // 1000, normal closure
	_ = c.nc.Close()
}

// WebSocket opcodes.
const (
	wsCont   = 0x0
	wsText   = 0x1
	wsBinary = 0x2
	wsClose  = 0x8
	wsPing   = 0x9
	wsPong   = 0xA
)

// clientFrame returns one final frame of op with payload, masked with a
// random key as a client must (RFC 6455 5.3).
func clientFrame(op byte, payload []byte) []byte {
	n := len(payload)
	hdr := 2
	switch {
	case n > 0xffff:
		hdr += 8
	case n > 125:
		hdr += 2
	}
	b := make([]byte, hdr+4+n)
	b[0] = 0x80 | op
	switch hdr {
	case 2:
		b[1] = 0x80 | byte(n)
	case 4:
		b[1] = 0x80 | 126
		binary.BigEndian.PutUint16(b[2:], uint16(n))
	default:
		b[1] = 0x80 | 127
		binary.BigEndian.PutUint64(b[2:], uint64(n))
	}
	key := rand.Uint32()
	binary.LittleEndian.PutUint32(b[hdr:], key)
	mask := b[hdr : hdr+4]
	out := b[hdr+4:]
	for i := range payload {
		out[i] = payload[i] ^ mask[i&3]
	}
	return b
}

// onData parses the frames in b (what one read returned) and hands each
// complete message to msg. It keeps an incomplete tail for the next read.
func (c *leanConn) onData(b []byte, msg func(c *leanConn, data []byte)) {
	if c.rest != nil {
		b = append(c.rest, b...)
		c.rest = nil
	}
	for len(b) > 0 {
		n, err := c.frame(b, msg)
		if err != nil {
			c.fail(err)
			return
		}
		if n == 0 { // incomplete: keep it
			c.rest = append([]byte(nil), b...)
			return
		}
		b = b[n:]
		if c.has(lsDone|lsLost) || (c.nc == nil && c.raw == nil) {
			return
		}
	}
}

var errProtocol = errors.New("websocket: protocol error")

// frame handles the first frame of b and returns its length, or 0 when
// b does not hold all of it.
func (c *leanConn) frame(b []byte, msg func(c *leanConn, data []byte)) (int, error) {
	if len(b) < 2 {
		return 0, nil
	}
	fin, rsv1, op := b[0]&0x80 != 0, b[0]&0x40 != 0, b[0]&0x0f
	if b[0]&0x30 != 0 || b[1]&0x80 != 0 {
		return 0, fmt.Errorf("%w: reserved bits %#x or a masked frame from the server", errProtocol, b[0]&0x70|b[1]&0x80)
	}
	n, hdr := uint64(b[1]&0x7f), 2
	switch n {
	case 126:
		if len(b) < 4 {
			return 0, nil
		}
		n, hdr = uint64(binary.BigEndian.Uint16(b[2:])), 4
	case 127:
		if len(b) < 10 {
			return 0, nil
		}
		n, hdr = binary.BigEndian.Uint64(b[2:]), 10
		if n > 1<<40 {
			return 0, fmt.Errorf("%w: frame of %d bytes", errProtocol, n)
		}
	}
	if uint64(len(b)-hdr) < n {
		return 0, nil
	}
	end := hdr + int(n)
	p := b[hdr:end]
	switch op {
	case wsPing:
		if !fin || n > 125 {
			return 0, fmt.Errorf("%w: bad ping", errProtocol)
		}
		return end, c.send(wsPong, p)
	case wsPong:
		return end, nil
	case wsClose:
		reason := "websocket: close frame"
		if len(p) >= 2 {
			reason = fmt.Sprintf("websocket: close %d %s", binary.BigEndian.Uint16(p), p[2:])
		}
		if !c.has(lsClosing) {
			_ = c.send(wsClose, p[:min(len(p), 2)])
		}
		c.fail(errors.New(reason))
		return end, nil
	case wsText, wsBinary:
		if c.inFrag {
			return 0, fmt.Errorf("%w: a new message inside a fragmented one", errProtocol)
		}
		if fin {
			return end, c.deliver(p, rsv1, msg)
		}
		c.inFrag, c.fragZ, c.frag = true, rsv1, append([]byte(nil), p...)
		return end, nil
	case wsCont:
		if !c.inFrag {
			return 0, fmt.Errorf("%w: continuation without a message", errProtocol)
		}
		c.frag = append(c.frag, p...)
		if !fin {
			return end, nil
		}
		data, z := c.frag, c.fragZ
		c.frag, c.inFrag = nil, false
		return end, c.deliver(data, z, msg)
	}
	return 0, fmt.Errorf("%w: opcode %#x", errProtocol, op)
}

// deliver hands one message to msg, inflated if it is compressed.
func (c *leanConn) deliver(data []byte, compressed bool, msg func(c *leanConn, data []byte)) error {
	if compressed {
		if !c.has(lsDeflate) {
			return fmt.Errorf("%w: compressed message without permessage-deflate", errProtocol)
		}
		z := inflaters.Get().(*inflater)
		defer inflaters.Put(z)
		out, err := z.inflate(data)
		if err != nil {
			return fmt.Errorf("websocket: inflate: %w", err)
		}
		data = out
	}
	msg(c, data)
	return nil
}

// inflater inflates permessage-deflate messages (RFC 7692 7.2.2) into a
// reused buffer; the message handler must not keep what it is given.
type inflater struct {
	src bytes.Reader
	r   io.ReadCloser
	out []byte
}

var deflateTail = []byte{0x00, 0x00, 0xff, 0xff, 0x01, 0x00, 0x00, 0xff, 0xff}

var inflaters = sync.Pool{New: func() any { return &inflater{} }}

func (z *inflater) inflate(data []byte) ([]byte, error) {
	in := make([]byte, 0, len(data)+len(deflateTail))
	in = append(append(in, data...), deflateTail...)
	z.src.Reset(in)
	if z.r == nil {
		z.r = flate.NewReader(&z.src)
	} else if err := z.r.(flate.Resetter).Reset(&z.src, nil); err != nil {
		return nil, err
	}
	out, err := readAll(z.r, z.out[:0])
	if cap(out) <= 1<<20 {
		z.out = out
	}
	if err == io.ErrUnexpectedEOF {
		err = nil // the final empty block above ends the stream
	}
	return out, err
}

// wsGUID is RFC 6455's key suffix.
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// upgradeRequest returns the client's opening handshake for u and the key
// it sends.
func upgradeRequest(u *url.URL, compress bool) ([]byte, string) {
	var k [16]byte
	binary.LittleEndian.PutUint64(k[:], rand.Uint64())
	binary.LittleEndian.PutUint64(k[8:], rand.Uint64())
	key := base64.StdEncoding.EncodeToString(k[:])
	path := u.RequestURI()
	var b strings.Builder
	b.WriteString("GET " + path + " HTTP/1.1\r\nHost: " + u.Host +
		"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: " + key +
		"\r\nSec-WebSocket-Version: 13\r\n")
	if compress {
		b.WriteString("Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; client_no_context_takeover\r\n")
	}
	b.WriteString("\r\n")
	return []byte(b.String()), key
}

// ErrHandshake is a refused or malformed WebSocket upgrade.
var ErrHandshake = errors.New("websocket: bad handshake")

// readUpgrade reads the server's handshake from r into buf (its whole
// capacity), checks it answers key, and returns whether permessage-deflate
// was accepted and the bytes read past the handshake.
func readUpgrade(r io.Reader, buf []byte, key string) (deflate bool, rest []byte, err error) {
	buf = buf[:cap(buf)]
	n := 0
	end := -1
	for end < 0 {
		if n == len(buf) {
			return false, nil, fmt.Errorf("%w: response header over %d bytes", ErrHandshake, len(buf))
		}
		k, err := r.Read(buf[n:])
		n += k
		if end = bytes.Index(buf[:n], []byte("\r\n\r\n")); end >= 0 {
			break
		}
		if err != nil {
			if n == 0 && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
				// What a connection cap looks like from here: petrel
				// closes a connection past max_connections_per_ip or
				// max_connections at accept, before reading a byte.
				return false, nil, fmt.Errorf("reading the upgrade response: the relay closed the connection without answering (petrel does so past max_connections_per_ip or max_connections): %w", err)
			}
			return false, nil, fmt.Errorf("reading the upgrade response: %w", err)
		}
	}
	head, rest := string(buf[:end]), buf[end+4:n]
	lines := strings.Split(head, "\r\n")
	f := strings.SplitN(lines[0], " ", 3)
	if len(f) < 2 || !strings.HasPrefix(f[0], "HTTP/1.") {
		return false, nil, fmt.Errorf("%w: status line %.80q", ErrHandshake, lines[0])
	}
	if f[1] != "101" {
		return false, nil, fmt.Errorf("%w (HTTP %s)", ErrHandshake, strings.Join(f[1:], " "))
	}
	var upgrade, connection, accept, ext bool
	sum := sha1.Sum([]byte(key + wsGUID))
	want := base64.StdEncoding.EncodeToString(sum[:])
	for _, l := range lines[1:] {
		name, val, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "upgrade":
			upgrade = strings.EqualFold(val, "websocket")
		case "connection":
			for _, t := range strings.Split(val, ",") {
				connection = connection || strings.EqualFold(strings.TrimSpace(t), "upgrade")
			}
		case "sec-websocket-accept":
			accept = val == want
		case "sec-websocket-extensions":
			ext = ext || strings.Contains(val, "permessage-deflate")
		}
	}
	if !upgrade || !connection || !accept {
		return false, nil, fmt.Errorf("%w: upgrade %v, connection %v, accept %v", ErrHandshake, upgrade, connection, accept)
	}
	return ext, rest, nil
}

// hostPort is u's host and port (80 or 443 by default).
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "wss" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), strconv.Itoa(80))
}

// handshakeTimeout bounds one connection's TCP connect and upgrade.
const handshakeTimeout = 10 * time.Second
