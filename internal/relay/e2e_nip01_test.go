package relay_test

// NIP-01, NIP-09 and NIP-40 semantics end to end, over real WebSockets.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

func TestNIP01StoredNewestFirstThenEOSEThenLive(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	alice, bob := relaytest.NewKey("order-alice"), relaytest.NewKey("order-bob")
	pub := relaytest.Dial(t, r.URL)
	now := time.Now().Unix()
	evs := []*nostr.Event{ // published out of created_at order, with a tie
		alice.Event(1, "a", nil, now-50),
		alice.Event(1, "b", nil, now-10),
		alice.Event(1, "c", nil, now-30),
		alice.Event(1, "d", nil, now-30),
		alice.Event(1, "e", nil, now-20),
	}
	for _, ev := range evs {
		if m := pub.Publish(ev); !m.OK || m.Message != "" {
			t.Fatalf("publish: ok=%v %q", m.OK, m.Message)
		}
	}
	pub.MustPublish(bob.Note("not alice"))

	sub := relaytest.Dial(t, r.URL)
	got := sub.Req("s", authorFilter(alice, ""))
	if len(got) != len(evs) {
		t.Fatalf("stored: got %d events, want %d", len(got), len(evs))
	}
	checkNewestFirst(t, got)
	want := idSet(evs)
	for _, ev := range got {
		if !want[ev.ID] {
			t.Fatalf("unexpected event %.12s", ev.ID.Hex())
		}
	}

	// After EOSE: live, whatever the created_at.
	old := alice.Event(1, "live but old", nil, now-1000)
	pub.MustPublish(old)
	if m := sub.ExpectType("EVENT"); m.SubID != "s" || m.Event.ID != old.ID || string(m.RawEvent) != string(old.Raw) {
		t.Fatalf("live: %s", describe(m))
	}
	pub.MustPublish(bob.Note("still not alice"))
	expectQuiet(t, sub)
}

func TestNIP01CloseStopsDelivery(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	alice := relaytest.NewKey("close-alice")
	pub, sub := relaytest.Dial(t, r.URL), relaytest.Dial(t, r.URL)
	sub.Req("s", authorFilter(alice, ""))
	pub.MustPublish(alice.Note("one"))
	sub.ExpectType("EVENT")
	sub.SendRaw(`["CLOSE","s"]`)
	expectQuiet(t, sub) // CLOSE has no reply
	pub.MustPublish(alice.Note("two"))
	expectQuiet(t, sub)
	// Closing an unknown subscription is silent too.
	sub.SendRaw(`["CLOSE","never-opened"]`)
	expectQuiet(t, sub)
	waitFor(t, "subscriptions_active 0", func() bool { return r.Stats().SubscriptionsActive == 0 })
}

func TestNIP01ReReqReplacesSubscription(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	alice := relaytest.NewKey("rereq-alice")
	pub, sub := relaytest.Dial(t, r.URL), relaytest.Dial(t, r.URL)
	note := alice.Note("a note")
	react := alice.Event(7, "+", nostr.Tags{{"e", note.ID.Hex()}}, 0)
	pub.MustPublish(note)
	pub.MustPublish(react)

	if got := sub.Req("s", `{"kinds":[1]}`); len(got) != 1 || got[0].ID != note.ID {
		t.Fatalf("first REQ: %d events", len(got))
	}
	if got := sub.Req("s", `{"kinds":[7]}`); len(got) != 1 || got[0].ID != react.ID {
		t.Fatalf("second REQ: %d events", len(got))
	}
	if n := r.Stats().SubscriptionsActive; n != 1 {
		t.Fatalf("subscriptions_active = %d after re-REQ, want 1", n)
	}
	// Only the second filter is live now.
	pub.MustPublish(alice.Note("kind 1 again"))
	react2 := alice.Event(7, "-", nil, 0)
	pub.MustPublish(react2)
	msgs := barrier(t, sub)
	if len(msgs) != 1 || msgs[0].Type != "EVENT" || msgs[0].SubID != "s" || msgs[0].Event.ID != react2.ID {
		for _, m := range msgs {
			t.Log(describe(m))
		}
		t.Fatalf("after re-REQ: got %d messages, want the kind-7 event only", len(msgs))
	}
}

