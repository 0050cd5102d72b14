package relay_test

// End-to-end tests of NIP-77 (negentropy) over real WebSockets: a client
// built on internal/negentropy reconciles against the relay.

import (
	"context"
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/negentropy"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// negEvents makes n events of kind with random ids (the relay does not
// verify what is stored directly) and created_at in [base, base+span).
func negEvents(rng *rand.Rand, n, kind int, base, span int64) []*nostr.Event {
	out := make([]*nostr.Event, n)
	for i := range out {
		out[i] = storetest.NewEvent(rng, storetest.Key(i%7), kind, base+rng.Int64N(span), nil, "neg "+strconv.Itoa(i))
	}
	return out
}

// negSeed stores events directly in the relay's store.
func negSeed(t testing.TB, r *relaytest.Relay, events []*nostr.Event) {
	t.Helper()
	res, err := r.Store.Save(context.Background(), events)
	if err != nil {
		t.Fatal(err)
	}
	for i, rs := range res {
		if rs.Err != nil || rs.Outcome.String() != "stored" {
			t.Fatalf("seed %d: %s %v", i, rs.Outcome, rs.Err)
		}
	}
}

// negItems returns the events as negentropy items.
func negItems(events []*nostr.Event) []negentropy.Item {
	out := make([]negentropy.Item, len(events))
	for i, ev := range events {
		out[i] = negentropy.Item{Timestamp: uint64(ev.CreatedAt), ID: ev.ID}
	}
	return out
}

// negClient starts a client session over items.
func negClient(t testing.TB, items []negentropy.Item, limit int) (*negentropy.Negentropy, []byte) {
	t.Helper()
	v, err := negentropy.NewVector(slices.Clone(items))
	if err != nil {
		t.Fatal(err)
	}
	n, err := negentropy.New(v, limit)
	if err != nil {
		t.Fatal(err)
	}
	first, err := n.Initiate()
	if err != nil {
		t.Fatal(err)
	}
	return n, first
}

func negOpen(c *relaytest.Client, subID, filter string, msg []byte) {
	c.SendRaw(`["NEG-OPEN","` + subID + `",` + filter + `,"` + hex.EncodeToString(msg) + `"]`)
}

func negMsg(c *relaytest.Client, subID string, msg []byte) {
	c.SendRaw(`["NEG-MSG","` + subID + `","` + hex.EncodeToString(msg) + `"]`)
}

// negExpect reads the next message and checks it is a NEG-MSG for subID.
func negExpect(t testing.TB, c *relaytest.Client, subID string) []byte {
	t.Helper()
	m := c.Read()
	if m.Type != "NEG-MSG" || m.SubID != subID {
		t.Fatalf("want NEG-MSG for %q, got %s %q %q", subID, m.Type, m.SubID, m.Message)
	}
	return m.NegPayload
}

// negExpectErr reads a NEG-ERR for subID whose reason starts with prefix.
func negExpectErr(t testing.TB, c *relaytest.Client, subID, prefix string) string {
	t.Helper()
	m := c.Read()
	if m.Type != "NEG-ERR" || m.SubID != subID || !strings.HasPrefix(m.Message, prefix) {
		t.Fatalf("want NEG-ERR %q %q..., got %s %q %q", subID, prefix, m.Type, m.SubID, m.Message)
	}
	return m.Message
}

// negQuiet checks that nothing was sent to c before a REQ that matches
// nothing is answered (the out-queue is FIFO).
func negQuiet(t testing.TB, c *relaytest.Client) {
	t.Helper()
	c.SendRaw(`["REQ","neg-quiet",{"kinds":[]}]`)
	m := c.Read()
	if m.Type != "EOSE" || m.SubID != "neg-quiet" {
		t.Fatalf("unexpected %s %q %q", m.Type, m.SubID, m.Message)
	}
	c.SendRaw(`["CLOSE","neg-quiet"]`)
}

// negResult is what a completed client session learnt.
type negResult struct {
	have, need map[nostr.ID]bool
	rounds     int
	maxReply   int // bytes of the largest reply (binary)
}

// negRun reconciles items against the relay's events matching filter
// until the client is done, then sends NEG-CLOSE.
func negRun(t testing.TB, c *relaytest.Client, subID, filter string, items []negentropy.Item, limit int) negResult {
	t.Helper()
	n, msg := negClient(t, items, limit)
	negOpen(c, subID, filter, msg)
	res := negResult{have: map[nostr.ID]bool{}, need: map[nostr.ID]bool{}}
	for {
		reply := negExpect(t, c, subID)
		res.rounds++
		res.maxReply = max(res.maxReply, len(reply))
		next, have, need, err := n.ReconcileClient(reply)
		if err != nil {
			t.Fatalf("round %d: %v", res.rounds, err)
		}
		for _, id := range have {
			res.have[id] = true
		}
		for _, id := range need {
			res.need[id] = true
		}
		if next == nil {
			break
		}
		if res.rounds > 500 {
			t.Fatal("no end after 500 rounds")
		}
		negMsg(c, subID, next)
	}
	c.SendRaw(`["NEG-CLOSE","` + subID + `"]`)
	return res
}

// negCheck fails unless got is exactly the ids of want.
func negCheck(t testing.TB, what string, got map[nostr.ID]bool, want []*nostr.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d ids, want %d", what, len(got), len(want))
	}
	for _, ev := range want {
		if !got[ev.ID] {
			t.Fatalf("%s: missing %s", what, ev.ID.Hex())
		}
	}
}

