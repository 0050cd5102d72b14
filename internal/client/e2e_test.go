package client_test

// The client against a real petrel relay on loopback (internal/relaytest):
// REQ, COUNT, EVENT and OK, AUTH, negentropy, NIP-11.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/negentropy"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store"
)

const base = 1_700_000_000

// ctx bounds every wait of a test: a guard against hangs, not a
// performance assertion.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), relaytest.DefaultTimeout)
	t.Cleanup(cancel)
	return c
}

// dial connects and closes the Conn at the end of the test.
func dial(t *testing.T, url string, o client.Options) *client.Conn {
	t.Helper()
	c, err := client.Dial(ctx(t), url, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// notes returns n signed kind-1 notes of k created at base+i.
func notes(k relaytest.Key, n int, text string) []*nostr.Event {
	out := make([]*nostr.Event, n)
	for i := range out {
		out[i] = k.Event(nostr.KindTextNote, fmt.Sprintf("%s %d", text, i), nil, base+int64(i))
	}
	return out
}

// save stores events directly (no relay round trip).
func save(t *testing.T, st store.Store, evs []*nostr.Event) {
	t.Helper()
	res, err := st.Save(context.Background(), evs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Outcome != store.Stored {
			t.Fatalf("save %d: %s %v", i, r.Outcome, r.Err)
		}
	}
}

// authorFilter selects the events of k.
func authorFilter(k relaytest.Key) nostr.Filter {
	return nostr.Filter{Authors: []nostr.PubKey{k.PK}, Present: nostr.PresentAuthors}
}

// storedEvents reads s up to EOSE and returns the ids of its events.
func storedEvents(t *testing.T, s *client.Sub) []nostr.ID {
	t.Helper()
	var ids []nostr.ID
	for {
		m, err := s.Next(ctx(t))
		if err != nil {
			t.Fatalf("sub %s: %v", s.ID(), err)
		}
		switch m.Type {
		case nostr.LabelEvent:
			ids = append(ids, m.Event.ID)
		case nostr.LabelEOSE:
			return ids
		default:
			t.Fatalf("sub %s: unexpected %s %q", s.ID(), m.Type, m.Message)
		}
	}
}

// TestReqPublishCount: events published with Publish come back from a
// REQ (stored, newest first, then live, on the same connection as the
// publisher's OKs), COUNT counts them, and after the Sub's Close the
// relay sends nothing more for it.
func TestReqPublishCount(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	k := relaytest.NewKey("client-req")
	c := dial(t, r.URL, client.Options{})
	evs := notes(k, 5, "req")
	for _, ev := range evs {
		m, err := c.Publish(ctx(t), ev)
		if err != nil || !m.OK || m.EventID != ev.ID {
			t.Fatalf("publish: %+v %v", m, err)
		}
	}
	sub, err := c.Req("s", authorFilter(k))
	if err != nil {
		t.Fatal(err)
	}
	got := storedEvents(t, sub)
	want := []nostr.ID{evs[4].ID, evs[3].ID, evs[2].ID, evs[1].ID, evs[0].ID}
	if !slices.Equal(got, want) {
		t.Fatalf("stored: %d events, not the 5 newest first", len(got))
	}

	live := k.Note("live")
	if m, err := c.Publish(ctx(t), live); err != nil || !m.OK {
		t.Fatalf("publish live: %+v %v", m, err)
	}
	if m, err := sub.Next(ctx(t)); err != nil || m.Type != nostr.LabelEvent || m.Event.ID != live.ID {
		t.Fatalf("live: %+v %v", m, err)
	}

	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Next(ctx(t)); !errors.Is(err, client.ErrUnsubscribed) {
		t.Fatalf("Next after Close: %v", err)
	}
	if m, err := c.Publish(ctx(t), k.Note("after close")); err != nil || !m.OK {
		t.Fatalf("publish after close: %+v %v", m, err)
	}
	// The COUNT answer follows the fan-out of the event above, so an
	// EVENT for "s" would have arrived (in the inbox) before it.
	m, err := c.Count(ctx(t), "n", authorFilter(k))
	if err != nil || m.Count != 7 {
		t.Fatalf("count: %+v %v", m, err)
	}
	select {
	case m := <-c.Inbox():
		t.Fatalf("unrouted message after the Sub's Close: %s", m.Raw)
	default:
	}
	// The id is free again.
	again, err := c.Req("s", authorFilter(k))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(storedEvents(t, again)); n != 7 {
		t.Fatalf("REQ again: %d events", n)
	}
}

// TestPublishAnswers: OK false and "duplicate:" are answers that Publish
// returns, with their prefix.
func TestPublishAnswers(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	k := relaytest.NewKey("client-ok")
	c := dial(t, r.URL, client.Options{})
	ev := k.Note("once")
	f := func(ev *nostr.Event, ok bool, prefix string) {
		t.Helper()
		m, err := c.Publish(ctx(t), ev)
		if err != nil {
			t.Fatal(err)
		}
		if m.OK != ok || client.Prefix(m.Message) != prefix || m.EventID != ev.ID {
			t.Fatalf("OK %v %q, want %v %q", m.OK, m.Message, ok, prefix)
		}
	}
	f(ev, true, "")
	f(ev, true, "duplicate")
	forged := *ev
	forged.Content = "changed after signing"
	forged.Raw = nostr.Serialize(&forged)
	f(&forged, false, "invalid")
}

// TestSendEventWindow: many events in flight, their OKs routed to one
// channel, none lost and none to the inbox.
func TestSendEventWindow(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	c := dial(t, r.URL, client.Options{InboxSize: 1})
	evs := notes(relaytest.NewKey("client-window"), 50, "window")
	oks := make(chan *nostr.RelayMessage, len(evs))
	for _, ev := range evs {
		if err := c.SendEvent(ev, oks); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[nostr.ID]bool{}
	for range evs {
		select {
		case m := <-oks:
			if !m.OK || seen[m.EventID] {
				t.Fatalf("OK %v %q for %s (seen %v)", m.OK, m.Message, m.EventID.Hex(), seen[m.EventID])
			}
			seen[m.EventID] = true
		case <-ctx(t).Done():
			t.Fatalf("%d OKs of %d", len(seen), len(evs))
		}
	}
	for _, ev := range evs {
		if !seen[ev.ID] {
			t.Fatalf("no OK for %s", ev.ID.Hex())
		}
	}
	if s := c.Stats(); s.Dropped != 0 || len(c.Inbox()) != 0 {
		t.Fatalf("stats %+v, inbox %d", s, len(c.Inbox()))
	}
}

// TestAuth: the challenge arrives in the inbox and is kept; a relay that
// requires AUTH refuses COUNT with a *ClosedError "auth-required"; the
// event AuthEvent builds, signed, is accepted, and then COUNT works.
func TestAuth(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{AuthOnConnect: true, AuthRequired: true}})
	k := relaytest.NewKey("client-auth")
	c := dial(t, r.URL, client.Options{})
	m, err := c.Next(ctx(t))
	if err != nil || m.Relay == nil || m.Relay.Type != nostr.LabelAuth || m.Relay.Message == "" {
		t.Fatalf("first message: %+v %v", m, err)
	}
	if c.Challenge() != m.Relay.Message {
		t.Fatalf("challenge %q, sent %q", c.Challenge(), m.Relay.Message)
	}

	_, err = c.Count(ctx(t), "n", nostr.Filter{})
	var ce *client.ClosedError
	if !errors.As(err, &ce) || !errors.Is(err, client.ErrRefused) || ce.Prefix() != "auth-required" || ce.SubID != "n" {
		t.Fatalf("COUNT before AUTH: %v", err)
	}

	ev, err := c.AuthEvent()
	if err != nil {
		t.Fatal(err)
	}
	nostr.SignEvent(ev, k.SK)
	ok, err := c.Auth(ctx(t), ev)
	if err != nil || !ok.OK || ok.EventID != ev.ID {
		t.Fatalf("AUTH: %+v %v", ok, err)
	}
	if m, err := c.Count(ctx(t), "n", nostr.Filter{}); err != nil || m.Count != 0 {
		t.Fatalf("COUNT after AUTH: %+v %v", m, err)
	}

	// A relay that never challenged: nothing to answer.
	plain := relaytest.Start(t, relaytest.Options{})
	if _, err := dial(t, plain.URL, client.Options{}).AuthEvent(); !errors.Is(err, client.ErrNoChallenge) {
		t.Fatalf("AuthEvent without a challenge: %v", err)
	}
}

// TestAuthenticate: Authenticate answers the challenge a relay sent with
// its "auth-required:" refusal (which matches ErrAuthRequired), after
// which the request passes; a relay's OK false to the AUTH is
// ErrAuthRefused, and a connection never challenged has nothing to
// answer.
func TestAuthenticate(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{AuthRequired: true, MaxAuthPubKeys: 1}})
	alice, bob := relaytest.NewKey("client-authenticate-a"), relaytest.NewKey("client-authenticate-b")
	c := dial(t, r.URL, client.Options{})
	_, err := c.Count(ctx(t), "n", nostr.Filter{})
	if !errors.Is(err, client.ErrAuthRequired) || !errors.Is(err, client.ErrRefused) {
		t.Fatalf("COUNT before AUTH: %v", err)
	}
	if err := client.Authenticate(ctx(t), c, &alice.SK, relaytest.DefaultTimeout); err != nil {
		t.Fatal(err)
	}
	if m, err := c.Count(ctx(t), "n", nostr.Filter{}); err != nil || m.Count != 0 {
		t.Fatalf("COUNT after AUTH: %+v %v", m, err)
	}
	// One pubkey per connection here: a second one is refused.
	if err := client.Authenticate(ctx(t), c, &bob.SK, relaytest.DefaultTimeout); !errors.Is(err, client.ErrAuthRefused) {
		t.Fatalf("AUTH beyond max_auth_pubkeys: %v", err)
	}
	// A CLOSED for another reason is not an auth refusal.
	closed := &client.ClosedError{SubID: "x", Message: "blocked: no"}
	if errors.Is(closed, client.ErrAuthRequired) || !errors.Is(closed, client.ErrRefused) {
		t.Fatalf("%v matches the wrong errors", closed)
	}
	plain := relaytest.Start(t, relaytest.Options{})
	if err := client.Authenticate(ctx(t), dial(t, plain.URL, client.Options{}), &alice.SK, relaytest.DefaultTimeout); !errors.Is(err, client.ErrNoChallenge) {
		t.Fatalf("Authenticate without a challenge: %v", err)
	}
}