func TestNIP01FiltersAreORed(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	alice, bob := relaytest.NewKey("or-alice"), relaytest.NewKey("or-bob")
	pub, sub := relaytest.Dial(t, r.URL), relaytest.Dial(t, r.URL)
	aliceNote := alice.Note("alice note")         // filter 1
	bobReact := bob.Event(7, "+", nil, 0)         // filter 2
	aliceReact := alice.Event(7, "+", nil, 0)     // both filters
	bobNote := bob.Note("bob note, matches none") // neither
	for _, ev := range []*nostr.Event{aliceNote, bobReact, aliceReact, bobNote} {
		pub.MustPublish(ev)
	}
	got := sub.Req("s", authorFilter(alice, ""), `{"kinds":[7]}`)
	want := idSet([]*nostr.Event{aliceNote, bobReact, aliceReact})
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d (each once)", len(got), len(want))
	}
	for _, ev := range got {
		if !want[ev.ID] {
			t.Fatalf("unexpected %.12s", ev.ID.Hex())
		}
		delete(want, ev.ID)
	}
	checkNewestFirst(t, got)
	// Live: an event matching both filters is delivered once.
	both := alice.Event(7, "both", nil, 0)
	pub.MustPublish(both)
	pub.MustPublish(bob.Note("none again"))
	msgs := barrier(t, sub)
	if len(msgs) != 1 || msgs[0].Event == nil || msgs[0].Event.ID != both.ID {
		t.Fatalf("live: got %d messages, want the one event matching both filters once", len(msgs))
	}
}

func TestNIP01LimitHonouredAndClamped(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{}) // default max_limit 500
	alice := relaytest.NewKey("limit-alice")
	evs := notes(alice, 600, "limit") // newest first
	seed(t, r, evs)
	c := relaytest.Dial(t, r.URL)

	f := func(filter string, want int, clamped bool) {
		t.Helper()
		before := trips(r, "max_limit_clamped")
		got := c.Req("s", filter)
		if len(got) != want {
			t.Fatalf("%s: got %d events, want %d", filter, len(got), want)
		}
		for i, ev := range got { // the newest, in order
			if ev.ID != evs[i].ID {
				t.Fatalf("%s: event %d is %.12s, want %.12s", filter, i, ev.ID.Hex(), evs[i].ID.Hex())
			}
		}
		if d := trips(r, "max_limit_clamped") - before; (d == 1) != clamped || d > 1 {
			t.Fatalf("%s: max_limit_clamped rose by %d, want clamped=%v", filter, d, clamped)
		}
	}
	f(`{"limit":3}`, 3, false)
	f(`{"kinds":[1],"limit":10}`, 10, false)
	f(`{"limit":500}`, 500, false) // N: accepted as is
	f(`{"limit":501}`, 500, true)  // N+1: clamped
	f(`{"limit":100000}`, 500, true)
	f(`{}`, 500, false) // no limit: max_limit
	f(`{"limit":0}`, 0, false)

	// A limit-0 subscription still gets live events.
	pub := relaytest.Dial(t, r.URL)
	live := alice.Note("live after limit 0")
	pub.MustPublish(live)
	if m := c.ExpectType("EVENT"); m.Event.ID != live.ID {
		t.Fatalf("live: %s", describe(m))
	}
}