// TestNegReconcile: the client finds exactly what it lacks and what the
// relay lacks, with and without frame size limits forcing many rounds,
// and the relay serves only the events matching the filter.
func TestNegReconcile(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(77, 1))
	const base = 1_700_000_000
	common := negEvents(rng, 3000, 1, base, 100000)
	relayOnly := negEvents(rng, 150, 1, base, 100000)
	clientOnly := negEvents(rng, 120, 1, base, 100000)
	other := negEvents(rng, 500, 7, base, 100000)  // not in the filter
	ties := negEvents(rng, 200, 1, base+200000, 1) // one second, many ids
	f := func(relayLimit, clientLimit int) int {
		t.Helper()
		r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{NegFrameLimit: relayLimit}})
		negSeed(t, r, slices.Concat(common, relayOnly, other, ties[:150]))
		c := relaytest.Dial(t, r.URL)
		client := negItems(slices.Concat(common, clientOnly, ties[50:]))
		res := negRun(t, c, "sync", `{"kinds":[1]}`, client, clientLimit)
		negCheck(t, "need", res.need, slices.Concat(relayOnly, ties[:50]))
		negCheck(t, "have", res.have, slices.Concat(clientOnly, ties[150:]))
		if relayLimit > 0 && res.maxReply > relayLimit {
			t.Fatalf("limit %d: a reply of %d bytes", relayLimit, res.maxReply)
		}
		negQuiet(t, c) // NEG-CLOSE has no reply
		st := r.Relay.NegStats()
		if st.Opened != 1 || st.Active != 0 || st.ItemsHeld != 0 || st.ItemsLoaded != 3300 {
			t.Fatalf("stats %+v", st)
		}
		return res.rounds
	}
	unlimited := f(-1, 60000) // (an unlimited client message could pass max_message_bytes)
	f(0, 60000)               // the default limit
	if cut := f(4096, 4096); cut <= unlimited {
		t.Fatalf("frame limit 4096: %d rounds, no limit: %d; the limit did not apply", cut, unlimited)
	}
}

// TestNegEmptyAndAll: an empty client learns every id the filter matches;
// a client holding everything learns nothing.
func TestNegEmptyAndAll(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(77, 2))
	events := negEvents(rng, 700, 1, 1_700_000_000, 5000)
	r := relaytest.Start(t, relaytest.Options{})
	negSeed(t, r, events)
	c := relaytest.Dial(t, r.URL)
	res := negRun(t, c, "empty", `{}`, nil, 0)
	negCheck(t, "need", res.need, events)
	negCheck(t, "have", res.have, nil)
	res = negRun(t, c, "all", `{}`, negItems(events), 0)
	if len(res.need)+len(res.have) != 0 || res.rounds != 1 {
		t.Fatalf("in sync: %d need, %d have, %d rounds", len(res.need), len(res.have), res.rounds)
	}
}

