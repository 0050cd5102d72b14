package relay_test

// NIP-42 AUTH end to end: challenges, the checks on the AUTH event,
// several pubkeys per connection, AuthRequired, and kind 22242 sent as an
// EVENT.

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// authEvent is k's kind-22242 event for challenge and relayURL.
func authEvent(k relaytest.Key, relayURL, challenge string, createdAt int64) *nostr.Event {
	return k.Event(nostr.KindClientAuth, "", nostr.Tags{{"relay", relayURL}, {"challenge", challenge}}, createdAt)
}

// sendAuth sends ev with AUTH and returns the OK.
func sendAuth(t testing.TB, c *relaytest.Client, ev *nostr.Event) *nostr.RelayMessage {
	t.Helper()
	c.SendRaw(`["AUTH",` + string(ev.Raw) + `]`)
	m := c.ExpectType("OK")
	if m.EventID != ev.ID {
		t.Fatalf("OK for %s, want %s", m.EventID.Hex(), ev.ID.Hex())
	}
	return m
}

// login authenticates c as k with challenge (relay URL: r's loopback URL)
// and fails unless the relay says OK true.
func login(t testing.TB, r *relaytest.Relay, c *relaytest.Client, k relaytest.Key, challenge string) {
	t.Helper()
	if m := sendAuth(t, c, authEvent(k, r.URL, challenge, 0)); !m.OK || m.Message != "" {
		t.Fatalf("AUTH refused: %q", m.Message)
	}
}

// dialAuthed dials a relay started with AuthOnConnect, reads the challenge
// and logs in as each key.
func dialAuthed(t testing.TB, r *relaytest.Relay, keys ...relaytest.Key) *relaytest.Client {
	t.Helper()
	c := relaytest.Dial(t, r.URL)
	ch := c.ExpectType("AUTH").Message
	for _, k := range keys {
		login(t, r, c, k, ch)
	}
	return c
}

// expectAuthRequired reads the AUTH challenge the relay sends before an
// "auth-required:" answer and returns it.
func expectChallenge(t testing.TB, c *relaytest.Client) string {
	t.Helper()
	m := c.ExpectType("AUTH")
	if len(m.Message) < 16 {
		t.Fatalf("challenge %q is too short", m.Message)
	}
	return m.Message
}

func TestAuthOnConnect(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{AuthOnConnect: true}})
	alice := relaytest.NewKey("alice")
	c1 := relaytest.Dial(t, r.URL)
	c2 := relaytest.Dial(t, r.URL)
	ch1, ch2 := expectChallenge(t, c1), expectChallenge(t, c2)
	if ch1 == ch2 {
		t.Fatal("two connections got the same challenge")
	}
	// Each challenge is good on its own connection only.
	if m := sendAuth(t, c1, authEvent(alice, r.URL, ch2, 0)); m.OK || !strings.HasPrefix(m.Message, "invalid: challenge") {
		t.Fatalf("other connection's challenge: %+v", m)
	}
	login(t, r, c1, alice, ch1)
	// The challenge stays valid: authenticating again is fine, and no
	// second AUTH message arrives.
	login(t, r, c1, alice, ch1)
	expectQuiet(t, c1)
	if st := r.Stats(); st.AuthAccepted != 2 || st.AuthRejected != 1 {
		t.Fatalf("auth counters %d/%d", st.AuthAccepted, st.AuthRejected)
	}
	if got := r.Relay.Sessions(); got != 2 {
		t.Fatalf("sessions %d", got)
	}
}

func TestAuthLazyChallenge(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	bob := relaytest.NewKey("bob")
	c := relaytest.Dial(t, r.URL)
	expectQuiet(t, c) // no challenge on connect by default
	// An AUTH before any challenge: refused, and the challenge is sent
	// first so the client can retry.
	c.SendRaw(`["AUTH",` + string(authEvent(bob, r.URL, "guess", 0).Raw) + `]`)
	ch := expectChallenge(t, c)
	if m := c.ExpectType("OK"); m.OK || !strings.HasPrefix(m.Message, "invalid: no challenge") {
		t.Fatalf("AUTH without challenge: %+v", m)
	}
	login(t, r, c, bob, ch)

	// A second connection gets its challenge right before auth-required.
	c2 := relaytest.Dial(t, r.URL)
	c2.SendRaw(`["REQ","dm",{"kinds":[4]}]`)
	ch2 := expectChallenge(t, c2)
	c2.ExpectClosed("dm", "auth-required: ")
	c2.SendRaw(`["REQ","dm2",{"kinds":[4]}]`)
	c2.ExpectClosed("dm2", "auth-required: ") // no second AUTH message
	login(t, r, c2, bob, ch2)
	c2.Req("dm3", `{"kinds":[4]}`)
	if v := r.Stats().RequestsRefused["auth-required"]; v != 2 {
		t.Fatalf("requests_refused.auth-required = %d", v)
	}
}