func TestNIP01EphemeralFannedOutNeverStored(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	alice := relaytest.NewKey("ephemeral-alice")
	pub, sub := relaytest.Dial(t, r.URL), relaytest.Dial(t, r.URL)
	sub.Req("s", `{"kinds":[20001,29999]}`)
	before := storedCount(t, r)
	for _, kind := range []int{20001, 29999} {
		ev := alice.Event(kind, "ephemeral", nil, 0)
		if m := pub.Publish(ev); !m.OK {
			t.Fatalf("kind %d: OK false %q", kind, m.Message)
		}
		if m := sub.ExpectType("EVENT"); m.Event.ID != ev.ID {
			t.Fatalf("kind %d: live %s", kind, describe(m))
		}
	}
	if got := relaytest.Dial(t, r.URL).Req("later", `{"kinds":[20001,29999]}`); len(got) != 0 {
		t.Fatalf("a later REQ returned %d ephemeral events", len(got))
	}
	if n := storedCount(t, r); n != before {
		t.Fatalf("store grew from %d to %d events", before, n)
	}
	if n := r.Stats().EventsEphemeral; n != 2 {
		t.Fatalf("events_ephemeral = %d, want 2", n)
	}
}

func TestNIP01ReplaceableAndAddressable(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	pub := relaytest.Dial(t, r.URL)
	now := time.Now().Unix()

	accept := func(ev *nostr.Event) {
		t.Helper()
		if m := pub.Publish(ev); !m.OK || m.Message != "" {
			t.Fatalf("kind %d created_at %d: OK %v %q, want accepted", ev.Kind, ev.CreatedAt, m.OK, m.Message)
		}
	}
	refuse := func(ev *nostr.Event) {
		t.Helper()
		if m := pub.Publish(ev); m.OK || !strings.HasPrefix(m.Message, "duplicate: ") {
			t.Fatalf("kind %d created_at %d: OK %v %q, want false \"duplicate: ...\"", ev.Kind, ev.CreatedAt, m.OK, m.Message)
		}
	}
	only := func(filter string, want *nostr.Event) {
		t.Helper()
		got := relaytest.Dial(t, r.URL).Req("q", filter)
		if len(got) != 1 || got[0].ID != want.ID {
			t.Fatalf("%s: got %d events, want only %.12s", filter, len(got), want.ID.Hex())
		}
	}

	for _, kind := range []int{0, 3, 10002, 19999} {
		k := relaytest.NewKey(fmt.Sprintf("replaceable-%d", kind))
		sub := relaytest.Dial(t, r.URL)
		sub.Req("live", authorFilter(k, ""))
		v1 := k.Event(kind, "v1", nil, now-100)
		v2 := k.Event(kind, "v2", nil, now-50)
		v0 := k.Event(kind, "v0", nil, now-200)
		accept(v1)
		accept(v2)
		refuse(v0) // older arrival
		refuse(v1) // the replaced version may not come back
		filter := fmt.Sprintf(`{"authors":["%s"],"kinds":[%d]}`, k.PK.Hex(), kind)
		only(filter, v2)
		// Live: accepted versions are fanned out, refused ones are not.
		msgs := barrier(t, sub)
		if len(msgs) != 2 || msgs[0].Event.ID != v1.ID || msgs[1].Event.ID != v2.ID {
			t.Fatalf("kind %d: live got %d messages, want v1 and v2", kind, len(msgs))
		}

		// Same created_at: the lowest id wins whatever the arrival order.
		a := k.Event(kind, "tie a", nil, now-10)
		b := k.Event(kind, "tie b", nil, now-10)
		lo, hi := a, b
		if a.ID.Hex() > b.ID.Hex() {
			lo, hi = b, a
		}
		accept(hi)
		accept(lo)
		refuse(hi)
		only(filter, lo)
	}

	k := relaytest.NewKey("addressable")
	art1 := k.Event(30023, "x v1", nostr.Tags{{"d", "x"}}, now-100)
	art2 := k.Event(30023, "x v2", nostr.Tags{{"d", "x"}}, now-50)
	other := k.Event(30023, "y", nostr.Tags{{"d", "y"}}, now-200)
	noD := k.Event(30023, "no d", nil, now-300)
	emptyD := k.Event(30023, "empty d, same address as no d", nostr.Tags{{"d", ""}}, now-250)
	accept(art1)
	accept(art2)
	refuse(art1)
	accept(other) // another address, older: kept
	accept(noD)
	accept(emptyD) // replaces noD (address d="")
	refuse(noD)
	only(fmt.Sprintf(`{"authors":["%s"],"#d":["x"]}`, k.PK.Hex()), art2)
	only(fmt.Sprintf(`{"authors":["%s"],"#d":["y"]}`, k.PK.Hex()), other)
	got := relaytest.Dial(t, r.URL).Req("all", authorFilter(k, `"kinds":[30023]`))
	if len(got) != 3 {
		t.Fatalf("addressable: %d events stored for the author, want 3 (x, y, \"\")", len(got))
	}
}