// TestNegSessionLimit: MaxNegSessions sessions may be open on one
// connection; one more is refused; a NEG-CLOSE makes room; replacing a
// session does not count as another one.
func TestNegSessionLimit(t *testing.T) {
	t.Parallel()
	const max = 3
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{MaxNegSessions: max}})
	negSeed(t, r, negEvents(rand.New(rand.NewPCG(77, 3)), 50, 1, 1_700_000_000, 100))
	c := relaytest.Dial(t, r.URL)
	_, first := negClient(t, nil, 0)
	for i := range max {
		negOpen(c, "s"+strconv.Itoa(i), `{}`, first)
		negExpect(t, c, "s"+strconv.Itoa(i))
	}
	negOpen(c, "s0", `{}`, first) // replaces s0: still max sessions
	negExpect(t, c, "s0")
	negOpen(c, "extra", `{}`, first)
	negExpectErr(t, c, "extra", "blocked: too many negentropy sessions")
	c.SendRaw(`["NEG-CLOSE","s1"]`)
	negOpen(c, "extra", `{}`, first)
	negExpect(t, c, "extra")
	if st := r.Relay.NegStats(); st.Active != max || st.Refused != 1 || st.ItemsHeld != max*50 {
		t.Fatalf("stats %+v", st)
	}
	// Another connection has its own allowance.
	c2 := relaytest.Dial(t, r.URL)
	negOpen(c2, "s0", `{}`, first)
	negExpect(t, c2, "s0")
}

// TestNegItemLimit: a filter matching MaxNegItems events is served, one
// matching MaxNegItems+1 is refused with "blocked:".
func TestNegItemLimit(t *testing.T) {
	t.Parallel()
	const max = 40
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{MaxNegItems: max}})
	rng := rand.New(rand.NewPCG(77, 4))
	atMax := negEvents(rng, max, 1, 1_700_000_000, 100)
	over := negEvents(rng, max+1, 2, 1_700_000_000, 100)
	negSeed(t, r, slices.Concat(atMax, over))
	c := relaytest.Dial(t, r.URL)
	res := negRun(t, c, "n", `{"kinds":[1]}`, nil, 0)
	negCheck(t, "need", res.need, atMax)
	_, first := negClient(t, nil, 0)
	negOpen(c, "n1", `{"kinds":[2]}`, first)
	msg := negExpectErr(t, c, "n1", "blocked: ")
	if !strings.Contains(msg, "narrow the filter") {
		t.Fatalf("reason %q", msg)
	}
	// The refused session is gone.
	negMsg(c, "n1", first)
	negExpectErr(t, c, "n1", "closed: ")
}