func TestAuthRefusals(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{AuthOnConnect: true}})
	alice := relaytest.NewKey("alice")
	c := relaytest.Dial(t, r.URL)
	ch := expectChallenge(t, c)
	now := time.Now().Unix()
	f := func(ev *nostr.Event, prefix string) {
		t.Helper()
		m := sendAuth(t, c, ev)
		if m.OK || !strings.HasPrefix(m.Message, prefix) {
			t.Fatalf("AUTH %s: %+v, want %q", ev.Content, m, prefix)
		}
	}
	f(alice.Event(1, "kind 1", nostr.Tags{{"relay", r.URL}, {"challenge", ch}}, 0), "invalid: AUTH event must be of kind 22242")
	f(authEvent(alice, r.URL, ch, now-11*60), "invalid: AUTH event created_at")
	f(authEvent(alice, r.URL, ch, now+11*60), "invalid: AUTH event created_at")
	f(authEvent(alice, r.URL, ch+"x", 0), "invalid: challenge tag")
	f(alice.Event(nostr.KindClientAuth, "no challenge", nostr.Tags{{"relay", r.URL}}, 0), "invalid: challenge tag")
	f(authEvent(alice, "wss://relay.example.com", ch, 0), "invalid: relay tag")
	f(alice.Event(nostr.KindClientAuth, "no relay", nostr.Tags{{"challenge", ch}}, 0), "invalid: relay tag")
	// A forged signature.
	ev := authEvent(alice, r.URL, ch, 0)
	forged := *ev
	forged.Sig[0] ^= 1
	forged.Raw = nostr.Serialize(&forged)
	f(&forged, "invalid: bad signature")
	// An id that does not match.
	var v map[string]any
	json.Unmarshal(ev.Raw, &v)
	v["content"] = "changed"
	raw, _ := json.Marshal(v)
	c.SendRaw(`["AUTH",` + string(raw) + `]`)
	if m := c.ExpectType("OK"); m.OK || !strings.HasPrefix(m.Message, "invalid: event id") {
		t.Fatalf("bad id: %+v", m)
	}
	// Within the window, either side, and a relay URL written differently.
	login(t, r, c, alice, ch)
	bob := relaytest.NewKey("bob")
	if m := sendAuth(t, c, authEvent(bob, strings.Replace(r.URL, "ws://", "WS://", 1)+"/", ch, now-9*60)); !m.OK {
		t.Fatalf("normalized URL, 9 minutes old: %+v", m)
	}
	if got := r.Stats().AuthRejected; got != 9 {
		t.Fatalf("auth_rejected = %d, want 9", got)
	}
}

func TestAuthConfiguredURL(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{AuthOnConnect: true, URL: "wss://Relay.Example.com:443/"}})
	alice := relaytest.NewKey("alice")
	c := relaytest.Dial(t, r.URL)
	ch := expectChallenge(t, c)
	// The URL the client connected to does not count: only Config.URL.
	if m := sendAuth(t, c, authEvent(alice, r.URL, ch, 0)); m.OK || !strings.HasPrefix(m.Message, "invalid: relay tag") {
		t.Fatalf("loopback URL with Config.URL set: %+v", m)
	}
	if m := sendAuth(t, c, authEvent(alice, "wss://relay.example.com", ch, 0)); !m.OK {
		t.Fatalf("configured URL: %+v", m)
	}
}