// TestNegentropy: a negentropy session against the relay, over several
// rounds (small frames), finds exactly the relay's events missing from an
// empty set; a session over more events than the relay allows gets
// NEG-ERR on its Sub.
func TestNegentropy(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{NegFrameLimit: 4096, MaxNegItems: 300}})
	k := relaytest.NewKey("client-neg")
	evs := notes(k, 300, "neg")
	save(t, r.Store, evs)
	c := dial(t, r.URL, client.Options{})

	v, err := negentropy.NewVector(nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := negentropy.New(v, 4096)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := n.Initiate()
	if err != nil {
		t.Fatal(err)
	}
	f := authorFilter(k)
	sub, err := c.NegOpen("neg", &f, msg)
	if err != nil {
		t.Fatal(err)
	}
	need := map[nostr.ID]bool{}
	rounds := 0
	for {
		m, err := sub.Next(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if m.Type != nostr.LabelNegMsg {
			t.Fatalf("round %d: %s %q", rounds, m.Type, m.Message)
		}
		rounds++
		next, have, nd, err := n.ReconcileClient(m.NegPayload)
		if err != nil {
			t.Fatal(err)
		}
		if len(have) != 0 {
			t.Fatalf("an empty set has %d ids", len(have))
		}
		for _, id := range nd {
			need[id] = true
		}
		if next == nil {
			break
		}
		if err := c.NegMsg("neg", next); err != nil {
			t.Fatal(err)
		}
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if len(need) != len(evs) || rounds < 2 {
		t.Fatalf("need %d of %d ids in %d rounds", len(need), len(evs), rounds)
	}
	for _, ev := range evs {
		if !need[ev.ID] {
			t.Fatalf("%s not found", ev.ID.Hex())
		}
	}

	// One event more than MaxNegItems.
	save(t, r.Store, []*nostr.Event{k.Note("one too many")})
	if n, err = negentropy.New(v, 4096); err != nil {
		t.Fatal(err)
	}
	if msg, err = n.Initiate(); err != nil {
		t.Fatal(err)
	}
	over, err := c.NegOpen("neg", &f, msg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := over.Next(ctx(t))
	if err != nil || m.Type != nostr.LabelNegErr || client.Prefix(m.Message) != "blocked" {
		t.Fatalf("over MaxNegItems: %+v %v", m, err)
	}
	over.Unsubscribe()
}

// TestFetchInfo reads the relay's NIP-11 document.
func TestFetchInfo(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{MaxLimit: 321}})
	inf, err := client.FetchInfo(ctx(t), nil, r.URL)
	if err != nil {
		t.Fatal(err)
	}
	want := r.Relay.Limitation()
	if !inf.Supports(77) || inf.Supports(2) || inf.Limitation.MaxLimit != 321 ||
		inf.Limitation.MaxMessageLength != want.MaxMessageLength || len(inf.Raw) == 0 {
		t.Fatalf("info %+v", inf)
	}
}