// TestNegItemsTotal: the relay-wide item budget refuses sessions that
// would pass it ("blocked: relay busy"), and is given back when sessions
// close, whether by NEG-CLOSE or by the connection going away.
func TestNegItemsTotal(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{MaxNegItems: 10, NegItemsTotal: 15}})
	rng := rand.New(rand.NewPCG(77, 5))
	ten, five := negEvents(rng, 10, 1, 1_700_000_000, 100), negEvents(rng, 5, 2, 1_700_000_000, 100)
	negSeed(t, r, slices.Concat(ten, five))
	_, first := negClient(t, nil, 0)
	c1 := relaytest.Dial(t, r.URL)
	negOpen(c1, "a", `{"kinds":[1]}`, first)
	negExpect(t, c1, "a")
	c2 := relaytest.Dial(t, r.URL)
	negOpen(c2, "b", `{"kinds":[1]}`, first)
	negExpectErr(t, c2, "b", "blocked: relay busy")
	negOpen(c2, "c", `{"kinds":[2]}`, first) // 10+5 = 15: fits exactly
	negExpect(t, c2, "c")
	c2.SendRaw(`["NEG-CLOSE","c"]`)
	negOpen(c2, "b", `{"kinds":[2]}`, first)
	negExpect(t, c2, "b")
	if st := r.Relay.NegStats(); st.ItemsHeld != 15 {
		t.Fatalf("held %d, want 15", st.ItemsHeld)
	}
	c1.Close()
	deadline := time.Now().Add(relaytest.DefaultTimeout)
	for r.Relay.NegStats().ItemsHeld != 5 {
		if time.Now().After(deadline) {
			t.Fatalf("items of a closed connection not released: %+v", r.Relay.NegStats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	negOpen(c2, "d", `{"kinds":[1]}`, first)
	negExpect(t, c2, "d")
}

// TestNegReplace: a NEG-OPEN with the id of an open session replaces it:
// the session goes on over the new filter's items.
func TestNegReplace(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(77, 6))
	kind1, kind2 := negEvents(rng, 300, 1, 1_700_000_000, 1000), negEvents(rng, 400, 2, 1_700_000_000, 1000)
	r := relaytest.Start(t, relaytest.Options{})
	negSeed(t, r, slices.Concat(kind1, kind2))
	c := relaytest.Dial(t, r.URL)
	_, first := negClient(t, nil, 0)
	negOpen(c, "x", `{"kinds":[1]}`, first)
	negExpect(t, c, "x")
	res := negRun(t, c, "x", `{"kinds":[2]}`, nil, 0)
	negCheck(t, "need", res.need, kind2)
	negQuiet(t, c)
	if st := r.Relay.NegStats(); st.Active != 0 || st.Opened != 2 || st.ItemsHeld != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestNegErrors: malformed messages are refused with NEG-ERR and end the
// session; unknown ids get "closed:"; an unsupported protocol version is
// answered with the version the relay speaks.
func TestNegErrors(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	negSeed(t, r, negEvents(rand.New(rand.NewPCG(77, 7)), 100, 1, 1_700_000_000, 1000))
	c := relaytest.Dial(t, r.URL)
	_, first := negClient(t, nil, 0)

	negMsg(c, "nope", first)
	negExpectErr(t, c, "nope", "closed: ")

	negOpen(c, "v", `{}`, []byte{0x00})
	negExpectErr(t, c, "v", "invalid: ")
	negOpen(c, "v", `{}`, []byte{0x62, 0x00})
	if got := negExpect(t, c, "v"); !slices.Equal(got, []byte{negentropy.ProtocolVersion}) {
		t.Fatalf("version reply %x", got)
	}

	// A truncated initial message is refused once the items are loaded.
	negOpen(c, "t", `{}`, []byte{negentropy.ProtocolVersion, 0x05})
	negExpectErr(t, c, "t", "invalid: malformed negentropy message")
	negMsg(c, "t", first)
	negExpectErr(t, c, "t", "closed: ")

	// A malformed NEG-MSG ends a ready session.
	negOpen(c, "m", `{}`, first)
	negExpect(t, c, "m")
	negMsg(c, "m", []byte{negentropy.ProtocolVersion, 0x00, 0x00, 0x09})
	negExpectErr(t, c, "m", "invalid: malformed negentropy message")
	negMsg(c, "m", first)
	negExpectErr(t, c, "m", "closed: ")

	// NEG-CLOSE ends a session without reply.
	negOpen(c, "c", `{}`, first)
	negExpect(t, c, "c")
	c.SendRaw(`["NEG-CLOSE","c"]`)
	negQuiet(t, c)
	negMsg(c, "c", first)
	negExpectErr(t, c, "c", "closed: ")

	negOpen(c, "s", `{"search":"x"}`, first)
	negExpectErr(t, c, "s", "invalid: ")
	c.SendRaw(`["NEG-CLOSE","never-opened"]`)
	negQuiet(t, c)
	if st := r.Relay.NegStats(); st.Active != 0 || st.ItemsHeld != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestNegIdleTimeout: a session without NEG-MSG for NegIdleTimeout is
// closed with NEG-ERR "closed:" and its items are released.
func TestNegIdleTimeout(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{NegIdleTimeout: 150 * time.Millisecond}})
	negSeed(t, r, negEvents(rand.New(rand.NewPCG(77, 8)), 100, 1, 1_700_000_000, 1000))
	c := relaytest.Dial(t, r.URL)
	_, first := negClient(t, nil, 0)
	negOpen(c, "idle", `{}`, first)
	negExpect(t, c, "idle")
	negExpectErr(t, c, "idle", "closed: ")
	if st := r.Relay.NegStats(); st.TimedOut != 1 || st.Active != 0 || st.ItemsHeld != 0 {
		t.Fatalf("stats %+v", st)
	}
	negMsg(c, "idle", first)
	negExpectErr(t, c, "idle", "closed: ")
}

// TestNegAdvertised: NIP-11 lists 77.
func TestNegAdvertised(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	if !slices.Contains(r.Relay.SupportedNIPs(), 77) {
		t.Fatalf("supported_nips %v", r.Relay.SupportedNIPs())
	}
}
