package cluster

// Read and write protections across the nodes of a cluster, on the real
// PostgreSQL store (internal/pgtest) and NATS: the read protection of
// direct messages (relay.Config.ProtectedKinds: 4, 14 and 1059 by
// default) over the live bus and over a catch-up from the store, NIP-70
// protected events, and NIP-40 expiration. A node must serve what came
// from another node exactly as a single relay serves what it accepted
// itself (internal/relay/e2e_protect_test.go, e2e_nip70_test.go).

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/pgtest"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// startSQLNode is startNode over a PostgreSQL store; tweak (may be nil)
// changes the bridge's options, ro the test relay's.
func startSQLNode(t testing.TB, url, name, subject string, st nodeStore, tweak func(*Options), ro relaytest.Options) *node {
	t.Helper()
	return startNodeWith(t, url, name, subject, st, ro, tweak)
}

// sqlPair starts nodes a and b over one fresh PostgreSQL schema, on the
// bus at urlA and urlB (a proxy's, to cut b off), and waits until each
// hears the other. tweakB changes b's bridge options.
func sqlPair(t testing.TB, urlA, urlB string, tweakB func(*Options)) (a, b *node) {
	t.Helper()
	stores := pgtest.Nodes(t, 2) // closed after the relays (cleanups run last first)
	subject := testSubject(t)
	a = startSQLNode(t, urlA, "a", subject, stores[0], nil, relaytest.Options{})
	b = startSQLNode(t, urlB, "b", subject, stores[1], tweakB, relaytest.Options{})
	waitConnected(t, a, b)
	return a, b
}

// dmCast are the people of the direct-message tests: alice writes to bob
// (kind 4), a throwaway key wraps a message for bob (kind 1059), carol is
// authenticated but neither author nor recipient, and fence signs the
// public notes that mark the end of what a client was sent.
type dmCast struct {
	alice, bob, carol, wrapper, fence relaytest.Key
}

func newDMCast(prefix string) dmCast {
	return dmCast{
		alice: relaytest.NewKey(prefix + " alice"), bob: relaytest.NewKey(prefix + " bob"),
		carol: relaytest.NewKey(prefix + " carol"), wrapper: relaytest.NewKey(prefix + " wrapper"),
		fence: relaytest.NewKey(prefix + " fence"),
	}
}

// dms returns a kind-4 message from alice to bob and a gift wrap for bob.
func (c dmCast) dms() (dm, wrap *nostr.Event) {
	dm = c.alice.Event(nostr.KindEncryptedDM, "hi bob", nostr.Tags{{"p", c.bob.PK.Hex()}}, 0)
	wrap = c.wrapper.Event(nostr.KindGiftWrap, "sealed", nostr.Tags{{"p", c.bob.PK.Hex()}}, 0)
	return dm, wrap
}

// visibleTo reports whether a client authenticated as k may read ev, an
// event of a protected kind: k wrote it or is "p"-tagged in it.
func visibleTo(ev *nostr.Event, k relaytest.Key) bool {
	if ev.PubKey == k.PK {
		return true
	}
	for _, tag := range ev.Tags {
		if len(tag) >= 2 && tag[0] == "p" && tag[1] == k.PK.Hex() {
			return true
		}
	}
	return false
}

// askProtected sends a REQ naming the protected kinds on a connection not
// authenticated, and checks the single relay's answer to it (auth.go,
// checkReq): the AUTH challenge first, unless this connection was sent it
// already, then CLOSED "auth-required:". It returns the challenge ("" if
// none was sent).
func askProtected(t testing.TB, c *relaytest.Client, subID string, challenged bool) string {
	t.Helper()
	c.SendRaw(`["REQ","` + subID + `",{"kinds":[4,1059]}]`)
	ch := ""
	if !challenged {
		m := c.ExpectType("AUTH")
		if len(m.Message) < 16 {
			t.Fatalf("challenge %q is too short", m.Message)
		}
		ch = m.Message
	}
	m := c.ExpectClosed(subID, "auth-required: ")
	if !strings.Contains(m.Message, "4, 14 and 1059 are served only to their authenticated author or recipients") {
		t.Fatalf("CLOSED %q does not name the protected kinds", m.Message)
	}
	return ch
}