func TestAuthManyPubKeys(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{AuthOnConnect: true, MaxAuthPubKeys: 2}})
	alice, bob, carol := relaytest.NewKey("alice"), relaytest.NewKey("bob"), relaytest.NewKey("carol")
	c := relaytest.Dial(t, r.URL)
	ch := expectChallenge(t, c)
	login(t, r, c, alice, ch)
	login(t, r, c, bob, ch)
	login(t, r, c, alice, ch) // already in: no new slot needed
	if m := sendAuth(t, c, authEvent(carol, r.URL, ch, 0)); m.OK || !strings.HasPrefix(m.Message, "restricted: too many pubkeys") {
		t.Fatalf("third pubkey: %+v", m)
	}
	if v := trips(r, "max_auth_pubkeys"); v != 1 {
		t.Fatalf("max_auth_pubkeys = %d", v)
	}
	// Both pubkeys count: each may read its own direct messages.
	dave := relaytest.NewKey("dave")
	toAlice := dave.Event(4, "hi alice", nostr.Tags{{"p", alice.PK.Hex()}}, 0)
	toBob := dave.Event(4, "hi bob", nostr.Tags{{"p", bob.PK.Hex()}}, 0)
	toCarol := dave.Event(4, "hi carol", nostr.Tags{{"p", carol.PK.Hex()}}, 0)
	seed(t, r, []*nostr.Event{toAlice, toBob, toCarol})
	got := idSet(c.Req("dm", `{"kinds":[4]}`))
	if len(got) != 2 || !got[toAlice.ID] || !got[toBob.ID] {
		t.Fatalf("got %d events", len(got))
	}
}

func TestAuthEventSentAsEvent(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{AuthOnConnect: true}})
	alice := relaytest.NewKey("alice")
	watcher := relaytest.Dial(t, r.URL)
	expectChallenge(t, watcher)
	watcher.Req("all", `{}`)
	c := relaytest.Dial(t, r.URL)
	ch := expectChallenge(t, c)
	m := c.Publish(authEvent(alice, r.URL, ch, 0))
	if m.OK || !strings.HasPrefix(m.Message, "invalid: kind 22242") {
		t.Fatalf("kind 22242 via EVENT: %+v", m)
	}
	expectQuiet(t, watcher) // not broadcast
	if n := storedCount(t, r); n != 0 {
		t.Fatalf("%d events stored", n)
	}
}

func TestAuthRequired(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{AuthRequired: true}})
	alice := relaytest.NewKey("alice")
	c := relaytest.Dial(t, r.URL)
	note := alice.Note("hello")
	c.SendRaw(`["EVENT",` + string(note.Raw) + `]`)
	ch := expectChallenge(t, c)
	if m := c.ExpectType("OK"); m.OK || !strings.HasPrefix(m.Message, "auth-required: ") {
		t.Fatalf("EVENT: %+v", m)
	}
	c.SendRaw(`["REQ","s",{"kinds":[1]}]`)
	c.ExpectClosed("s", "auth-required: ")
	c.SendRaw(`["COUNT","n",{"kinds":[1]}]`)
	c.ExpectClosed("n", "auth-required: ")
	c.SendRaw(`["NEG-OPEN","g",{"kinds":[1]},"6100000200"]`)
	if m := c.ExpectType("NEG-ERR"); !strings.HasPrefix(m.Message, "auth-required: ") {
		t.Fatalf("NEG-OPEN: %+v", m)
	}
	// Authenticated as anyone: everything works, events by others too.
	bob := relaytest.NewKey("bob")
	login(t, r, c, bob, ch)
	c.MustPublish(note)
	if got := c.Req("s", `{"kinds":[1]}`); len(got) != 1 {
		t.Fatalf("got %d events", len(got))
	}
	_, body := getHTTP(t, r, "GET", "/", map[string]string{"Accept": "application/nostr+json"})
	var doc struct {
		Limitation struct {
			AuthRequired     bool `json:"auth_required"`
			RestrictedWrites bool `json:"restricted_writes"`
		} `json:"limitation"`
		SupportedNIPs []int `json:"supported_nips"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if !doc.Limitation.AuthRequired || !doc.Limitation.RestrictedWrites {
		t.Fatalf("limitation %+v", doc.Limitation)
	}
	for _, n := range []int{42, 45, 62, 70} {
		if !containsInt(doc.SupportedNIPs, n) {
			t.Fatalf("supported_nips %v lacks %d", doc.SupportedNIPs, n)
		}
	}
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
