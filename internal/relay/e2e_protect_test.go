package relay_test

// Read protection of direct messages (Config.ProtectedKinds, default 4,
// 14 and 1059): stored queries, live fan-out, COUNT and NEG-OPEN.

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// dmWorld is a relay holding notes and direct messages between alice,
// bob, carol and dave.
type dmWorld struct {
	r                       *relaytest.Relay
	alice, bob, carol, dave relaytest.Key
	notes                   []*nostr.Event // 3 by alice, 2 by carol
	aliceToBob, carolToDave *nostr.Event   // kind 4
	wrapToBob               *nostr.Event   // kind 1059 by a throwaway key
	bobToAlice14            *nostr.Event   // kind 14
}

func newDMWorld(t *testing.T, cfg relay.Config) *dmWorld {
	t.Helper()
	cfg.AuthOnConnect = true
	w := &dmWorld{
		r:     relaytest.Start(t, relaytest.Options{Relay: cfg}),
		alice: relaytest.NewKey("alice"), bob: relaytest.NewKey("bob"),
		carol: relaytest.NewKey("carol"), dave: relaytest.NewKey("dave"),
	}
	now := time.Now().Unix()
	w.notes = append(notes(w.alice, 3, "a"), notes(w.carol, 2, "c")...)
	w.aliceToBob = w.alice.Event(4, "hi bob", nostr.Tags{{"p", w.bob.PK.Hex()}}, now-100)
	w.carolToDave = w.carol.Event(4, "hi dave", nostr.Tags{{"p", w.dave.PK.Hex()}}, now-101)
	w.wrapToBob = relaytest.NewKey("throwaway").Event(1059, "sealed", nostr.Tags{{"p", w.bob.PK.Hex()}}, now-102)
	w.bobToAlice14 = w.bob.Event(14, "chat", nostr.Tags{{"p", w.alice.PK.Hex()}}, now-103)
	seed(t, w.r, append([]*nostr.Event{w.aliceToBob, w.carolToDave, w.wrapToBob, w.bobToAlice14}, w.notes...))
	return w
}

// count sends COUNT and returns the answer (failing on CLOSED).
func count(t testing.TB, c *relaytest.Client, subID string, filters ...string) *nostr.RelayMessage {
	t.Helper()
	c.SendRaw(`["COUNT","` + subID + `",` + strings.Join(filters, ",") + `]`)
	m := c.Read()
	if m.Type != "COUNT" || m.SubID != subID {
		t.Fatalf("COUNT %s: got %s", subID, describe(m))
	}
	return m
}

func TestProtectStoredQueries(t *testing.T) {
	t.Parallel()
	w := newDMWorld(t, relay.Config{})
	anon := dialAuthed(t, w.r)
	// Naming a protected kind without AUTH: refused.
	for i, f := range []string{`{"kinds":[4]}`, `{"kinds":[1,1059]}`, `{"kinds":[14],"authors":["` + w.bob.PK.Hex() + `"]}`} {
		sub := "p" + string(rune('0'+i))
		anon.SendRaw(`["REQ","` + sub + `",` + f + `]`)
		anon.ExpectClosed(sub, "auth-required: ")
	}
	// Kind-less filters are served without the protected events.
	got := anon.Req("all", `{}`)
	if len(got) != len(w.notes) {
		t.Fatalf("anonymous {}: %d events, want %d", len(got), len(w.notes))
	}
	if got := anon.Req("ids", `{"ids":["`+w.aliceToBob.ID.Hex()+`","`+w.notes[0].ID.Hex()+`"]}`); len(got) != 1 || got[0].ID != w.notes[0].ID {
		t.Fatalf("anonymous ids: %d events", len(got))
	}

	bob := dialAuthed(t, w.r, w.bob)
	want := idSet([]*nostr.Event{w.aliceToBob, w.wrapToBob, w.bobToAlice14})
	for _, f := range []string{`{"kinds":[4,14,1059]}`, `{"kinds":[4,14,1059],"limit":10}`} {
		if got := idSet(bob.Req("dm", f)); len(got) != 3 || !got[w.aliceToBob.ID] || !got[w.wrapToBob.ID] || !got[w.bobToAlice14.ID] {
			t.Fatalf("bob %s: %d events", f, len(got))
		}
	}
	got = bob.Req("all", `{}`)
	if len(got) != len(w.notes)+len(want) {
		t.Fatalf("bob {}: %d events, want %d", len(got), len(w.notes)+len(want))
	}
	// Someone else's messages: nothing, not an error.
	if got := bob.Req("dave", `{"kinds":[4],"#p":["`+w.dave.PK.Hex()+`"]}`); len(got) != 0 {
		t.Fatalf("bob reading dave's: %d events", len(got))
	}
	// The author sees what she sent.
	alice := dialAuthed(t, w.r, w.alice)
	if got := idSet(alice.Req("sent", `{"kinds":[4]}`)); len(got) != 1 || !got[w.aliceToBob.ID] {
		t.Fatalf("alice kind 4: %d events", len(got))
	}
}

