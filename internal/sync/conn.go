package sync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	gosync "sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// maxFrame bounds one message read from a relay.
const maxFrame = 16 << 20

// errConnClosed is the error of a connection that ended.
var errConnClosed = errors.New("sync: connection closed")

// conn is one WebSocket connection to a relay. A reader goroutine parses
// every message and routes it: messages carrying a subscription id to the
// channel registered for it (dropped when none is), OK to oks, NOTICE to
// notices. Sends are safe for concurrent use. A conn lives until close or
// until the relay closes it; done is closed then, and err says why.
type conn struct {
	url  string
	ws   *websocket.Conn
	wmu  gosync.Mutex
	sent atomic.Int64 // payload bytes sent
	recv atomic.Int64 // payload bytes received

	mu   gosync.Mutex
	subs map[string]*route

	oks     chan *nostr.RelayMessage
	notices chan string

	done    chan struct{}
	err     error         // set before done is closed
	stop    chan struct{} // closed by close: the reader stops blocking
	closing atomic.Bool
}

// route is the channel of one subscription id. gone is closed when the
// subscription is unregistered, so the reader never blocks on it.
type route struct {
	ch   chan *nostr.RelayMessage
	gone chan struct{}
}

// dial connects to a relay.
func dial(ctx context.Context, u string) (*conn, error) {
	d := websocket.Dialer{HandshakeTimeout: 15 * time.Second, ReadBufferSize: 64 << 10, WriteBufferSize: 64 << 10}
	ws, resp, err := d.DialContext(ctx, u, nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", u, err)
	}
	ws.SetReadLimit(maxFrame)
	c := &conn{
		url:     u,
		ws:      ws,
		subs:    make(map[string]*route),
		oks:     make(chan *nostr.RelayMessage, 1024),
		notices: make(chan string, 16),
		done:    make(chan struct{}),
		stop:    make(chan struct{}),
	}
	go c.read()
	return c, nil
}

func (c *conn) read() {
	defer close(c.done)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			if c.closing.Load() {
				c.err = errConnClosed
			} else {
				c.err = fmt.Errorf("%s: %w", c.url, err)
			}
			return
		}
		c.recv.Add(int64(len(data)))
		m, err := nostr.ParseRelayMessage(data)
		if err != nil {
			continue // not ours to judge; the waits time out if it mattered
		}
		switch m.Type {
		case nostr.LabelOK:
			select { // bounded by the upload window
			case c.oks <- m:
			case <-c.stop:
			}
		case nostr.LabelNotice:
			select {
			case c.notices <- m.Message:
			default:
			}
		case nostr.LabelAuth:
		default:
			c.mu.Lock()
			r := c.subs[m.SubID]
			c.mu.Unlock()
			if r != nil {
				select {
				case r.ch <- m:
				case <-r.gone:
				case <-c.stop:
				}
			}
		}
	}
}

// subscribe registers a channel for messages with subscription id id.
func (c *conn) subscribe(id string, buf int) *route {
	r := &route{ch: make(chan *nostr.RelayMessage, buf), gone: make(chan struct{})}
	c.mu.Lock()
	if old := c.subs[id]; old != nil {
		close(old.gone)
	}
	c.subs[id] = r
	c.mu.Unlock()
	return r
}

// unsubscribe drops the channel registered for id, if it is r.
func (c *conn) unsubscribe(id string, r *route) {
	c.mu.Lock()
	if c.subs[id] == r {
		delete(c.subs, id)
		close(r.gone)
	}
	c.mu.Unlock()
}

// send writes one text message.
func (c *conn) send(msg []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if err := c.ws.WriteMessage(websocket.TextMessage, msg); err != nil {
		return fmt.Errorf("%s: send: %w", c.url, err)
	}
	c.sent.Add(int64(len(msg)))
	return nil
}

// failed returns the connection's error once it ended.
func (c *conn) failed() error {
	<-c.done
	return c.err
}

// close closes the connection and waits for the reader.
func (c *conn) close() {
	if !c.closing.CompareAndSwap(false, true) {
		<-c.done
		return
	}
	close(c.stop)
	c.wmu.Lock()
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	c.wmu.Unlock()
	_ = c.ws.Close()
	<-c.done
}

// drainNotices empties the notice channel.
func (c *conn) drainNotices() {
	for {
		select {
		case <-c.notices:
		default:
			return
		}
	}
}

// info is what Run uses of a relay's NIP-11 document.
type info struct {
	SupportedNIPs []int `json:"supported_nips"`
	Limitation    struct {
		MaxMessageLength int `json:"max_message_length"`
		MaxSubscriptions int `json:"max_subscriptions"`
		MaxFilters       int `json:"max_filters"`
		MaxLimit         int `json:"max_limit"`
	} `json:"limitation"`
}

// fetchInfo reads a relay's NIP-11 document. A relay without one gets
// the zero info (no known limits).
func fetchInfo(ctx context.Context, wsURL string) (info, error) {
	var inf info
	u, err := url.Parse(wsURL)
	if err != nil {
		return inf, err
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	default:
		return inf, fmt.Errorf("%w: %q is not a ws:// or wss:// URL", ErrOptions, wsURL)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return inf, err
	}
	req.Header.Set("Accept", "application/nostr+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return inf, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return inf, fmt.Errorf("NIP-11: HTTP %s", strconv.Itoa(resp.StatusCode))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return inf, err
	}
	if err := json.Unmarshal(body, &inf); err != nil {
		return info{}, fmt.Errorf("NIP-11: %w", err)
	}
	return inf, nil
}
