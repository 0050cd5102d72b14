package relaytest

import (
	"context"
	"errors"
	"testing"

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/nostr"
)

// DialAuthed connects to the relay at url (one that requires NIP-42
// authentication, relay.Config.AuthRequired) and authenticates as k: it
// gets the relay's challenge with a COUNT the relay refuses
// "auth-required:", and answers it. The Conn is closed at the end of the
// test.
func DialAuthed(t testing.TB, url string, k Key) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	c, err := client.Dial(ctx, url, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if _, err := c.Count(ctx, "challenge", nostr.Filter{}); !errors.Is(err, client.ErrAuthRequired) {
		t.Fatalf("%s: COUNT before AUTH: %v, want auth-required", url, err)
	}
	if err := client.Authenticate(ctx, c, &k.SK, DefaultTimeout); err != nil {
		t.Fatal(err)
	}
	return c
}

// PublishAuthed publishes evs to the relay at url, authenticated as k
// (DialAuthed), and fails unless each one is accepted.
func PublishAuthed(t testing.TB, url string, k Key, evs []*nostr.Event) {
	t.Helper()
	c := DialAuthed(t, url, k)
	defer c.Close()
	for _, ev := range evs {
		ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
		m, err := c.Publish(ctx, ev)
		cancel()
		if err != nil || !m.OK {
			t.Fatalf("publish to %s: %+v %v", url, m, err)
		}
	}
}

// AwaitEvents subscribes to every event on c and reads, stored and then
// live, until every one of evs has come: a test waits for events to
// arrive at a relay (copied there by a mirror, say) without polling. It
// fails the test if they have not all come within DefaultTimeout of the
// last one that did.
func AwaitEvents(t testing.TB, c *client.Conn, evs []*nostr.Event) {
	t.Helper()
	missing := make(map[nostr.ID]bool, len(evs))
	for _, ev := range evs {
		missing[ev.ID] = true
	}
	sub, err := c.Req("await-events", nostr.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for len(missing) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
		m, err := sub.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("%s: %d events never came: %v", c.URL(), len(missing), err)
		}
		switch m.Type {
		case nostr.LabelClosed:
			t.Fatalf("%s: CLOSED %s", c.URL(), m.Message)
		case nostr.LabelEvent:
			delete(missing, m.Event.ID)
		}
	}
}