func TestProtectLive(t *testing.T) {
	t.Parallel()
	w := newDMWorld(t, relay.Config{})
	anon := dialAuthed(t, w.r)
	anon.Req("all", `{}`)
	bob := dialAuthed(t, w.r, w.bob)
	bob.Req("dm", `{"kinds":[4]}`)
	bob.Req("all", `{}`)
	dave := dialAuthed(t, w.r, w.dave)
	dave.Req("dm", `{"kinds":[4]}`)

	pub := relaytest.Dial(t, w.r.URL)
	expectChallenge(t, pub)
	dm := w.alice.Event(4, "live", nostr.Tags{{"p", w.bob.PK.Hex()}}, 0)
	pub.MustPublish(dm)
	got := map[string]bool{}
	for range 2 {
		m := bob.ExpectType("EVENT")
		if m.Event.ID != dm.ID {
			t.Fatalf("bob got %s", describe(m))
		}
		got[m.SubID] = true
	}
	if !got["dm"] || !got["all"] {
		t.Fatalf("bob's subscriptions %v", got)
	}
	expectQuiet(t, anon)
	expectQuiet(t, dave)
	// A note still reaches everyone.
	note := w.carol.Note("public")
	pub.MustPublish(note)
	if m := anon.ExpectType("EVENT"); m.Event.ID != note.ID {
		t.Fatalf("anon got %s", describe(m))
	}
	// Authenticating later opens live delivery to an open subscription.
	late := relaytest.Dial(t, w.r.URL)
	ch := expectChallenge(t, late)
	late.Req("all", `{}`)
	pub.MustPublish(w.carol.Event(4, "before", nostr.Tags{{"p", w.bob.PK.Hex()}}, 0))
	expectQuiet(t, late)
	login(t, w.r, late, w.bob, ch)
	dm2 := w.carol.Event(4, "after", nostr.Tags{{"p", w.bob.PK.Hex()}}, 0)
	pub.MustPublish(dm2)
	if m := late.ExpectType("EVENT"); m.Event.ID != dm2.ID {
		t.Fatalf("late got %s", describe(m))
	}
}

func TestProtectCount(t *testing.T) {
	t.Parallel()
	w := newDMWorld(t, relay.Config{})
	n := func(c *relaytest.Client, sub string, filters ...string) int64 {
		t.Helper()
		return count(t, c, sub, filters...).Count
	}
	anon := dialAuthed(t, w.r)
	// Kind-less: total minus the protected part.
	if got := n(anon, "a", `{}`); got != 5 {
		t.Fatalf("anon {} = %d, want 5", got)
	}
	if got := n(anon, "b", `{"authors":["`+w.alice.PK.Hex()+`"]}`); got != 3 {
		t.Fatalf("anon alice = %d, want 3", got)
	}
	anon.SendRaw(`["COUNT","c",{"kinds":[4]}]`)
	anon.ExpectClosed("c", "auth-required: ")

	bob := dialAuthed(t, w.r, w.bob)
	f := func(filters string, want int64) {
		t.Helper()
		if got := n(bob, "x", filters); got != want {
			t.Fatalf("bob COUNT %s = %d, want %d", filters, got, want)
		}
	}
	f(`{}`, 8)                          // 5 notes + 3 of his
	f(`{"kinds":[4]}`, 1)               // alice's to him, not carol's to dave
	f(`{"kinds":[4,14,1059]}`, 3)       // split by author and #p
	f(`{"kinds":[1,4]}`, 6)             // 5 notes + 1
	f(`{"kinds":[4]},{"kinds":[4]}`, 1) // distinct over filters
	f(`{"authors":["`+w.alice.PK.Hex()+`"]}`, 4)
	f(`{"authors":["`+w.carol.PK.Hex()+`"],"kinds":[4]}`, 0)
	f(`{"kinds":[4],"#p":["`+w.bob.PK.Hex()+`"]}`, 1) // wholly visible
	// A #p naming someone else: counted one by one.
	f(`{"kinds":[4],"#p":["`+w.dave.PK.Hex()+`"]}`, 0)
	f(`{"#p":["`+w.dave.PK.Hex()+`"]}`, 0)
	f(`{"#p":["`+w.dave.PK.Hex()+`","`+w.bob.PK.Hex()+`"]}`, 2)
	carol := dialAuthed(t, w.r, w.carol)
	if got := n(carol, "y", `{"#p":["`+w.dave.PK.Hex()+`"]}`); got != 1 {
		t.Fatalf("carol #p dave = %d, want 1 (her own)", got)
	}
}

