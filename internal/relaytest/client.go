package relaytest

import (
	"context"
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

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/nostr"
)

// DefaultTimeout bounds every wait of the test client. It is a guard
// against hangs, not a performance assertion.
var DefaultTimeout = 15 * time.Second

// Client is a WebSocket test client: a thin layer over client.Conn. A
// background goroutine moves every message the Conn reads into an
// unbounded queue (unless the client was dialed with NoRead), so a test
// can wait for a message, or check that none arrived, without ever
// breaking the connection with a read deadline, and a relay never sees
// a test client as a slow reader unless the test means it to.
type Client struct {
	t   testing.TB
	url string
	// Conn is the underlying WebSocket connection, for tests that
	// misbehave below the protocol (UnderlyingConn).
	Conn *websocket.Conn
	c    *client.Conn

	mu     sync.Mutex
	cond   *sync.Cond
	queue  []*client.Message
	ended  bool // the Conn's inbox is closed and drained into queue
	noRead bool
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
	// Compression offers permessage-deflate (client.Options.Compression).
	Compression bool
}

// HandshakeError is a refused upgrade: the relay answered with an HTTP
// status instead of 101.
type HandshakeError = client.HandshakeError

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
	co := client.Options{
		HandshakeTimeout: DefaultTimeout,
		WriteTimeout:     DefaultTimeout,
		MaxMessageSize:   -1,
		Header:           o.Header,
		InboxWait:        true, // the pump below drains it
		Paused:           o.NoRead || o.Paused,
		Compression:      o.Compression,
	}
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
		co.NetDial = nd.DialContext
	}
	conn, err := client.Dial(context.Background(), url, co)
	if err != nil {
		return nil, err
	}
	c := &Client{t: t, url: url, Conn: conn.WebSocket(), c: conn, noRead: o.NoRead}
	c.cond = sync.NewCond(&c.mu)
	go c.pump()
	t.Cleanup(c.Close)
	return c, nil
}

// pump moves the Conn's messages into the queue until its inbox closes.
func (c *Client) pump() {
	for m := range c.c.Inbox() {
		c.mu.Lock()
		c.queue = append(c.queue, m)
		c.cond.Broadcast()
		c.mu.Unlock()
	}
	c.mu.Lock()
	c.ended = true
	c.cond.Broadcast()
	c.mu.Unlock()
}

// Resume starts reading on a client dialed with Paused. It is a no-op on
// a client that already reads, and on a NoRead client.
func (c *Client) Resume() {
	if !c.noRead {
		c.c.Resume()
	}
}

// Compressed reports whether the relay accepted permessage-deflate
// (DialOptions.Compression).
func (c *Client) Compressed() bool { return c.c.Compressed() }

// Close closes the connection (idempotent).
func (c *Client) Close() { c.c.Close() }

// SendRaw sends one text frame.
func (c *Client) SendRaw(msg string) {
	c.t.Helper()
	if err := c.c.SendRaw([]byte(msg)); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// WriteMessage writes a frame of any type (websocket.TextMessage,
// websocket.BinaryMessage).
func (c *Client) WriteMessage(typ int, data []byte) error { return c.c.WriteFrame(typ, data) }

// Send sends v (a []any envelope, or anything) as JSON.
func (c *Client) Send(v ...any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatalf("marshal: %v", err)
	}
	c.SendRaw(string(b))
}

// next waits up to d for the next message. Once the connection has
// ended, every message it received is returned before its error.
func (c *Client) next(d time.Duration) (*client.Message, error) {
	deadline := time.Now().Add(d)
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.queue) == 0 && !c.ended {
		left := time.Until(deadline)
		if left <= 0 {
			select {
			case <-c.c.Done():
				// Ended: the pump is moving the last messages; they
				// were received, so wait for them.
				c.cond.Wait()
				continue
			default:
			}
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
	if err := c.c.Err(); err != nil {
		return nil, err
	}
	return nil, errEnded
}

var (
	errTimeout = errors.New("relaytest: timeout waiting for a message")
	errEnded   = errors.New("relaytest: connection ended")
)

// IsTimeout reports whether err is the client's wait timeout.
func IsTimeout(err error) bool { return errors.Is(err, errTimeout) }

// ReadWithin returns the next message parsed, or an error (timeout,
// connection closed, unparseable message).
func (c *Client) ReadWithin(d time.Duration) (*nostr.RelayMessage, error) {
	m, err := c.next(d)
	if err != nil {
		return nil, err
	}
	if m.Err != nil {
		return nil, fmt.Errorf("unparseable relay message %q: %w", truncate(m.Raw), m.Err)
	}
	return m.Relay, nil
}

// Read returns the next message and fails the test if none arrives.
func (c *Client) Read() *nostr.RelayMessage {
	c.t.Helper()
	m, err := c.ReadWithin(DefaultTimeout)
	if err != nil {
		c.t.Fatalf("read: %v%s", err, c.diagnose(err))
	}
	return m
}

// ReadRaw returns the next message unparsed.
func (c *Client) ReadRaw() []byte {
	c.t.Helper()
	m, err := c.next(DefaultTimeout)
	if err != nil {
		c.t.Fatalf("read: %v%s", err, c.diagnose(err))
	}
	return m.Raw
}

// ExpectNothing fails if a message arrives within d.
func (c *Client) ExpectNothing(d time.Duration) {
	c.t.Helper()
	m, err := c.next(d)
	if err == nil {
		c.t.Fatalf("expected no message, got %s", truncate(m.Raw))
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
// returns the close frame's code (or -1 without one, and at once for a
// NoRead client, which cannot see the close).
func (c *Client) WaitClosed(d time.Duration) int {
	c.t.Helper()
	if c.noRead {
		return -1
	}
	select {
	case <-c.c.Done():
	case <-time.After(d):
		c.t.Fatalf("connection not closed within %v", d)
	}
	var ce *websocket.CloseError
	if errors.As(c.c.Err(), &ce) {
		return ce.Code
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