func TestNIP09Deletion(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	alice, mallory := relaytest.NewKey("del-alice"), relaytest.NewKey("del-mallory")
	pub := relaytest.Dial(t, r.URL)
	now := time.Now().Unix()
	e1 := alice.Event(1, "to be deleted", nil, now-100)
	e2 := alice.Event(1, "kept", nil, now-90)
	pub.MustPublish(e1)
	pub.MustPublish(e2)
	byID := func(ev *nostr.Event) int {
		t.Helper()
		return len(relaytest.Dial(t, r.URL).Req("q", `{"ids":["`+ev.ID.Hex()+`"]}`))
	}

	// Someone else's deletion request is stored but deletes nothing.
	pub.MustPublish(mallory.Event(5, "", nostr.Tags{{"e", e1.ID.Hex()}}, now-80))
	if byID(e1) != 1 {
		t.Fatal("a non-author's deletion removed the event")
	}
	// The author's removes it; the other event stays.
	del := alice.Event(5, "", nostr.Tags{{"e", e1.ID.Hex()}}, now-70)
	pub.MustPublish(del)
	if byID(e1) != 0 {
		t.Fatal("the author's deletion did not remove the event")
	}
	if byID(e2) != 1 || byID(del) != 1 {
		t.Fatal("the other event or the deletion request is missing")
	}
	// The deleted id may not come back.
	if m := pub.Publish(e1); m.OK || !strings.HasPrefix(m.Message, "blocked: ") {
		t.Fatalf("re-sent deleted event: OK %v %q, want false \"blocked: ...\"", m.OK, m.Message)
	}
	if byID(e1) != 0 {
		t.Fatal("deleted event came back")
	}

	// "a" deletion of an address: versions up to the request's created_at.
	art := alice.Event(30023, "article", nostr.Tags{{"d", "art"}}, now-60)
	pub.MustPublish(art)
	pub.MustPublish(alice.Event(5, "", nostr.Tags{{"a", "30023:" + alice.PK.Hex() + ":art"}}, now-50))
	if byID(art) != 0 {
		t.Fatal("the \"a\" deletion did not remove the article")
	}
	older := alice.Event(30023, "older article", nostr.Tags{{"d", "art"}}, now-55)
	if m := pub.Publish(older); m.OK || !strings.HasPrefix(m.Message, "blocked: ") {
		t.Fatalf("article older than the deletion: OK %v %q, want false \"blocked: ...\"", m.OK, m.Message)
	}
	newer := alice.Event(30023, "newer article", nostr.Tags{{"d", "art"}}, now-40)
	pub.MustPublish(newer)
	if byID(newer) != 1 {
		t.Fatal("an article newer than the deletion is missing")
	}
	if n := r.Stats().EventsRejected["blocked"]; n != 2 {
		t.Fatalf("events_rejected[blocked] = %d, want 2", n)
	}
}