func TestProtectCountScanLimit(t *testing.T) {
	t.Parallel()
	w := newDMWorld(t, relay.Config{CountScanLimit: 1})
	// Two protected events p-tag bob: reading them one by one passes 1.
	carol := dialAuthed(t, w.r, w.carol)
	carol.SendRaw(`["COUNT","x",{"#p":["` + w.bob.PK.Hex() + `"]}]`)
	carol.ExpectClosed("x", "restricted: ")
	if v := trips(w.r, "count_scan_limit"); v != 1 {
		t.Fatalf("count_scan_limit = %d", v)
	}
	// Indexable filters need no scan.
	if got := count(t, carol, "y", `{"kinds":[4]}`).Count; got != 1 {
		t.Fatalf("carol kind 4 = %d", got)
	}
}

// TestProtectNeg: NEG-OPEN lists exactly the events a REQ with the same
// filter would return: protected events only to their authenticated
// author or recipients, through each way of computing the hidden part
// (no authentication, visible filters, a "#p" naming someone else read
// one by one).
func TestProtectNeg(t *testing.T) {
	t.Parallel()
	w := newDMWorld(t, relay.Config{})
	const empty = "6100000200" // an initial message for an empty set
	refused := func(c *relaytest.Client, sub, filter, wantPrefix string) {
		t.Helper()
		c.SendRaw(`["NEG-OPEN","` + sub + `",` + filter + `,"` + empty + `"]`)
		negExpectErr(t, c, sub, wantPrefix)
	}
	// served reconciles an empty set against the relay: the client needs
	// exactly the relay's items, which must be the events a REQ returns.
	served := func(c *relaytest.Client, sub, filter string, want ...*nostr.Event) {
		t.Helper()
		res := negRun(t, c, sub, filter, nil, 0)
		negCheck(t, "NEG "+filter, res.need, want)
		negCheck(t, "REQ "+filter, idSet(c.Req(sub+"-req", filter)), want)
	}
	alice, carol := w.notes[:3], w.notes[3:]
	with := func(evs []*nostr.Event, more ...*nostr.Event) []*nostr.Event {
		return append(slices.Clone(evs), more...)
	}
	pk := func(k relaytest.Key) string { return `"` + k.PK.Hex() + `"` }

	anon := dialAuthed(t, w.r)
	refused(anon, "a", `{"kinds":[4]}`, "auth-required: ")
	served(anon, "b", `{}`, w.notes...)
	served(anon, "c", `{"authors":[`+pk(w.alice)+`]}`, alice...)
	served(anon, "d", `{"#p":[`+pk(w.bob)+`]}`)
	served(anon, "e", `{"kinds":[1]}`, w.notes...)

	bob := dialAuthed(t, w.r, w.bob)
	served(bob, "f", `{}`, with(w.notes, w.aliceToBob, w.wrapToBob, w.bobToAlice14)...)
	served(bob, "g", `{"kinds":[4]}`, w.aliceToBob)
	served(bob, "h", `{"kinds":[4],"#p":[`+pk(w.bob)+`]}`, w.aliceToBob)
	served(bob, "i", `{"authors":[`+pk(w.alice)+`]}`, with(alice, w.aliceToBob)...)
	served(bob, "j", `{"authors":[`+pk(w.carol)+`]}`, carol...)
	// "#p" naming someone else: the protected matches are read one by one.
	served(bob, "k", `{"#p":[`+pk(w.dave)+`]}`)
	served(bob, "l", `{"#p":[`+pk(w.alice)+`]}`, w.bobToAlice14)
	served(bob, "m", `{"kinds":[4,14],"#p":[`+pk(w.alice)+`,`+pk(w.dave)+`]}`, w.bobToAlice14)

	dave := dialAuthed(t, w.r, w.dave)
	served(dave, "n", `{}`, with(w.notes, w.carolToDave)...)
	if v := w.r.Stats().RequestsRefused["auth-required"]; v != 1 {
		t.Fatalf("requests_refused.auth-required = %d, want 1", v)
	}
}

func TestProtectOff(t *testing.T) {
	t.Parallel()
	w := newDMWorld(t, relay.Config{ProtectedKinds: []int{}})
	anon := dialAuthed(t, w.r)
	if got := anon.Req("dm", `{"kinds":[4]}`); len(got) != 2 {
		t.Fatalf("no protection: %d kind-4 events", len(got))
	}
	if got := count(t, anon, "n", `{}`).Count; got != 9 {
		t.Fatalf("no protection: COUNT {} = %d", got)
	}
}
