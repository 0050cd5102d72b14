package client

import (
	"context"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// Publish sends ["EVENT",ev] and waits until ctx ends for the relay's OK,
// which it returns: a refusal (OK false) is an answer, not an error. If
// ctx ends first, an OK arriving later goes to the inbox.
func (c *Conn) Publish(ctx context.Context, ev *nostr.Event) (*nostr.RelayMessage, error) {
	return c.sendAndWait(ctx, nostr.MsgEvent.String(), ev)
}

// SendEvent sends ["EVENT",ev] and routes the relay's OK for it to oks,
// for a publisher that keeps several events in flight. The reader waits
// while oks is full, so give it room for every event awaiting its OK. An
// OK that never comes keeps its registration until the connection ends.
func (c *Conn) SendEvent(ev *nostr.Event, oks chan<- *nostr.RelayMessage) error {
	return c.sendRouted(nostr.MsgEvent.String(), ev, oks)
}

// AuthEvent returns the NIP-42 kind-22242 event answering the relay's
// last challenge on this connection (tags "relay" with the Conn's URL and
// "challenge"), created now and not signed. Sign it, then send it with
// Auth. Without a challenge it returns ErrNoChallenge.
func (c *Conn) AuthEvent() (*nostr.Event, error) {
	ch := c.Challenge()
	if ch == "" {
		return nil, ErrNoChallenge
	}
	return &nostr.Event{
		Kind:      nostr.KindClientAuth,
		CreatedAt: time.Now().Unix(),
		Tags:      nostr.Tags{{"relay", c.url}, {"challenge", ch}},
	}, nil
}

// Auth sends the signed NIP-42 event ev as ["AUTH",ev] and waits until
// ctx ends for the relay's OK, which it returns (OK false is an answer,
// not an error).
func (c *Conn) Auth(ctx context.Context, ev *nostr.Event) (*nostr.RelayMessage, error) {
	return c.sendAndWait(ctx, nostr.MsgAuth.String(), ev)
}

// sendAndWait sends ev under label and waits for its OK.
func (c *Conn) sendAndWait(ctx context.Context, label string, ev *nostr.Event) (*nostr.RelayMessage, error) {
	ch := make(chan *nostr.RelayMessage, 1)
	if err := c.sendRouted(label, ev, ch); err != nil {
		return nil, err
	}
	select {
	case m := <-ch:
		return m, nil
	case <-c.done:
		select {
		case m := <-ch:
			return m, nil
		default:
			return nil, c.err
		}
	case <-ctx.Done():
		if c.forgetOK(ev.ID, ch) {
			return nil, ctx.Err()
		}
		// The reader has taken the registration: the OK is on its way.
		select {
		case m := <-ch:
			return m, nil
		case <-c.done:
			select {
			case m := <-ch:
				return m, nil
			default:
				return nil, ctx.Err()
			}
		}
	}
}

// sendRouted registers oks for the OK of ev, then sends ev under label
// (registering first: the OK may come before the send returns).
func (c *Conn) sendRouted(label string, ev *nostr.Event, oks chan<- *nostr.RelayMessage) error {
	if err := c.waitOK(ev.ID, oks); err != nil {
		return err
	}
	if err := c.send(func(b []byte) []byte { return appendEventMsg(b, label, ev) }); err != nil {
		c.forgetOK(ev.ID, oks)
		return err
	}
	return nil
}