// TestNIP40Expiration checks expiration at publish (refused) and on read.
// Reads use a model store with a controlled clock, so an event can expire
// without the test waiting for it.
func TestNIP40Expiration(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	now := time.Now().Unix()
	clock.Store(now)
	m := storetest.NewModel()
	m.Now = clock.Load
	r := relaytest.Start(t, relaytest.Options{Store: m})
	alice := relaytest.NewKey("expire-alice")
	pub, sub := relaytest.Dial(t, r.URL), relaytest.Dial(t, r.URL)
	sub.Req("live", authorFilter(alice, ""))

	expired := alice.Event(1, "expired", nostr.Tags{{"expiration", fmt.Sprint(now - 1)}}, now-10)
	if m := pub.Publish(expired); m.OK || !strings.HasPrefix(m.Message, "invalid: ") {
		t.Fatalf("expired event: OK %v %q, want false \"invalid: ...\"", m.OK, m.Message)
	}
	if n := storedCount(t, r); n != 0 {
		t.Fatalf("expired event stored (%d events)", n)
	}

	later := alice.Event(1, "expires later", nostr.Tags{{"expiration", fmt.Sprint(now + 1000)}}, now-10)
	pub.MustPublish(later)
	if m := sub.ExpectType("EVENT"); m.Event.ID != later.ID {
		t.Fatalf("live: %s", describe(m))
	}
	q := relaytest.Dial(t, r.URL)
	if got := q.Req("before", authorFilter(alice, "")); len(got) != 1 || got[0].ID != later.ID {
		t.Fatalf("before expiration: %d events", len(got))
	}
	clock.Store(now + 1000)
	if got := q.Req("after", authorFilter(alice, "")); len(got) != 0 {
		t.Fatalf("after expiration: %d events", len(got))
	}
	expectQuiet(t, sub)
}

func TestNIP01Duplicate(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	alice := relaytest.NewKey("dup-alice")
	pub, sub := relaytest.Dial(t, r.URL), relaytest.Dial(t, r.URL)
	sub.Req("s", authorFilter(alice, ""))
	ev := alice.Note("once")
	pub.MustPublish(ev)
	sub.ExpectType("EVENT")
	if m := pub.Publish(ev); !m.OK || !strings.HasPrefix(m.Message, "duplicate: ") {
		t.Fatalf("duplicate: OK %v %q, want true \"duplicate: ...\"", m.OK, m.Message)
	}
	// The same event twice in a row, before the first is committed: one
	// is stored, the other is a duplicate, and it is fanned out once.
	ev2 := alice.Note("twice, pipelined")
	pub.SendRaw(`["EVENT",` + string(ev2.Raw) + `]`)
	pub.SendRaw(`["EVENT",` + string(ev2.Raw) + `]`)
	a, b := pub.ExpectType("OK"), pub.ExpectType("OK")
	if !a.OK || !b.OK || (a.Message == "") == (b.Message == "") {
		t.Fatalf("pipelined duplicate: %q / %q, want one accepted and one \"duplicate:\"", a.Message, b.Message)
	}
	if m := sub.ExpectType("EVENT"); m.Event.ID != ev2.ID {
		t.Fatalf("live: %s", describe(m))
	}
	expectQuiet(t, sub)
	if n := storedCount(t, r); n != 2 {
		t.Fatalf("stored %d events, want 2", n)
	}
	if st := r.Stats(); st.EventsDuplicate != 2 || st.EventsAccepted != 2 {
		t.Fatalf("events_duplicate=%d events_accepted=%d, want 2 and 2", st.EventsDuplicate, st.EventsAccepted)
	}
}

