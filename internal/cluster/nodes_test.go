package cluster

// Reads that span the whole shared store, served by any node: NIP-77
// negentropy reconciliation, NIP-45 COUNT (with its "hll" field), and a
// relay that requires authentication (relay.Config.AuthRequired, with and
// without AuthOnConnect), on the real PostgreSQL store and NATS. A node
// must answer about what other nodes accepted exactly as a single relay
// answers about what it accepted itself (internal/relay/e2e_sync_test.go,
// e2e_count_test.go, e2e_protect_test.go, e2e_auth_test.go), and its read
// protection of direct messages must hold for them too.

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/negentropy"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/pgtest"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// sqlPairConfig is sqlPair on the NATS server at url (no proxy), both
// relays configured with rc.
func sqlPairConfig(t testing.TB, url string, rc relay.Config) (a, b *node) {
	t.Helper()
	stores := pgtest.Nodes(t, 2)
	subject := testSubject(t)
	a = startSQLNode(t, url, "a", subject, stores[0], nil, relaytest.Options{Relay: rc})
	b = startSQLNode(t, url, "b", subject, stores[1], nil, relaytest.Options{Relay: rc})
	waitConnected(t, a, b)
	return a, b
}

// publishOn publishes evs on node n, from one connection, and fails
// unless each is accepted (committed to the shared store).
func publishOn(t testing.TB, n *node, evs ...*nostr.Event) {
	t.Helper()
	c := relaytest.Dial(t, n.r.URL)
	for _, ev := range evs {
		c.MustPublish(ev)
	}
	c.Close()
}

// asItems returns evs as negentropy items.
func asItems(evs ...*nostr.Event) []negentropy.Item {
	out := make([]negentropy.Item, len(evs))
	for i, ev := range evs {
		out[i] = negentropy.Item{Timestamp: uint64(ev.CreatedAt), ID: ev.ID}
	}
	return out
}

// negReconcile runs a NIP-77 session on c for filter, the client side
// holding items (internal/negentropy as the client), to its end, and
// closes it. It returns the ids the client has and the relay lacks, and
// those the relay has and the client lacks.
func negReconcile(t testing.TB, c *relaytest.Client, subID, filter string, items []negentropy.Item) (have, need map[nostr.ID]bool) {
	t.Helper()
	v, err := negentropy.NewVector(slices.Clone(items))
	if err != nil {
		t.Fatal(err)
	}
	n, err := negentropy.New(v, 4096) // small frames: several rounds
	if err != nil {
		t.Fatal(err)
	}
	msg, err := n.Initiate()
	if err != nil {
		t.Fatal(err)
	}
	c.SendRaw(`["NEG-OPEN","` + subID + `",` + filter + `,"` + hex.EncodeToString(msg) + `"]`)
	have, need = map[nostr.ID]bool{}, map[nostr.ID]bool{}
	for round := 1; ; round++ {
		m := c.Read()
		if m.Type != "NEG-MSG" || m.SubID != subID {
			t.Fatalf("NEG %s %s round %d: got %s %q %q", subID, filter, round, m.Type, m.SubID, m.Message)
		}
		next, h, nd, err := n.ReconcileClient(m.NegPayload)
		if err != nil {
			t.Fatalf("NEG %s round %d: %v", filter, round, err)
		}
		for _, id := range h {
			have[id] = true
		}
		for _, id := range nd {
			need[id] = true
		}
		if next == nil {
			break
		}
		if round > 100 {
			t.Fatalf("NEG %s: no end after 100 rounds", filter)
		}
		c.SendRaw(`["NEG-MSG","` + subID + `","` + hex.EncodeToString(next) + `"]`)
	}
	c.SendRaw(`["NEG-CLOSE","` + subID + `"]`)
	return have, need
}

// checkIDSet fails unless got holds exactly the ids of want.
func checkIDSet(t testing.TB, what string, got map[nostr.ID]bool, want []*nostr.Event) {
	t.Helper()
	wanted := map[nostr.ID]bool{}
	for _, ev := range want {
		wanted[ev.ID] = true
		if !got[ev.ID] {
			t.Errorf("%s: lacks kind %d %.8s (%q)", what, ev.Kind, ev.ID.Hex(), ev.Content)
		}
	}
	for id := range got {
		if !wanted[id] {
			t.Errorf("%s: unexpected id %.8s", what, id.Hex())
		}
	}
}

