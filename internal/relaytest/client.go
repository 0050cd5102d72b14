package relaytest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// DefaultTimeout bounds every wait of the test client. It is a guard
// against hangs, not a performance assertion.
var DefaultTimeout = 15 * time.Second

// Client is a WebSocket test client. A background goroutine reads every
// message into a queue (unless the client was dialed with NoRead), so a
// test can wait for a message, or check that none arrived, without ever
// breaking the connection with a read deadline.
type Client struct {
	t    testing.TB
	Conn *websocket.Conn
	wmu  sync.Mutex

	mu       sync.Mutex
	cond     *sync.Cond
	queue    [][]byte
	readErr  error
	closeErr *websocket.CloseError
	done     chan struct{}
	resume   sync.Once
}

// DialOptions change how a client connects.
type DialOptions struct {
	// NoRead: do not read at all (a client that never drains its socket).
	NoRead bool
	// Paused: do not read until Resume is called (a client that stops
	// draining its socket for a while).
	Paused bool
	// ReadBuffer sets the client's socket receive buffer (SO_RCVBUF, set
	// before connecting so the TCP window is small from the start; the
	// kernel doubles the value and enforces a minimum). 0: default.
	ReadBuffer int
	// Header is sent with the upgrade request (e.g. X-Forwarded-For, as a
	// reverse proxy would).
	Header http.Header
	// LocalIP is the source address to connect from ("127.0.0.2"); empty:
	// the kernel's choice.
	LocalIP string
}

// HandshakeError is a refused upgrade: the relay answered with an HTTP
// status instead of 101.
type HandshakeError struct {
	Status int
	Err    error
}

func (e *HandshakeError) Error() string { return fmt.Sprintf("HTTP %d: %v", e.Status, e.Err) }
func (e *HandshakeError) Unwrap() error { return e.Err }

// Dial connects to url and fails the test on error.
func Dial(t testing.TB, url string) *Client {
	t.Helper()
	c, err := DialWith(t, url, DialOptions{})
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	return c
}

// DialWith connects with options and returns the error instead of
// failing.
func DialWith(t testing.TB, url string, o DialOptions) (*Client, error) {
	d := websocket.Dialer{HandshakeTimeout: DefaultTimeout, ReadBufferSize: 1 << 16, WriteBufferSize: 1 << 16}
	if o.ReadBuffer > 0 || o.LocalIP != "" {
		nd := &net.Dialer{Timeout: DefaultTimeout}
		if o.LocalIP != "" {
			ip := net.ParseIP(o.LocalIP)
			if ip == nil {
				return nil, fmt.Errorf("relaytest: LocalIP %q is not an address", o.LocalIP)
			}
			nd.LocalAddr = &net.TCPAddr{IP: ip}
		}
		if o.ReadBuffer > 0 {
			nd.Control = func(_, _ string, rc syscall.RawConn) error {
				var serr error
				err := rc.Control(func(fd uintptr) {
					serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, o.ReadBuffer)
				})
				if err != nil {
					return err
				}
				return serr
			}
		}
		d.NetDialContext = nd.DialContext
	}
	conn, resp, err := d.Dial(url, o.Header)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		if resp != nil {
			return nil, &HandshakeError{Status: resp.StatusCode, Err: err}
		}
		return nil, err
	}
	conn.SetReadLimit(-1)
	c := &Client{t: t, Conn: conn, done: make(chan struct{})}
	c.cond = sync.NewCond(&c.mu)
	switch {
	case o.NoRead:
		close(c.done)
		c.resume.Do(func() {}) // Resume is a no-op
	case o.Paused:
	default:
		c.Resume()
	}
	t.Cleanup(func() { c.Close() })
	return c, nil
}

// Resume starts reading on a client dialed with Paused. It is a no-op on
// a client that already reads, and on a NoRead client.
func (c *Client) Resume() { c.resume.Do(func() { go c.readLoop() }) }

func (c *Client) readLoop() {
	defer close(c.done)
	for {
		_, data, err := c.Conn.ReadMessage()
		c.mu.Lock()
		if err != nil {
			c.readErr = err
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				c.closeErr = ce
			}
			c.cond.Broadcast()
			c.mu.Unlock()
			return
		}
		c.queue = append(c.queue, data)
		c.cond.Broadcast()
		c.mu.Unlock()
	}
}

// Close closes the connection (idempotent).
func (c *Client) Close() {
	c.wmu.Lock()
	_ = c.Conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	c.wmu.Unlock()
	_ = c.Conn.Close()
}

// SendRaw sends one text frame.
func (c *Client) SendRaw(msg string) {
	c.t.Helper()
	if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// WriteMessage writes a frame of any type.
func (c *Client) WriteMessage(typ int, data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.Conn.SetWriteDeadline(time.Now().Add(DefaultTimeout))
	return c.Conn.WriteMessage(typ, data)
}

// Send sends v (a []any envelope, or anything) as JSON.
func (c *Client) Send(v ...any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatalf("marshal: %v", err)
	}
	c.SendRaw(string(b))
}