// dialAs connects to n and authenticates as each of keys (NIP-42), with
// the challenge an unauthenticated REQ for the protected kinds brings.
// With no keys the client stays unauthenticated, already challenged.
func dialAs(t testing.TB, n *node, keys ...relaytest.Key) *relaytest.Client {
	t.Helper()
	c := relaytest.Dial(t, n.r.URL)
	ch := askProtected(t, c, "challenge", false)
	for _, k := range keys {
		auth := k.Event(nostr.KindClientAuth, "", nostr.Tags{{"relay", n.r.URL}, {"challenge", ch}}, 0)
		c.SendRaw(`["AUTH",` + string(auth.Raw) + `]`)
		if m := c.ExpectType("OK"); m.EventID != auth.ID || !m.OK {
			t.Fatalf("AUTH as %.8s on %s refused: %q", k.PK.Hex(), n.name, m.Message)
		}
	}
	return c
}

// watcher is one client on a node with one live subscription, counting
// the events it receives by id.
type watcher struct {
	t    testing.TB
	name string
	c    *relaytest.Client
	got  map[nostr.ID]int
}

// watch opens a subscription on c to filters and to the fence's notes,
// and counts what its stored query returns.
func watch(t testing.TB, name string, c *relaytest.Client, fence relaytest.Key, filters ...string) *watcher {
	t.Helper()
	w := &watcher{t: t, name: name, c: c, got: map[nostr.ID]int{}}
	for _, ev := range c.Req("live", append(filters, `{"authors":["`+fence.PK.Hex()+`"]}`)...) {
		w.got[ev.ID]++
	}
	return w
}

// until reads until each of want has arrived; anything but an EVENT of
// the subscription fails the test.
func (w *watcher) until(want ...*nostr.Event) {
	w.t.Helper()
	for slices.ContainsFunc(want, func(ev *nostr.Event) bool { return w.got[ev.ID] == 0 }) {
		m := w.c.Read()
		if m.Type != "EVENT" || m.SubID != "live" {
			w.t.Fatalf("%s: unexpected %s %q %q", w.name, m.Type, m.SubID, m.Message)
		}
		w.got[m.Event.ID]++
	}
}

// once fails unless each of evs arrived exactly once.
func (w *watcher) once(evs ...*nostr.Event) {
	w.t.Helper()
	for _, ev := range evs {
		if n := w.got[ev.ID]; n != 1 {
			w.t.Errorf("%s got kind %d %.8s %d times, want once", w.name, ev.Kind, ev.ID.Hex(), n)
		}
	}
}

// never fails if any of evs arrived.
func (w *watcher) never(evs ...*nostr.Event) {
	w.t.Helper()
	for _, ev := range evs {
		if n := w.got[ev.ID]; n != 0 {
			w.t.Errorf("%s got kind %d %.8s %d times, want never", w.name, ev.Kind, ev.ID.Hex(), n)
		}
	}
}

// fence hands a fresh public note by the fence's key straight to n's
// relay once n's catch-ups are done, behind everything handed to it
// before (its fan-out is first in, first out), and reads on each watcher
// until it arrives: afterwards each has been sent every delivery n will
// ever make of what came before.
func fence(t testing.TB, n *node, k relaytest.Key, ws ...*watcher) {
	t.Helper()
	waitFor(t, n.name+"'s catch-ups to finish", func() bool { return idle(n.b) })
	f := k.Note("fence " + strconv.FormatInt(time.Now().UnixNano(), 10))
	n.r.Relay.Publish(f, 0)
	for _, w := range ws {
		w.until(f)
	}
}

// dmWatchers are clients on one node subscribed to what could carry
// bob's direct messages: one not authenticated (its REQ for the
// protected kinds refused, its subscription to bob's "p" tag accepted),
// carol (authenticated, neither author nor recipient), bob and alice.
type dmWatchers struct {
	anon, carol, bob, alice *watcher
}

func watchDMs(t testing.TB, n *node, c dmCast) dmWatchers {
	t.Helper()
	pBob := `{"#p":["` + c.bob.PK.Hex() + `"]}`
	anon := dialAs(t, n)
	askProtected(t, anon, "dm", true) // refused again, no second challenge
	return dmWatchers{
		anon:  watch(t, n.name+" anonymous", anon, c.fence, pBob),
		carol: watch(t, n.name+" carol", dialAs(t, n, c.carol), c.fence, `{"kinds":[4,1059]}`, pBob),
		bob:   watch(t, n.name+" bob", dialAs(t, n, c.bob), c.fence, `{"kinds":[4,1059]}`, pBob),
		alice: watch(t, n.name+" alice", dialAs(t, n, c.alice), c.fence, `{"kinds":[4,1059]}`),
	}
}

func (ws dmWatchers) all() []*watcher { return []*watcher{ws.anon, ws.carol, ws.bob, ws.alice} }