// dmSet are the direct messages of the NIP-77 and COUNT tests, all
// "p"-tagging bob: alice's kind-4 message, a gift wrap, and bob's kind-4
// note to himself (which bob may read both as author and as recipient).
type dmSet struct {
	dm, wrap, self *nostr.Event
}

func newDMSet(c dmCast) dmSet {
	dm, wrap := c.dms()
	self := c.bob.Event(nostr.KindEncryptedDM, "note to self", nostr.Tags{{"p", c.bob.PK.Hex()}}, 0)
	return dmSet{dm: dm, wrap: wrap, self: self}
}

func (d dmSet) all() []*nostr.Event { return []*nostr.Event{d.dm, d.wrap, d.self} }

// visible returns those of d that k may read.
func (d dmSet) visible(k relaytest.Key) []*nostr.Event {
	var out []*nostr.Event
	for _, ev := range d.all() {
		if visibleTo(ev, k) {
			out = append(out, ev)
		}
	}
	return out
}

// TestNegentropyAcrossNodes: NIP-77 on one node reconciles against the
// whole shared store. Notes are accepted on both nodes; a client on
// either node, holding some of each node's notes and some the store lacks,
// learns exactly the ids it lacks (need) and exactly its own that the
// store lacks (have), events of other kinds left out by the filter. The
// direct messages accepted on node a are read-protected on node b as on a
// single relay (internal/relay TestProtectNeg): a NEG-OPEN naming kinds 4
// and 1059 without authentication is answered with the AUTH challenge and
// NEG-ERR "auth-required:"; a kind-less NEG-OPEN leaves them out, so a
// client that may not read them never learns their ids, and one holding
// them is told the relay lacks them (their existence is not given away
// either); their author and recipient get exactly the ones they may read.
func TestNegentropyAcrossNodes(t *testing.T) {
	t.Parallel()
	url := sharedNATS(t)
	a, b := sqlPair(t, url, url, nil)
	c := newDMCast("neg")
	onA := notes(c.alice, "neg on a", 40)
	onB := notes(c.carol, "neg on b", 40)
	reaction := c.alice.Event(7, "+", nostr.Tags{{"e", onB[0].ID.Hex()}}, 0) // not kind 1
	dms := newDMSet(c)
	publishOn(t, a, append(slices.Clone(onA), reaction, dms.dm, dms.wrap, dms.self)...)
	publishOn(t, b, onB...)
	public := slices.Concat(onA, onB, []*nostr.Event{reaction})
	clientOnly := notes(c.fence, "neg client only", 7) // never published

	// Kind 1, on each node: the client lacks half of each node's notes.
	held := asItems(slices.Concat(onA[:20], onB[20:], clientOnly)...)
	for _, n := range []*node{b, a} {
		cl := relaytest.Dial(t, n.r.URL)
		have, need := negReconcile(t, cl, "kind1", `{"kinds":[1]}`, held)
		checkIDSet(t, n.name+": need of kind 1", need, slices.Concat(onA[20:], onB[:20]))
		checkIDSet(t, n.name+": have of kind 1", have, clientOnly)
		// An empty client learns every public event, a full one nothing.
		have, need = negReconcile(t, cl, "empty", `{}`, nil)
		checkIDSet(t, n.name+": need of {} from nothing", need, public)
		checkIDSet(t, n.name+": have of {} from nothing", have, nil)
		have, need = negReconcile(t, cl, "full", `{}`, asItems(public...))
		checkIDSet(t, n.name+": need of {} from everything", need, nil)
		checkIDSet(t, n.name+": have of {} from everything", have, nil)
	}

	// Read protection on b, of what a accepted.
	fresh := relaytest.Dial(t, b.r.URL)
	fresh.SendRaw(`["NEG-OPEN","dm",{"kinds":[4,1059]},"6100000200"]`)
	if ch := fresh.ExpectType("AUTH").Message; len(ch) < 16 {
		t.Fatalf("challenge %q is too short", ch)
	}
	negRefusedAuth(t, fresh, "dm")
	anon := dialAs(t, b) // challenged, not authenticated
	for _, f := range []string{`{"kinds":[4,1059]}`, `{"kinds":[1,4]}`, `{"kinds":[1059],"#p":["` + c.bob.PK.Hex() + `"]}`} {
		anon.SendRaw(`["NEG-OPEN","dm",` + f + `,"6100000200"]`) // no second challenge
		negRefusedAuth(t, anon, "dm")
	}
	pBob := `{"#p":["` + c.bob.PK.Hex() + `"]}`
	for _, who := range []struct {
		name string
		c    *relaytest.Client
		k    *relaytest.Key
	}{{"anonymous", anon, nil}, {"carol", dialAs(t, b, c.carol), &c.carol}, {"alice", dialAs(t, b, c.alice), &c.alice}, {"bob", dialAs(t, b, c.bob), &c.bob}} {
		var mine []*nostr.Event
		if who.k != nil {
			mine = dms.visible(*who.k)
		}
		hidden := slices.DeleteFunc(dms.all(), func(ev *nostr.Event) bool { return slices.Contains(mine, ev) })
		what := "b, " + who.name + ": "
		have, need := negReconcile(t, who.c, "all", `{}`, nil)
		checkIDSet(t, what+"need of {} from nothing", need, append(slices.Clone(public), mine...))
		checkIDSet(t, what+"have of {} from nothing", have, nil)
		have, need = negReconcile(t, who.c, "pbob", pBob, nil)
		checkIDSet(t, what+"need of #p bob from nothing", need, mine)
		checkIDSet(t, what+"have of #p bob from nothing", have, nil)
		// Holding every event: those it may not read look missing from
		// the relay, exactly as if they had never been accepted.
		have, need = negReconcile(t, who.c, "holds", `{}`, asItems(append(slices.Clone(public), dms.all()...)...))
		checkIDSet(t, what+"need of {} from everything", need, nil)
		checkIDSet(t, what+"have of {} from everything", have, hidden)
		if who.k != nil {
			have, need = negReconcile(t, who.c, "dms", `{"kinds":[4,1059]}`, nil)
			checkIDSet(t, what+"need of kinds 4 and 1059", need, mine)
			checkIDSet(t, what+"have of kinds 4 and 1059", have, nil)
		}
	}
	if st := b.r.Relay.NegStats(); st.Refused != 4 {
		t.Errorf("b's NIP-77 counters %+v: want 4 refusals", st)
	}
}

