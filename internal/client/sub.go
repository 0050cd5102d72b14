package client

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// Sub is the route of one subscription id on a Conn: every message
// carrying that id (EVENT, EOSE, CLOSED, COUNT, NEG-MSG, NEG-ERR) goes to
// its channel until Unsubscribe or Close. Its methods are safe for
// concurrent use; read its messages from one goroutine.
type Sub struct {
	c    *Conn
	id   string
	end  string // label of the message that ends it on the relay ("CLOSE", "NEG-CLOSE"), or ""
	ch   chan *nostr.RelayMessage
	gone chan struct{} // closed by Unsubscribe: the reader stops delivering
	once sync.Once
}

// Subscribe routes the messages of subscription id to a new Sub without
// sending anything (for requests sent with SendRaw); its Close sends
// CLOSE. An id already routed on the Conn is refused with ErrSubscribed,
// and an ended connection with its error.
func (c *Conn) Subscribe(id string) (*Sub, error) {
	return c.subscribe(id, nostr.MsgClose.String())
}

func (c *Conn) subscribe(id, end string) (*Sub, error) {
	s := &Sub{c: c, id: id, end: end,
		ch: make(chan *nostr.RelayMessage, c.o.SubBuffer), gone: make(chan struct{})}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return nil, c.err
	}
	if c.subs[id] != nil {
		return nil, fmt.Errorf("%w: %q", ErrSubscribed, id)
	}
	c.subs[id] = s
	return s, nil
}

// ID returns the subscription id.
func (s *Sub) ID() string { return s.id }

// Messages returns the channel of the subscription's messages. It is
// closed after the last one if the connection ends while the Sub is
// routed; after Unsubscribe it is never closed.
func (s *Sub) Messages() <-chan *nostr.RelayMessage { return s.ch }

// Next returns the subscription's next message, waiting until ctx ends.
// It returns the connection's error once the connection has ended and
// the messages before the end are read, and ErrUnsubscribed after
// Unsubscribe.
func (s *Sub) Next(ctx context.Context) (*nostr.RelayMessage, error) {
	select {
	case m, ok := <-s.ch:
		if !ok {
			return nil, s.c.err
		}
		return m, nil
	case <-s.gone:
		select {
		case m, ok := <-s.ch:
			if ok {
				return m, nil
			}
			return nil, s.c.err
		default:
			return nil, ErrUnsubscribed
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Unsubscribe stops routing the subscription's messages (later ones go to
// the inbox) without telling the relay. It is idempotent.
func (s *Sub) Unsubscribe() {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.subs[s.id] == s {
		delete(c.subs, s.id)
		close(s.gone)
	}
}

// Close unsubscribes and, the first time, tells the relay: CLOSE for a
// REQ (or a Sub of Subscribe), NEG-CLOSE for a negentropy session,
// nothing for a COUNT. Its error is the send's.
func (s *Sub) Close() error {
	s.Unsubscribe()
	var err error
	s.once.Do(func() {
		if s.end != "" {
			err = s.c.send(func(b []byte) []byte { return appendSubEnd(b, s.end, s.id) })
		}
	})
	return err
}

// ClosedError is a relay's CLOSED answer to a request (NIP-01): the
// subscription has ended on the relay. It wraps ErrRefused.
type ClosedError struct {
	SubID   string
	Message string
}

// Error quotes the relay's message.
func (e *ClosedError) Error() string {
	return fmt.Sprintf("client: the relay closed subscription %q: %s", e.SubID, e.Message)
}

// Unwrap returns ErrRefused.
func (e *ClosedError) Unwrap() error { return ErrRefused }

// Prefix returns the NIP-01 machine-readable prefix of the message
// ("auth-required", "blocked", ...), or "" when it has none.
func (e *ClosedError) Prefix() string { return Prefix(e.Message) }

// Prefix returns the machine-readable prefix of an OK or CLOSED message
// (NIP-01: the word before the first ':'), or "" when there is none.
func Prefix(msg string) string {
	p, _, ok := strings.Cut(msg, ":")
	if !ok || p == "" || strings.ContainsAny(p, " \t\n") {
		return ""
	}
	return p
}