// checkDelivered checks what each watcher got of dms, events of protected
// kinds: exactly once if it may read them, never otherwise.
func (ws dmWatchers) checkDelivered(c dmCast, dms ...*nostr.Event) {
	ws.anon.t.Helper()
	ws.anon.never(dms...)
	for _, p := range []struct {
		w *watcher
		k relaytest.Key
	}{{ws.carol, c.carol}, {ws.bob, c.bob}, {ws.alice, c.alice}} {
		for _, ev := range dms {
			if visibleTo(ev, p.k) {
				p.w.once(ev)
			} else {
				p.w.never(ev)
			}
		}
	}
}

// checkStored checks what stored queries and counts on n, from new
// connections, return of dms (events of protected kinds, the only ones of
// those kinds in the store): nothing without authentication (a REQ naming
// the kinds refused as a single relay refuses it), each to its author and
// recipients, nothing to anyone else.
func checkStored(t testing.TB, n *node, c dmCast, dms ...*nostr.Event) {
	t.Helper()
	ids := make([]string, len(dms))
	for i, ev := range dms {
		ids[i] = `"` + ev.ID.Hex() + `"`
	}
	byID := `{"ids":[` + strings.Join(ids, ",") + `]}`
	pBob := `{"#p":["` + c.bob.PK.Hex() + `"]}`

	anon := dialAs(t, n) // a REQ for the kinds refused, as checked there
	for _, f := range []string{byID, pBob, `{}`} {
		if got := anon.Req("q", f); len(got) != 0 {
			t.Errorf("%s: anonymous stored REQ %s returned %d events, want none", n.name, f, len(got))
		}
	}
	if got := countOn(t, anon, pBob); got != 0 {
		t.Errorf("%s: anonymous COUNT %s = %d, want 0", n.name, pBob, got)
	}

	for _, k := range []relaytest.Key{c.carol, c.bob, c.alice} {
		var want []*nostr.Event
		for _, ev := range dms {
			if visibleTo(ev, k) {
				want = append(want, ev)
			}
		}
		cl := dialAs(t, n, k)
		for _, f := range []string{byID, `{"kinds":[4,1059]}`, pBob} {
			got := cl.Req("q", f)
			if !sameIDs(got, want) {
				t.Errorf("%s: stored REQ %s as %.8s returned %d events (%v), want %d", n.name, f, k.PK.Hex(), len(got), idList(got), len(want))
			}
		}
		if got := countOn(t, cl, `{"kinds":[4,1059]}`); got != int64(len(want)) {
			t.Errorf("%s: COUNT of kinds 4 and 1059 as %.8s = %d, want %d", n.name, k.PK.Hex(), got, len(want))
		}
	}
}

// countOn sends a COUNT and returns its answer.
func countOn(t testing.TB, c *relaytest.Client, filter string) int64 {
	t.Helper()
	c.SendRaw(`["COUNT","n",` + filter + `]`)
	m := c.Read()
	if m.Type != "COUNT" || m.SubID != "n" {
		t.Fatalf("COUNT %s: got %s %q", filter, m.Type, m.Message)
	}
	return m.Count
}

func sameIDs(got, want []*nostr.Event) bool {
	if len(got) != len(want) {
		return false
	}
	for _, ev := range want {
		if !slices.ContainsFunc(got, func(g *nostr.Event) bool { return g.ID == ev.ID }) {
			return false
		}
	}
	return true
}

func idList(evs []*nostr.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID.Hex()[:8]
	}
	return out
}

// TestProtectedKindsAcrossNodes: a kind-4 message and a gift wrap
// accepted on node a reach, over the bus, only their authenticated author
// and recipient on node b, each exactly once; a client on b not
// authenticated has its REQ for those kinds refused "auth-required:"
// (after the AUTH challenge), as a single relay refuses it, and gets
// nothing of them on a subscription that may match them; one
// authenticated as someone else gets nothing either. Stored queries and
// counts on b serve them the same way.
func TestProtectedKindsAcrossNodes(t *testing.T) {
	t.Parallel()
	url := sharedNATS(t)
	a, b := sqlPair(t, url, url, nil)
	c := newDMCast("protect live")
	ws := watchDMs(t, b, c)
	dm, wrap := c.dms()
	pa := relaytest.Dial(t, a.r.URL)
	pa.MustPublish(dm)
	pa.MustPublish(wrap)

	ws.bob.until(dm, wrap)
	ws.alice.until(dm)
	fence(t, b, c.fence, ws.all()...)
	ws.checkDelivered(c, dm, wrap)
	if s := b.b.Stats(); s.Received < 2 {
		t.Errorf("b received %d events from the bus, want the 2 messages at least", s.Received)
	}
	checkStored(t, b, c, dm, wrap)
}