// negRefusedAuth reads a NEG-ERR for subID refusing it "auth-required:"
// because it names the protected kinds, as a single relay refuses it.
func negRefusedAuth(t testing.TB, c *relaytest.Client, subID string) {
	t.Helper()
	m := c.ExpectType("NEG-ERR")
	if m.SubID != subID || !strings.HasPrefix(m.Message, "auth-required: ") ||
		!strings.Contains(m.Message, "4, 14 and 1059 are served only to their authenticated author or recipients") {
		t.Fatalf("NEG-OPEN for the protected kinds: NEG-ERR %q %q, want auth-required", m.SubID, m.Message)
	}
}

// countMsg sends a COUNT and returns its answer.
func countMsg(t testing.TB, c *relaytest.Client, filter string) *nostr.RelayMessage {
	t.Helper()
	c.SendRaw(`["COUNT","n",` + filter + `]`)
	m := c.Read()
	if m.Type != "COUNT" || m.SubID != "n" {
		t.Fatalf("COUNT %s: got %s %q", filter, m.Type, m.Message)
	}
	return m
}

// nip45HLL computes the NIP-45 registers for events by pubkeys counted
// with a filter whose tag value is v (a hex id or pubkey), bit by bit as
// the NIP describes them, independently of the relay's code: the offset
// is v's character 32, as a hex digit, plus 8; the byte of a pubkey at the
// offset picks the register, which keeps the largest count of leading
// zero bits, plus one, of the 56 bits that follow.
func nip45HLL(v string, pubkeys []nostr.PubKey) []byte {
	d, err := strconv.ParseUint(v[32:33], 16, 8)
	if err != nil {
		panic(err)
	}
	offset := int(d) + 8
	reg := make([]byte, 256)
	for _, pk := range pubkeys {
		z := 0
		for bit := 0; bit < 56 && pk[offset+1+bit/8]&(0x80>>(bit%8)) == 0; bit++ {
			z++
		}
		reg[pk[offset]] = max(reg[pk[offset]], byte(z+1))
	}
	return reg
}

