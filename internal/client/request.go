package client

import (
	"context"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// Req subscribes to id and sends ["REQ",id,filters...]. The Sub receives
// the stored events, EOSE, then live events until Close (or the relay's
// CLOSED).
func (c *Conn) Req(id string, filters ...nostr.Filter) (*Sub, error) {
	s, err := c.subscribe(id, nostr.MsgClose.String())
	if err != nil {
		return nil, err
	}
	if err := c.send(func(b []byte) []byte { return appendFilters(b, nostr.MsgReq.String(), id, filters) }); err != nil {
		s.Unsubscribe()
		return nil, err
	}
	return s, nil
}

// Count sends the NIP-45 request ["COUNT",id,filters...] and waits until
// ctx ends for the answer, which it returns (Count, Approximate, HLL). A
// CLOSED answer is returned as a *ClosedError.
func (c *Conn) Count(ctx context.Context, id string, filters ...nostr.Filter) (*nostr.RelayMessage, error) {
	s, err := c.subscribe(id, "")
	if err != nil {
		return nil, err
	}
	defer s.Unsubscribe()
	if err := c.send(func(b []byte) []byte { return appendFilters(b, nostr.MsgCount.String(), id, filters) }); err != nil {
		return nil, err
	}
	for {
		m, err := s.Next(ctx)
		if err != nil {
			return nil, err
		}
		switch m.Type {
		case nostr.LabelCount:
			return m, nil
		case nostr.LabelClosed:
			return nil, &ClosedError{SubID: id, Message: m.Message}
		}
	}
}

// NegOpen subscribes to id and opens a NIP-77 negentropy session:
// ["NEG-OPEN",id,f,<hex msg>], msg being the initiator's first message.
// The Sub receives NEG-MSG and NEG-ERR (and CLOSED or nothing from a
// relay without NIP-77); continue with NegMsg, and end the session with
// the Sub's Close (NEG-CLOSE).
func (c *Conn) NegOpen(id string, f *nostr.Filter, msg []byte) (*Sub, error) {
	s, err := c.subscribe(id, nostr.MsgNegClose.String())
	if err != nil {
		return nil, err
	}
	if err := c.send(func(b []byte) []byte { return appendNegOpen(b, id, f, msg) }); err != nil {
		s.Unsubscribe()
		return nil, err
	}
	return s, nil
}

// NegMsg sends the next message of negentropy session id:
// ["NEG-MSG",id,<hex msg>].
func (c *Conn) NegMsg(id string, msg []byte) error {
	// The client's NEG-MSG has the shape of the relay's.
	return c.send(func(b []byte) []byte { return nostr.AppendNegMsg(b, id, msg) })
}