// TestProtectedKindsCaughtUp: the same messages accepted on a while b is
// cut off the bus reach b's author and recipient through b's catch-ups
// from the store, exactly once, and never b's clients who may not read
// them: caught up by b's polls while it is cut off, and, with no polls,
// by the catch-up at its reconnection.
func TestProtectedKindsCaughtUp(t *testing.T) {
	t.Parallel()
	url := sharedNATS(t)
	for _, tc := range []struct {
		name  string
		polls bool
	}{{"polled", true}, {"reconnection", false}} {
		t.Run(tc.name, func(t *testing.T) {
			px := startProxy(t, url)
			var tweak func(*Options)
			if !tc.polls {
				tweak = func(o *Options) { o.PollInterval = time.Hour }
			}
			a, b := sqlPair(t, url, px.URL, tweak)
			c := newDMCast("protect catch-up " + tc.name)
			ws := watchDMs(t, b, c)
			pa := relaytest.Dial(t, a.r.URL)

			c0 := b.b.Stats().CatchUps
			px.Cut()
			if tc.polls {
				waitFor(t, "b to notice the cut", func() bool { return !b.b.Stats().Connected })
			} else {
				cutCaughtUp(t, b, c0)
			}
			dm, wrap := c.dms()
			pa.MustPublish(dm)
			pa.MustPublish(wrap)
			if tc.polls {
				ws.bob.until(dm, wrap) // while b is still cut off
			}
			px.Heal()
			waitConnected(t, a, b)

			ws.bob.until(dm, wrap)
			ws.alice.until(dm)
			fence(t, b, c.fence, ws.all()...)
			ws.checkDelivered(c, dm, wrap)
			s := b.b.Stats()
			if s.Received != 0 {
				t.Errorf("b received %d events over the bus, want none: the messages must come by a catch-up", s.Received)
			}
			if s.CaughtUp < 2 {
				t.Errorf("b caught up %d events, want the 2 messages at least", s.CaughtUp)
			}
			checkStored(t, b, c, dm, wrap)
		})
	}
}

// cutCaughtUp waits, once n was cut off the bus, for the catch-up its
// disconnection asks for to have run (c0: n's catch-ups before the cut):
// with polls off, nothing reads the store for n afterwards until it is
// back on the bus.
func cutCaughtUp(t testing.TB, n *node, c0 int64) {
	t.Helper()
	waitFor(t, n.name+"'s catch-up at the cut", func() bool {
		if n.b.Stats().Connected || n.b.Stats().CatchUps == c0 {
			return false
		}
		n.b.cu.mu.Lock()
		defer n.b.cu.mu.Unlock()
		return !n.b.cu.pending && !n.b.cu.running
	})
}

// TestProtectedEventAcrossNodes: a NIP-70 protected event ("-" tag) is
// accepted on node a only from its authenticated author (refused
// "auth-required:", after the challenge, without authentication, and
// "restricted:" from someone else, as on a single relay); once accepted
// it is readable by everyone: it reaches a subscriber on node b not
// authenticated, exactly once, and b's stored queries return it.
func TestProtectedEventAcrossNodes(t *testing.T) {
	t.Parallel()
	url := sharedNATS(t)
	a, b := sqlPair(t, url, url, nil)
	alice, bob, fenceKey := relaytest.NewKey("nip70 alice"), relaytest.NewKey("nip70 bob"), relaytest.NewKey("nip70 fence")
	w := watch(t, "b anonymous", relaytest.Dial(t, b.r.URL), fenceKey, `{"authors":["`+alice.PK.Hex()+`"]}`)

	ev := alice.Event(nostr.KindTextNote, "members only", nostr.Tags{{"-"}}, 0)
	pa := relaytest.Dial(t, a.r.URL)
	pa.SendRaw(`["EVENT",` + string(ev.Raw) + `]`)
	ch := pa.ExpectType("AUTH").Message // the challenge comes first
	if m := pa.ExpectType("OK"); m.OK || !strings.HasPrefix(m.Message, "auth-required: ") {
		t.Fatalf("protected event without AUTH: %+v", m)
	}
	for _, k := range []relaytest.Key{bob, alice} {
		auth := k.Event(nostr.KindClientAuth, "", nostr.Tags{{"relay", a.r.URL}, {"challenge", ch}}, 0)
		pa.SendRaw(`["AUTH",` + string(auth.Raw) + `]`)
		if m := pa.ExpectType("OK"); !m.OK {
			t.Fatalf("AUTH refused: %q", m.Message)
		}
		if k == bob {
			if m := pa.Publish(ev); m.OK || !strings.HasPrefix(m.Message, "restricted: ") {
				t.Fatalf("protected event from someone else: %+v", m)
			}
		}
	}
	pa.MustPublish(ev) // authenticated as bob and alice: alice's is accepted

	w.until(ev)
	fence(t, b, fenceKey, w)
	w.once(ev)
	for _, f := range []string{`{"ids":["` + ev.ID.Hex() + `"]}`, `{"authors":["` + alice.PK.Hex() + `"]}`} {
		if got := relaytest.Dial(t, b.r.URL).Req("q", f); len(got) != 1 || got[0].ID != ev.ID {
			t.Errorf("b: stored REQ %s returned %v, want the protected event", f, idList(got))
		}
	}
	if rej := a.r.Stats().EventsRejected; rej["auth-required"] != 1 || rej["restricted"] != 1 {
		t.Errorf("a rejected %v, want one auth-required and one restricted", rej)
	}
}