func authorsOf(evs []*nostr.Event) []nostr.PubKey {
	out := make([]nostr.PubKey, len(evs))
	for i, ev := range evs {
		out[i] = ev.PubKey
	}
	return out
}

// TestCountAcrossNodes: NIP-45 COUNT on either node counts the events
// accepted on both; for a filter that qualifies for "hll" (one filter,
// one tag condition) both nodes answer the registers NIP-45 gives for the
// authors of every counted event, the same on a and b. The direct
// messages accepted on node a are counted on either node only for a
// client who may read them, as on a single relay (internal/relay
// TestProtectCount): a COUNT naming kinds 4 and 1059 without
// authentication is refused "auth-required:"; a kind-less one and one
// that may match them ("#p" of their recipient) count only the events
// the client may read, and their "hll" holds only those events' authors.
func TestCountAcrossNodes(t *testing.T) {
	t.Parallel()
	url := sharedNATS(t)
	a, b := sqlPair(t, url, url, nil)
	c := newDMCast("count")
	target := c.alice.Note("popular")
	var reactions, mentions []*nostr.Event
	for i := range 24 {
		fan := relaytest.NewKey(fmt.Sprintf("count fan %d", i))
		reactions = append(reactions, fan.Event(7, "+", nostr.Tags{{"e", target.ID.Hex()}}, 0))
		if i < 6 {
			mentions = append(mentions, fan.Note("hi bob", nostr.Tag{"p", c.bob.PK.Hex()}))
		}
	}
	dms := newDMSet(c)
	var onA, onB []*nostr.Event
	for i, ev := range slices.Concat(reactions, mentions) {
		if i%2 == 0 {
			onA = append(onA, ev)
		} else {
			onB = append(onB, ev)
		}
	}
	publishOn(t, a, append(onA, target, dms.dm, dms.wrap, dms.self)...)
	publishOn(t, b, onB...)
	public := int64(1 + len(reactions) + len(mentions))

	reacted := `{"kinds":[7],"#e":["` + target.ID.Hex() + `"]}`
	pBob := `{"#p":["` + c.bob.PK.Hex() + `"]}`
	type answer struct {
		n   int64
		hll []byte // nil: no "hll" wanted
	}
	for _, who := range []struct {
		name string
		k    *relaytest.Key
	}{{"anonymous", nil}, {"carol", &c.carol}, {"alice", &c.alice}, {"bob", &c.bob}} {
		var mine []*nostr.Event
		if who.k != nil {
			mine = dms.visible(*who.k)
		}
		want := map[string]answer{
			`{}`:                 {n: public + int64(len(mine))},
			`{"kinds":[1,7]}`:    {n: public},
			reacted:              {n: int64(len(reactions)), hll: nip45HLL(target.ID.Hex(), authorsOf(reactions))},
			pBob:                 {n: int64(len(mentions) + len(mine)), hll: nip45HLL(c.bob.PK.Hex(), authorsOf(append(slices.Clone(mentions), mine...)))},
			`{"kinds":[4,1059]}`: {n: int64(len(mine))},
		}
		if who.k == nil {
			delete(want, `{"kinds":[4,1059]}`) // refused, below
		}
		got := map[string][]*nostr.RelayMessage{}
		for _, n := range []*node{a, b} {
			var cl *relaytest.Client
			if who.k == nil {
				cl = dialAs(t, n) // its REQ for the protected kinds refused
				cl.SendRaw(`["COUNT","dm",{"kinds":[4,1059]}]`)
				if m := cl.ExpectClosed("dm", "auth-required: "); !strings.Contains(m.Message, "4, 14 and 1059 are served only") {
					t.Errorf("%s, anonymous: COUNT of the protected kinds closed %q", n.name, m.Message)
				}
			} else {
				cl = dialAs(t, n, *who.k)
			}
			for f := range want {
				got[f] = append(got[f], countMsg(t, cl, f))
			}
		}
		for f, w := range want {
			for i, m := range got[f] {
				what := []string{"a", "b"}[i] + ", " + who.name + ": COUNT " + f
				if m.Count != w.n {
					t.Errorf("%s = %d, want %d", what, m.Count, w.n)
				}
				switch {
				case w.hll == nil && m.HLL != nil:
					t.Errorf("%s: unexpected hll %x", what, m.HLL)
				case w.hll != nil && !slices.Equal(m.HLL, w.hll):
					t.Errorf("%s: hll\n got %x\nwant %x", what, m.HLL, w.hll)
				}
			}
			if a, b := got[f][0], got[f][1]; a.Count != b.Count || !slices.Equal(a.HLL, b.HLL) {
				t.Errorf("%s: COUNT %s on a (%d, hll %x) and on b (%d, hll %x) differ", who.name, f, a.Count, a.HLL, b.Count, b.HLL)
			}
		}
	}
}