// TestNIP01ReqDuringPublishing opens subscriptions while events are being
// published and checks what can be known without timing: no event is
// delivered twice to one subscription; every event whose OK arrived before
// the REQ was sent is in the stored part; every event sent after EOSE
// arrives live; in all, every event arrives (the limit exceeds their
// number).
func TestNIP01ReqDuringPublishing(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	const rounds, n, subs = 3, 300, 5
	for round := 0; round < rounds; round++ {
		key := relaytest.NewKey(fmt.Sprintf("race-%d", round))
		evs := notes(key, n, "race")
		index := make(map[nostr.ID]int, n)
		for i, ev := range evs {
			index[ev.ID] = i
		}
		pub := relaytest.Dial(t, r.URL)

		var mu sync.Mutex
		var okOrder []nostr.ID // ids in the order their OK arrived
		var sent atomic.Int64  // events sent (or about to be) so far
		triggers := make([]chan struct{}, subs)
		type result struct {
			snap             []nostr.ID // OK'd before the REQ was sent
			stored, live     []nostr.ID
			sentAtEOSE       int
			err              error
			storedCreatedAts []int64
		}
		results := make([]result, subs)
		clients := make([]*relaytest.Client, subs)
		var wg sync.WaitGroup
		for i := range clients {
			clients[i] = relaytest.Dial(t, r.URL)
			triggers[i] = make(chan struct{})
			wg.Add(1)
			go func(i int, start <-chan struct{}) {
				defer wg.Done()
				res := &results[i]
				c := clients[i]
				<-start
				mu.Lock()
				res.snap = append([]nostr.ID(nil), okOrder...)
				mu.Unlock()
				sid := fmt.Sprintf("sub%d", i)
				if err := c.WriteMessage(websocket.TextMessage, []byte(`["REQ","`+sid+`",`+authorFilter(key, "")+`]`)); err != nil {
					res.err = err
					return
				}
				eose := false
				for {
					m, err := c.ReadWithin(relaytest.DefaultTimeout)
					if err != nil {
						res.err = err
						return
					}
					switch {
					case m.Type == "EVENT" && m.SubID == sid && !eose:
						res.stored = append(res.stored, m.Event.ID)
						res.storedCreatedAts = append(res.storedCreatedAts, m.Event.CreatedAt)
					case m.Type == "EVENT" && m.SubID == sid:
						res.live = append(res.live, m.Event.ID)
					case m.Type == "EOSE" && m.SubID == sid:
						eose = true
						res.sentAtEOSE = int(sent.Load())
					case m.Type == "EOSE" && m.SubID == "end":
						if !eose {
							res.err = fmt.Errorf("barrier EOSE before the subscription's EOSE")
						}
						return
					default:
						res.err = fmt.Errorf("unexpected %s", describe(m))
						return
					}
				}
			}(i, triggers[i])
		}
		// Subscriber i sends its REQ once i*n/subs OKs have arrived.
		trigger := func(oks int) {
			for i := range triggers {
				if triggers[i] != nil && oks >= i*n/subs {
					close(triggers[i])
					triggers[i] = nil
				}
			}
		}
		trigger(0)
		outstanding, next := 0, 0
		for next < n || outstanding > 0 {
			if next < n && outstanding < 8 {
				// Count it before sending: an event counted after
				// sentAtEOSE was surely sent after EOSE arrived.
				sent.Store(int64(next + 1))
				pub.SendRaw(`["EVENT",` + string(evs[next].Raw) + `]`)
				next++
				outstanding++
				continue
			}
			m := pub.ExpectType("OK")
			if !m.OK {
				t.Fatalf("event refused: %q", m.Message)
			}
			outstanding--
			mu.Lock()
			okOrder = append(okOrder, m.EventID)
			k := len(okOrder)
			mu.Unlock()
			trigger(k)
		}
		// Every fan-out of these events is queued: end each subscriber
		// with a barrier, which is queued after whatever is pending.
		for _, c := range clients {
			c.SendRaw(`["REQ","end",{"kinds":[]}]`)
		}
		wg.Wait()

		for i, res := range results {
			if res.err != nil {
				t.Fatalf("round %d sub %d: %v", round, i, res.err)
			}
			seen := map[nostr.ID]string{}
			for _, id := range res.stored {
				if seen[id] != "" {
					t.Fatalf("round %d sub %d: event %d delivered twice (stored, %s)", round, i, index[id], seen[id])
				}
				seen[id] = "stored"
			}
			for _, id := range res.live {
				if seen[id] != "" {
					t.Fatalf("round %d sub %d: event %d delivered twice (live, %s)", round, i, index[id], seen[id])
				}
				seen[id] = "live"
			}
			for _, id := range res.snap {
				if seen[id] != "stored" {
					t.Fatalf("round %d sub %d: event %d was OK'd before the REQ but is %q, not stored", round, i, index[id], seen[id])
				}
			}
			for j := res.sentAtEOSE; j < n; j++ {
				if seen[evs[j].ID] != "live" {
					t.Fatalf("round %d sub %d: event %d was sent after EOSE but is %q, not live", round, i, j, seen[evs[j].ID])
				}
			}
			if len(seen) != n {
				t.Fatalf("round %d sub %d: %d of %d events delivered", round, i, len(seen), n)
			}
			for j := 1; j < len(res.storedCreatedAts); j++ {
				if res.storedCreatedAts[j] > res.storedCreatedAts[j-1] {
					t.Fatalf("round %d sub %d: stored part not newest first", round, i)
				}
			}
		}
	}
}

