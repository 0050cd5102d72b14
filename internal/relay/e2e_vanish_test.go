package relay_test

// NIP-62 requests to vanish.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

func TestVanish(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{URL: "wss://relay.example.com", AuthRequired: true}})
	alice, bob := relaytest.NewKey("alice"), relaytest.NewKey("bob")
	now := time.Now().Unix()
	old := notes(alice, 3, "old")
	bobs := notes(bob, 2, "bob")
	wrap := relaytest.NewKey("throwaway").Event(1059, "sealed", nostr.Tags{{"p", alice.PK.Hex()}}, now-50)
	wrapBob := relaytest.NewKey("throwaway2").Event(1059, "sealed", nostr.Tags{{"p", bob.PK.Hex()}}, now-50)
	seed(t, r, append(append(old, bobs...), wrap, wrapBob))

	// Unauthenticated client, on a relay that requires AUTH for writes:
	// NIP-62 applies whatever the user's status.
	c := relaytest.Dial(t, r.URL)
	other := alice.Event(nostr.KindRequestToVanish, "", nostr.Tags{{"relay", "wss://other.example.com"}}, now)
	if m := c.Publish(other); m.OK || m.Message != "invalid: request to vanish is for another relay" {
		t.Fatalf("other relay: %+v", m)
	}
	noTag := alice.Event(nostr.KindRequestToVanish, "", nil, now)
	if m := c.Publish(noTag); m.OK {
		t.Fatalf("no relay tag: %+v", m)
	}
	if n := storedCount(t, r); n != 7 {
		t.Fatalf("refused requests deleted something: %d stored", n)
	}
	req := alice.Event(nostr.KindRequestToVanish, "gone", nostr.Tags{{"relay", "WSS://Relay.Example.com/"}}, now)
	c.MustPublish(req)
	// Gone in the request's own commit, before its OK.
	ctx := context.Background()
	n, err := r.Store.Count(ctx, []nostr.Filter{{Authors: []nostr.PubKey{alice.PK}, Kinds: []int{1}, Present: nostr.PresentAuthors | nostr.PresentKinds}})
	if err != nil || n != 0 {
		t.Fatalf("alice's notes after the OK: %d (%v)", n, err)
	}
	if has, err := r.Store.Has(ctx, wrap.ID); err != nil || has {
		t.Fatalf("the gift wrap to alice is still stored after the OK (%v)", err)
	}
	// Bob's events and his gift wrap stay.
	for _, ev := range append(bobs, wrapBob) {
		if has, _ := r.Store.Has(ctx, ev.ID); !has {
			t.Fatalf("bob's event %.12s deleted", ev.ID.Hex())
		}
	}
	// An old event cannot come back (once the client authenticated, as
	// this relay requires for other writes).
	c.SendRaw(`["EVENT",` + string(old[0].Raw) + `]`)
	ch := expectChallenge(t, c)
	if m := c.ExpectType("OK"); m.OK || !strings.HasPrefix(m.Message, "auth-required: ") {
		t.Fatalf("unauthenticated write: %+v", m)
	}
	if m := sendAuth(t, c, authEvent(alice, "wss://relay.example.com", ch, 0)); !m.OK {
		t.Fatalf("AUTH: %+v", m)
	}
	if m := c.Publish(old[0]); m.OK || m.Message != "blocked: this event has been deleted" {
		t.Fatalf("re-published after vanish: %+v", m)
	}
	// Nor can the gift wrap to her be re-broadcast; a later one is fine.
	if m := c.Publish(wrap); m.OK || m.Message != "blocked: this event has been deleted" {
		t.Fatalf("gift wrap re-broadcast after vanish: %+v", m)
	}
	c.MustPublish(relaytest.NewKey("throwaway3").Event(1059, "sealed", nostr.Tags{{"p", alice.PK.Hex()}}, now+1))
}

func TestVanishAllRelays(t *testing.T) {
	t.Parallel()
	// Config.URL not set: a loopback relay tag or ALL_RELAYS.
	r := relaytest.Start(t, relaytest.Options{})
	alice, bob := relaytest.NewKey("alice"), relaytest.NewKey("bob")
	seed(t, r, notes(alice, 2, "a"))
	seed(t, r, notes(bob, 2, "b"))
	c := relaytest.Dial(t, r.URL)
	now := time.Now().Unix()
	if m := c.Publish(alice.Event(62, "", nostr.Tags{{"relay", "wss://relay.example.com"}}, now)); m.OK {
		t.Fatalf("public URL without Config.URL: %+v", m)
	}
	c.MustPublish(alice.Event(62, "", nostr.Tags{{"relay", "ALL_RELAYS"}}, now))
	c.MustPublish(bob.Event(62, "", nostr.Tags{{"relay", "wss://x.example"}, {"relay", r.URL + "/"}}, now))
	if got := c.Req("q", `{"kinds":[1]}`); len(got) != 0 {
		t.Fatalf("%d notes left", len(got))
	}
	if m := c.Publish(alice.Event(62, "", nostr.Tags{{"relay", "all_relays"}}, now+1)); m.OK {
		t.Fatalf("lower-case all_relays: %+v", m)
	}
}