// authOn authenticates c on node n as k with challenge ch and n's URL,
// and fails unless n says OK true.
func authOn(t testing.TB, n *node, c *relaytest.Client, k relaytest.Key, ch string) {
	t.Helper()
	auth := k.Event(nostr.KindClientAuth, "", nostr.Tags{{"relay", n.r.URL}, {"challenge", ch}}, 0)
	c.SendRaw(`["AUTH",` + string(auth.Raw) + `]`)
	if m := c.ExpectType("OK"); m.EventID != auth.ID || !m.OK {
		t.Fatalf("AUTH as %.8s on %s refused: %q", k.PK.Hex(), n.name, m.Message)
	}
}

// refusedUnauthed checks what a relay with AuthRequired answers a client
// not authenticated, as a single relay answers it (internal/relay
// TestAuthRequired): REQ, COUNT and NEG-OPEN refused "auth-required:",
// EVENT (ev) answered OK false "auth-required:". The AUTH challenge comes
// first: at the connection's opening with onConnect, else right before
// the first refusal; it is returned. With challenged, the connection was
// sent its challenge already and no second one may come ("" returned).
func refusedUnauthed(t testing.TB, c *relaytest.Client, ev *nostr.Event, onConnect, challenged bool) string {
	t.Helper()
	ch := ""
	expectChallenge := func() {
		m := c.ExpectType("AUTH")
		if len(m.Message) < 16 {
			t.Fatalf("challenge %q is too short", m.Message)
		}
		ch = m.Message
	}
	if onConnect && !challenged {
		expectChallenge()
	}
	c.SendRaw(`["REQ","s",{"kinds":[1]}]`)
	if !onConnect && !challenged {
		expectChallenge()
	}
	if m := c.ExpectClosed("s", "auth-required: "); !strings.Contains(m.Message, "authenticated clients only") {
		t.Fatalf("REQ closed %q", m.Message)
	}
	c.SendRaw(`["COUNT","n",{}]`)
	c.ExpectClosed("n", "auth-required: ")
	c.SendRaw(`["NEG-OPEN","g",{"kinds":[1]},"6100000200"]`)
	if m := c.ExpectType("NEG-ERR"); m.SubID != "g" || !strings.HasPrefix(m.Message, "auth-required: ") {
		t.Fatalf("NEG-OPEN: NEG-ERR %q %q, want auth-required", m.SubID, m.Message)
	}
	if m := c.Publish(ev); m.OK || !strings.HasPrefix(m.Message, "auth-required: ") {
		t.Fatalf("EVENT without AUTH: OK %v %q, want refused auth-required", m.OK, m.Message)
	}
	return ch
}