// TestNIP01NoDuplicateWhenFanoutLags: an event is committed (so a new
// subscription's stored query returns it) but its fan-out comes later (the
// writer's callback or the dispatcher lags). The subscription must get it
// once, whether the late fan-out finds it live (after EOSE) or still in
// its stored phase (after the query sent the event).
func TestNIP01NoDuplicateWhenFanoutLags(t *testing.T) {
	t.Parallel()
	for _, phase := range []string{"live", "stored"} {
		t.Run(phase, func(t *testing.T) {
			r, ls := startLagging(t, relaytest.Options{})
			inner := ls.Store
			alice := relaytest.NewKey("lag-alice")
			pub, sub := relaytest.Dial(t, r.URL), relaytest.Dial(t, r.URL)
			ev := alice.Note("committed, fan-out delayed")
			gate := make(chan struct{})
			ls.hold[ev.ID] = gate
			released := false
			release := func() {
				if !released {
					released = true
					close(gate)
				}
			}
			defer release()

			pub.SendRaw(`["EVENT",` + string(ev.Raw) + `]`)
			waitFor(t, "the event to be committed", func() bool {
				has, err := inner.Has(context.Background(), ev.ID)
				return err == nil && has
			})
			switch phase {
			case "live":
				if got := sub.Req("s", authorFilter(alice, "")); len(got) != 1 || got[0].ID != ev.ID {
					t.Fatalf("stored part: %d events", len(got))
				}
				release()
				if m := pub.ExpectType("OK"); !m.OK {
					t.Fatalf("OK false %q", m.Message)
				}
			case "stored":
				older := alice.Event(1, "older", nil, ev.CreatedAt-10)
				pub.MustPublish(older)
				qgate, emitted := make(chan struct{}), make(chan struct{})
				ls.mu.Lock()
				ls.pauseNext, ls.emitted = qgate, emitted
				ls.mu.Unlock()
				sub.SendRaw(`["REQ","s",` + authorFilter(alice, "") + `]`)
				<-emitted // the query has yielded ev (the newest) and is paused
				release() // the fan-out of ev now finds the subscription in its stored phase
				if m := pub.ExpectType("OK"); !m.OK {
					t.Fatalf("OK false %q", m.Message)
				}
				close(qgate)
				got := sub.UntilEOSE("s")
				if len(got) != 2 || got[0].ID != ev.ID || got[1].ID != older.ID {
					t.Fatalf("stored part: %d events", len(got))
				}
			}
			for _, m := range barrier(t, sub) {
				t.Fatalf("after EOSE: %s (delivered twice)", describe(m))
			}
			// Later events still arrive live, once.
			ev2 := alice.Note("after")
			pub.MustPublish(ev2)
			msgs := barrier(t, sub)
			if len(msgs) != 1 || msgs[0].Event.ID != ev2.ID {
				t.Fatalf("live after EOSE: %d messages", len(msgs))
			}
		})
	}
}
