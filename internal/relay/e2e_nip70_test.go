package relay_test

// NIP-70 protected events and reposts embedding them.

import (
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

func TestNIP70Protected(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	alice, bob := relaytest.NewKey("alice"), relaytest.NewKey("bob")
	ev := alice.Event(1, "members only", nostr.Tags{{"-"}}, 0)

	c := relaytest.Dial(t, r.URL)
	c.SendRaw(`["EVENT",` + string(ev.Raw) + `]`)
	ch := expectChallenge(t, c) // the challenge comes first
	if m := c.ExpectType("OK"); m.OK || !strings.HasPrefix(m.Message, "auth-required: ") {
		t.Fatalf("unauthenticated: %+v", m)
	}
	login(t, r, c, bob, ch)
	if m := c.Publish(ev); m.OK || !strings.HasPrefix(m.Message, "restricted: ") {
		t.Fatalf("authenticated as someone else: %+v", m)
	}
	login(t, r, c, alice, ch)
	c.MustPublish(ev)
	if got := c.Req("q", `{"ids":["`+ev.ID.Hex()+`"]}`); len(got) != 1 {
		t.Fatalf("stored: %d", len(got))
	}
	st := r.Stats().EventsRejected
	if st["auth-required"] != 1 || st["restricted"] != 1 {
		t.Fatalf("rejected %v", st)
	}
}

func TestNIP70Reposts(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	alice, bob := relaytest.NewKey("alice"), relaytest.NewKey("bob")
	protected := alice.Event(1, "members only", nostr.Tags{{"-"}}, 0)
	public := alice.Note("for everyone")
	c := relaytest.Dial(t, r.URL)
	for _, kind := range []int{nostr.KindRepost, nostr.KindGenericRepost} {
		rp := bob.Event(kind, string(protected.Raw), nostr.Tags{{"e", protected.ID.Hex()}, {"k", "1"}}, 0)
		if m := c.Publish(rp); m.OK || !strings.HasPrefix(m.Message, "blocked: ") {
			t.Fatalf("kind %d embedding a protected event: %+v", kind, m)
		}
		// Without the embedded event a repost is fine (NIP-70: "MUST NOT
		// embed"), and so is one embedding an unprotected event.
		c.MustPublish(bob.Event(kind, "", nostr.Tags{{"e", protected.ID.Hex()}}, 0))
		c.MustPublish(bob.Event(kind, string(public.Raw), nostr.Tags{{"e", public.ID.Hex()}}, 0))
	}
	// A protected event quoted in a note (kind 1) is not a repost.
	c.MustPublish(bob.Note(string(protected.Raw)))
}

func TestNIP70AuthRequiredRelay(t *testing.T) {
	t.Parallel()
	// With AuthRequired on, the same answers.
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{AuthRequired: true, AuthOnConnect: true}})
	alice, bob := relaytest.NewKey("alice"), relaytest.NewKey("bob")
	c := dialAuthed(t, r, bob)
	if m := c.Publish(alice.Event(1, "x", nostr.Tags{{"-"}}, 0)); m.OK || !strings.HasPrefix(m.Message, "restricted: ") {
		t.Fatalf("%+v", m)
	}
}