// TestAuthRequiredAcrossNodes: both nodes run with auth_required, the
// challenge sent lazily or at the connection's opening (auth_on_connect).
// A client on node b not authenticated is refused everything, as by a
// single relay; once authenticated on b (b's challenge, b's URL), it
// reads what was accepted on node a, stored and live, and counts and
// reconciles it; its own event reaches an authenticated subscriber on a.
// An authentication on a does not carry to a connection on b: each
// connection has its own challenge, the AUTH event signed for a's
// connection is refused on b, and the same person's connection on b stays
// refused until it authenticates there. Events refused for want of
// authentication are stored by neither node and delivered by neither.
func TestAuthRequiredAcrossNodes(t *testing.T) {
	t.Parallel()
	url := sharedNATS(t)
	for _, onConnect := range []bool{false, true} {
		t.Run("auth_on_connect="+strconv.FormatBool(onConnect), func(t *testing.T) {
			a, b := sqlPairConfig(t, url, relay.Config{AuthRequired: true, AuthOnConnect: onConnect})
			alice, bob, carol := relaytest.NewKey("authreq alice"), relaytest.NewKey("authreq bob"), relaytest.NewKey("authreq carol")
			fenceKey := relaytest.NewKey("authreq fence")
			byAlice := `{"authors":["` + alice.PK.Hex() + `"]}`

			// alice on a: refused, then authenticated, publishes.
			pa := relaytest.Dial(t, a.r.URL)
			refusedA := alice.Note("alice before AUTH on a")
			chA := refusedUnauthed(t, pa, refusedA, onConnect, false)
			authOn(t, a, pa, alice, chA)
			stored := alice.Note("stored before b's client came")
			pa.MustPublish(stored)

			// carol on a, authenticated, watches bob.
			ca := relaytest.Dial(t, a.r.URL)
			authOn(t, a, ca, carol, refusedUnauthed(t, ca, carol.Note("carol before AUTH"), onConnect, false))
			wa := watch(t, "a carol", ca, fenceKey, `{"authors":["`+bob.PK.Hex()+`"]}`)

			// bob on b: refused everything, whatever was accepted on a.
			cb := relaytest.Dial(t, b.r.URL)
			refusedB := bob.Note("bob before AUTH on b")
			chB := refusedUnauthed(t, cb, refusedB, onConnect, false)
			if chB == chA {
				t.Fatal("the connections on a and b got the same challenge")
			}
			// The AUTH event alice signed on a is no good on b.
			authA := alice.Event(nostr.KindClientAuth, "", nostr.Tags{{"relay", a.r.URL}, {"challenge", chA}}, 0)
			cb.SendRaw(`["AUTH",` + string(authA.Raw) + `]`)
			if m := cb.ExpectType("OK"); m.OK || !strings.HasPrefix(m.Message, "invalid: challenge") {
				t.Fatalf("b took the AUTH of a's connection: OK %v %q", m.OK, m.Message)
			}
			refusedUnauthed(t, cb, refusedB, onConnect, true) // no second challenge
			// alice, authenticated on a, opens a connection on b.
			alB := relaytest.Dial(t, b.r.URL)
			chAlB := refusedUnauthed(t, alB, refusedA, onConnect, false)
			if chAlB == chA || chAlB == chB {
				t.Fatal("a third connection got a challenge already used")
			}

			authOn(t, b, cb, bob, chB)
			posted := bob.Note("bob after AUTH on b")
			cb.MustPublish(posted)
			if n := countMsg(t, cb, byAlice).Count; n != 1 {
				t.Errorf("b, bob: COUNT of alice's events = %d, want 1", n)
			}
			have, need := negReconcile(t, cb, "g", byAlice, nil)
			checkIDSet(t, "b, bob: need of alice's events", need, []*nostr.Event{stored})
			checkIDSet(t, "b, bob: have of alice's events", have, nil)
			wb := watch(t, "b bob", cb, fenceKey, byAlice)
			live := alice.Note("live after b's client came")
			pa.MustPublish(live)
			wb.until(stored, live)
			wa.until(posted)
			fence(t, b, fenceKey, wb)
			fence(t, a, fenceKey, wa)
			wb.once(stored, live)
			wb.never(refusedA)
			wa.once(posted)
			wa.never(refusedB)

			// alice's connection on b: another connection's challenge on b
			// is no good either; its own is.
			authB := alice.Event(nostr.KindClientAuth, "", nostr.Tags{{"relay", b.r.URL}, {"challenge", chB}}, 0)
			alB.SendRaw(`["AUTH",` + string(authB.Raw) + `]`)
			if m := alB.ExpectType("OK"); m.OK || !strings.HasPrefix(m.Message, "invalid: challenge") {
				t.Fatalf("b took the challenge of another connection: OK %v %q", m.OK, m.Message)
			}
			authOn(t, b, alB, alice, chAlB)
			if got := alB.Req("q", byAlice); !sameIDs(got, []*nostr.Event{stored, live}) {
				t.Errorf("b, alice: stored REQ returned %v, want the 2 events alice published on a", idList(got))
			}

			for _, ev := range []*nostr.Event{refusedA, refusedB} {
				if has, err := b.r.Store.Has(context.Background(), ev.ID); err != nil || has {
					t.Errorf("the event refused for want of AUTH %q is stored: %v %v", ev.Content, has, err)
				}
			}
			for _, n := range []*node{a, b} {
				if v := n.r.Stats().EventsRejected["auth-required"]; v < 2 {
					t.Errorf("%s rejected %d events auth-required, want 2 at least", n.name, v)
				}
			}
		})
	}
}