// nextRaw waits up to d for the next message.
func (c *Client) nextRaw(d time.Duration) ([]byte, error) {
	deadline := time.Now().Add(d)
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.queue) == 0 && c.readErr == nil {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, errTimeout
		}
		t := time.AfterFunc(left, func() { c.mu.Lock(); c.cond.Broadcast(); c.mu.Unlock() })
		c.cond.Wait()
		t.Stop()
	}
	if len(c.queue) > 0 {
		m := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		return m, nil
	}
	return nil, c.readErr
}

var errTimeout = errors.New("relaytest: timeout waiting for a message")

// IsTimeout reports whether err is the client's wait timeout.
func IsTimeout(err error) bool { return errors.Is(err, errTimeout) }

// ReadWithin returns the next message parsed, or an error (timeout,
// connection closed, unparseable message).
func (c *Client) ReadWithin(d time.Duration) (*nostr.RelayMessage, error) {
	raw, err := c.nextRaw(d)
	if err != nil {
		return nil, err
	}
	m, err := nostr.ParseRelayMessage(raw)
	if err != nil {
		return nil, fmt.Errorf("unparseable relay message %q: %w", truncate(raw), err)
	}
	return m, nil
}

// Read returns the next message and fails the test if none arrives.
func (c *Client) Read() *nostr.RelayMessage {
	c.t.Helper()
	m, err := c.ReadWithin(DefaultTimeout)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return m
}

// ReadRaw returns the next message unparsed.
func (c *Client) ReadRaw() []byte {
	c.t.Helper()
	raw, err := c.nextRaw(DefaultTimeout)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return raw
}

// ExpectNothing fails if a message arrives within d.
func (c *Client) ExpectNothing(d time.Duration) {
	c.t.Helper()
	raw, err := c.nextRaw(d)
	if err == nil {
		c.t.Fatalf("expected no message, got %s", truncate(raw))
	}
	if !IsTimeout(err) {
		c.t.Fatalf("expected no message, got error %v", err)
	}
}

// ExpectType reads the next message and checks its type.
func (c *Client) ExpectType(typ string) *nostr.RelayMessage {
	c.t.Helper()
	m := c.Read()
	if m.Type != typ {
		c.t.Fatalf("expected %s, got %s %+v", typ, m.Type, summarize(m))
	}
	return m
}

// ExpectNotice reads a NOTICE whose message contains substr.
func (c *Client) ExpectNotice(substr string) *nostr.RelayMessage {
	c.t.Helper()
	m := c.ExpectType("NOTICE")
	if !strings.Contains(m.Message, substr) {
		c.t.Fatalf("NOTICE %q does not contain %q", m.Message, substr)
	}
	return m
}

// ExpectClosed reads a CLOSED for subID whose message starts with prefix.
func (c *Client) ExpectClosed(subID, prefix string) *nostr.RelayMessage {
	c.t.Helper()
	m := c.ExpectType("CLOSED")
	if m.SubID != subID || !strings.HasPrefix(m.Message, prefix) {
		c.t.Fatalf("CLOSED %q %q, want sub %q prefix %q", m.SubID, m.Message, subID, prefix)
	}
	return m
}

// WaitClosed waits for the connection to be closed by the relay and
// returns the close frame's code (or -1 without one).
func (c *Client) WaitClosed(d time.Duration) int {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(d):
		c.t.Fatalf("connection not closed within %v", d)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closeErr != nil {
		return c.closeErr.Code
	}
	return -1
}

// Publish sends an event and returns its OK.
func (c *Client) Publish(ev *nostr.Event) *nostr.RelayMessage {
	c.t.Helper()
	c.SendRaw(`["EVENT",` + string(ev.Raw) + `]`)
	m := c.ExpectType("OK")
	if m.EventID != ev.ID {
		c.t.Fatalf("OK for %s, want %s", m.EventID.Hex(), ev.ID.Hex())
	}
	return m
}

// MustPublish publishes and fails unless OK is true.
func (c *Client) MustPublish(ev *nostr.Event) {
	c.t.Helper()
	if m := c.Publish(ev); !m.OK {
		c.t.Fatalf("event refused: %s", m.Message)
	}
}

// Req opens a subscription with raw JSON filters and returns the stored
// events up to EOSE. It fails the test on CLOSED.
func (c *Client) Req(subID string, filters ...string) []*nostr.Event {
	c.t.Helper()
	c.SendRaw(`["REQ",` + quote(subID) + `,` + strings.Join(filters, ",") + `]`)
	return c.UntilEOSE(subID)
}

// UntilEOSE collects EVENTs for subID until its EOSE.
func (c *Client) UntilEOSE(subID string) []*nostr.Event {
	c.t.Helper()
	var out []*nostr.Event
	for {
		m := c.Read()
		switch {
		case m.Type == "EVENT" && m.SubID == subID:
			out = append(out, m.Event)
		case m.Type == "EOSE" && m.SubID == subID:
			return out
		case m.Type == "CLOSED" && m.SubID == subID:
			c.t.Fatalf("subscription %s closed: %s", subID, m.Message)
		default:
			c.t.Fatalf("unexpected %s while waiting for EOSE of %s: %+v", m.Type, subID, summarize(m))
		}
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

func summarize(m *nostr.RelayMessage) string {
	s := fmt.Sprintf("sub=%q msg=%q ok=%v", m.SubID, m.Message, m.OK)
	if m.Event != nil {
		s += " event=" + m.Event.ID.Hex()[:12]
	}
	return s
}