// TestExpirationAcrossNodes: an event accepted on node a that expires
// (NIP-40) a few seconds later reaches node b live while it is valid and
// is served by b's stored queries until it expires, not after; and an
// event that expired while b was cut off the bus is not handed out by the
// catch-up at b's reconnection.
func TestExpirationAcrossNodes(t *testing.T) {
	t.Parallel()
	url := sharedNATS(t)
	px := startProxy(t, url)
	// No polls while b is cut off: its catch-up comes at the reconnection.
	a, b := sqlPair(t, url, px.URL, func(o *Options) { o.PollInterval = time.Hour })
	alice, fenceKey := relaytest.NewKey("nip40 alice"), relaytest.NewKey("nip40 fence")
	w := watch(t, "b", relaytest.Dial(t, b.r.URL), fenceKey, `{"authors":["`+alice.PK.Hex()+`"]}`)
	pa := relaytest.Dial(t, a.r.URL)
	expiring := func(content string, in int64) (*nostr.Event, int64) {
		exp := time.Now().Unix() + in
		return alice.Event(nostr.KindTextNote, content, nostr.Tags{{"expiration", strconv.FormatInt(exp, 10)}}, 0), exp
	}
	storedOnB := func(ev *nostr.Event) int {
		return len(relaytest.Dial(t, b.r.URL).Req("q", `{"ids":["`+ev.ID.Hex()+`"]}`))
	}
	waitExpired := func(exp int64) {
		for time.Now().Unix() < exp {
			time.Sleep(50 * time.Millisecond)
		}
	}

	ev, exp := expiring("short-lived", 3)
	pa.MustPublish(ev)
	w.until(ev)
	before := time.Now().Unix()
	n := storedOnB(ev)
	if after := time.Now().Unix(); after < exp && n != 1 {
		t.Fatalf("b: stored REQ before the expiration returned %d events, want 1", n)
	} else if before >= exp {
		t.Logf("the expiration passed before b's stored REQ ran (%d events)", n)
	}
	waitExpired(exp)
	if n := storedOnB(ev); n != 0 {
		t.Errorf("b: stored REQ after the expiration returned %d events, want none", n)
	}
	if got := relaytest.Dial(t, b.r.URL).Req("q", `{"authors":["`+alice.PK.Hex()+`"]}`); len(got) != 0 {
		t.Errorf("b: stored REQ by author after the expiration returned %v, want none", idList(got))
	}

	// Accepted on a while b is cut off; expired when b comes back.
	c0 := b.b.Stats().CatchUps
	px.Cut()
	// The disconnection's own catch-up runs now, before the event is
	// accepted: afterwards nothing reads the store until b is back.
	cutCaughtUp(t, b, c0)
	gone, exp2 := expiring("expired while b was away", 2)
	pa.MustPublish(gone)
	if has, err := a.r.Store.Has(context.Background(), gone.ID); err != nil || !has {
		t.Fatalf("a did not store the event: %v %v", has, err)
	}
	waitExpired(exp2)
	px.Heal()
	waitConnected(t, a, b)
	fence(t, b, fenceKey, w)
	w.once(ev)
	w.never(gone)
	s := b.b.Stats()
	if s.CatchUps < c0+2 || s.ExpiredSkipped < 1 {
		t.Errorf("b: %d catch-ups (%d before the cut), %d expired events skipped; want the reconnection's catch-up to skip the expired one", s.CatchUps, c0, s.ExpiredSkipped)
	}
	if n := storedOnB(gone); n != 0 {
		t.Errorf("b: stored REQ for the expired event returned %d events, want none", n)
	}
}
