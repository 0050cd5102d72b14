package relay_test

// Optimistic verification (relay.verify_mode = "optimistic"): an event is
// answered OK:true once held unverified, and only verified events are
// ever served. The gate verifier below lets a test hold the signature
// checks back, so that it can look at the relay while events are held.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/pgtest"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/pebble"
)

// gateVerifier is the default verifier behind a gate: while the gate is
// shut, every signature check waits.
type gateVerifier struct {
	mu     sync.RWMutex
	v      nostr.Verifier
	calls  atomic.Int64
	isShut bool // shut and open are called by the test goroutine only
}

func newGate() *gateVerifier { return &gateVerifier{v: nostr.DefaultVerifier()} }

func (g *gateVerifier) Verify(pub *nostr.PubKey, msg *[32]byte, sig *nostr.Sig) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	g.calls.Add(1)
	return g.v.Verify(pub, msg, sig)
}

func (g *gateVerifier) Name() string { return "gate+" + g.v.Name() }
func (g *gateVerifier) shut()        { g.mu.Lock(); g.isShut = true }
func (g *gateVerifier) open()        { g.isShut = false; g.mu.Unlock() }

// openAtEnd opens the gate when the test ends, if a failure left it
// shut, before the relay stops (its shutdown waits for the checks).
// Call it after relaytest.Start: cleanups run last-registered first.
func (g *gateVerifier) openAtEnd(t *testing.T) {
	t.Cleanup(func() {
		if g.isShut {
			g.open()
		}
	})
}

// forge returns a copy of ev with a broken signature (same id).
func forge(ev *nostr.Event) *nostr.Event {
	c := *ev
	c.Sig[0] ^= 1
	c.Raw = nostr.Serialize(&c)
	return &c
}

// reqOnce runs a REQ on a connection of its own (so that its live phase
// cannot mix with what the test reads next) and returns the stored events.
func reqOnce(t *testing.T, r *relaytest.Relay, filter string) []*nostr.Event {
	t.Helper()
	c := relaytest.Dial(t, r.URL)
	defer c.Close()
	return c.Req("once", filter)
}

func startOptimistic(t *testing.T, cfg relay.Config, g *gateVerifier) *relaytest.Relay {
	cfg.VerifyMode = relay.VerifyOptimistic
	r := relaytest.Start(t, relaytest.Options{Relay: cfg, Verifier: g})
	g.openAtEnd(t)
	return r
}

// TestOptimisticServesOnlyVerified holds the checks back and looks at
// every read path while a valid event and a forged one are held: OK:true
// for both at once, nothing served; then, checked: the valid one is
// delivered live (once) and stored, the forged one never, its sender gets
// a NOTICE, and its pubkey's later events are verified before their OK.
func TestOptimisticServesOnlyVerified(t *testing.T) {
	testServesOnlyVerified(t, nil)
}

// TestOptimisticServesOnlyVerifiedPostgres is the same over the
// PostgreSQL store (the real server; its held events are rows of
// unverified_events, its hand-off a transaction snapshot).
func TestOptimisticServesOnlyVerifiedPostgres(t *testing.T) {
	testServesOnlyVerified(t, pgtest.Open(t))
}

func testServesOnlyVerified(t *testing.T, backend store.Store) {
	g := newGate()
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{VerifyMode: relay.VerifyOptimistic}, Verifier: g, Store: backend})
	g.openAtEnd(t)
	alice := relaytest.NewKey("optimistic alice")
	sub := relaytest.Dial(t, r.URL)
	sub.Req("live", authorFilter(alice, ""))
	pub := relaytest.Dial(t, r.URL)
	q := relaytest.Dial(t, r.URL)

	good := alice.Note("good")
	bad := forge(alice.Note("forged"))
	g.shut()
	if m := pub.Publish(good); !m.OK || m.Message != "" {
		t.Fatalf("valid event while checks are held back: %s", describe(m))
	}
	if m := pub.Publish(bad); !m.OK {
		t.Fatalf("forged event while checks are held back: %s (optimistic mode answers before the check)", describe(m))
	}
	if st := r.Stats(); st.EventsHeld != 2 || st.HeldPending != 2 {
		t.Fatalf("held %d, pending %d; want 2 and 2", st.EventsHeld, st.HeldPending)
	}
	// A REQ racing the check: nothing served, by id, author or COUNT.
	both := `{"ids":` + idsJSON([]*nostr.Event{good, bad}) + `}`
	if got := reqOnce(t, r, both); len(got) != 0 {
		t.Fatalf("REQ returned %d held events", len(got))
	}
	if got := reqOnce(t, r, authorFilter(alice, "")); len(got) != 0 {
		t.Fatalf("REQ by author returned %d held events", len(got))
	}
	if n := count(t, q, "c1", both).Count; n != 0 {
		t.Fatalf("COUNT of held events = %d", n)
	}
	if res := negRun(t, q, "neg1", authorFilter(alice, ""), nil, 0); len(res.need) != 0 {
		t.Fatalf("NEG offers %d held events", len(res.need))
	}
	expectQuiet(t, sub)
	g.open()

	m := sub.ExpectType("EVENT")
	if m.Event.ID != good.ID {
		t.Fatalf("live delivery of %s, want the valid event", describe(m))
	}
	n := pub.ExpectNotice("bad signature")
	if !strings.Contains(n.Message, bad.ID.Hex()) || !strings.HasPrefix(n.Message, "invalid:") {
		t.Fatalf("NOTICE %q does not name the forged event with invalid:", n.Message)
	}
	waitFor(t, "held events checked", func() bool { return r.Stats().HeldPending == 0 })
	st := r.Stats()
	if st.EventsHeldInvalid != 1 || st.QuarantinedPubKeys != 1 || st.EventsAccepted != 1 {
		t.Fatalf("held invalid %d, quarantined %d, accepted %d; want 1, 1, 1", st.EventsHeldInvalid, st.QuarantinedPubKeys, st.EventsAccepted)
	}
	expectQuiet(t, sub)
	got := reqOnce(t, r, both)
	if len(got) != 1 || got[0].ID != good.ID || got[0].Sig != good.Sig {
		t.Fatalf("after the checks REQ returned %d events, want the valid one", len(got))
	}
	if n := count(t, q, "c2", both).Count; n != 1 {
		t.Fatalf("COUNT after the checks = %d, want 1", n)
	}
	negCheck(t, "NEG after the checks", negRun(t, q, "neg2", authorFilter(alice, ""), nil, 0).need, []*nostr.Event{good})

	// Quarantined: alice's later events are verified before their OK. With
	// the checks held back, no OK can come.
	g.shut()
	later := alice.Note("after the quarantine")
	pub.SendRaw(`["EVENT",` + string(later.Raw) + `]`)
	for _, m := range barrier(t, pub) {
		t.Fatalf("answered before its check: %s", describe(m))
	}
	g.open()
	if m := pub.ExpectType("OK"); !m.OK || m.EventID != later.ID {
		t.Fatalf("quarantined pubkey's valid event: %s", describe(m))
	}
	if m := sub.ExpectType("EVENT"); m.Event.ID != later.ID {
		t.Fatalf("live: %s", describe(m))
	}
	if m := pub.Publish(forge(alice.Note("forged again"))); m.OK || m.Message != "invalid: bad signature" {
		t.Fatalf("quarantined pubkey's forged event: %s, want OK false invalid: bad signature", describe(m))
	}
	if st := r.Stats(); st.EventsHeld != 2 {
		t.Fatalf("events held %d: the quarantined pubkey's events were held", st.EventsHeld)
	}
	// Another pubkey is still answered before its check.
	g.shut()
	bob := relaytest.NewKey("optimistic bob")
	if m := pub.Publish(bob.Note("bob")); !m.OK {
		t.Fatalf("bob: %s", describe(m))
	}
	g.open()
	expectQuiet(t, sub)
}

// TestOptimisticForgedCopyFirst: a forged copy of an event (same id,
// broken signature) that arrives before the genuine one neither keeps it
// out nor takes it down: both are held, the forgery is rejected, the
// genuine event is stored and delivered once, with its own signature.
func TestOptimisticForgedCopyFirst(t *testing.T) {
	g := newGate()
	r := startOptimistic(t, relay.Config{}, g)
	carol := relaytest.NewKey("optimistic carol")
	sub := relaytest.Dial(t, r.URL)
	sub.Req("live", authorFilter(carol, ""))
	attacker := relaytest.Dial(t, r.URL)
	author := relaytest.Dial(t, r.URL)
	genuine := carol.Note("mine")
	g.shut()
	if m := attacker.Publish(forge(genuine)); !m.OK {
		t.Fatalf("forged copy: %s", describe(m))
	}
	if m := author.Publish(genuine); !m.OK || m.Message != "" {
		t.Fatalf("genuine event after a forged copy: %s", describe(m))
	}
	g.open()
	attacker.ExpectNotice("bad signature")
	m := sub.ExpectType("EVENT")
	if m.Event.ID != genuine.ID || m.Event.Sig != genuine.Sig {
		t.Fatalf("live: %s, want the genuine event", describe(m))
	}
	waitFor(t, "held events checked", func() bool { return r.Stats().HeldPending == 0 })
	expectQuiet(t, sub)
	expectQuiet(t, author)
	got := relaytest.Dial(t, r.URL).Req("q", `{"ids":["`+genuine.ID.Hex()+`"]}`)
	if len(got) != 1 || got[0].Sig != genuine.Sig {
		t.Fatalf("stored: %d events, want the genuine one", len(got))
	}
}

// TestOptimisticNoReplaceBeforeVerified: a held replaceable event, and a
// held deletion, change nothing until they are verified; forged ones
// never do.
func TestOptimisticNoReplaceBeforeVerified(t *testing.T) {
	g := newGate()
	r := startOptimistic(t, relay.Config{}, g)
	dave := relaytest.NewKey("optimistic dave")
	c := relaytest.Dial(t, r.URL)
	now := time.Now().Unix()
	prof := dave.Event(0, `{"name":"dave"}`, nil, now-100)
	note := dave.Event(1, "keep me", nil, now-100)
	c.MustPublish(prof)
	c.MustPublish(note)
	waitFor(t, "stored", func() bool { return r.Stats().HeldPending == 0 })
	profile := authorFilter(dave, `"kinds":[0]`)

	// Forged newer profile and forged deletion: held, then rejected.
	g.shut()
	fakeProf := forge(dave.Event(0, `{"name":"mallory"}`, nil, now))
	fakeDel := forge(dave.Event(5, "", nostr.Tags{{"e", note.ID.Hex()}}, now))
	c.MustPublish(fakeProf)
	c.MustPublish(fakeDel)
	if got := reqOnce(t, r, profile); len(got) != 1 || got[0].ID != prof.ID {
		t.Fatalf("profile while a forged newer one is held: %d events", len(got))
	}
	g.open()
	c.ExpectNotice("bad signature")
	c.ExpectNotice("bad signature")
	waitFor(t, "checked", func() bool { return r.Stats().HeldPending == 0 })
	if got := reqOnce(t, r, profile); len(got) != 1 || got[0].ID != prof.ID {
		t.Fatalf("profile after a forged newer one: %d events", len(got))
	}
	if got := reqOnce(t, r, `{"ids":["`+note.ID.Hex()+`"]}`); len(got) != 1 {
		t.Fatal("a forged deletion took the note down")
	}

	// A genuine newer profile and deletion from another pubkey's point of
	// view: erin is not quarantined.
	erin := relaytest.NewKey("optimistic erin")
	eprof := erin.Event(0, `{"name":"erin"}`, nil, now-100)
	enote := erin.Event(1, "delete me", nil, now-100)
	c.MustPublish(eprof)
	c.MustPublish(enote)
	waitFor(t, "stored", func() bool { return r.Stats().HeldPending == 0 })
	g.shut()
	eprof2 := erin.Event(0, `{"name":"erin 2"}`, nil, now)
	edel := erin.Event(5, "", nostr.Tags{{"e", enote.ID.Hex()}}, now)
	c.MustPublish(eprof2)
	c.MustPublish(edel)
	eprofile := authorFilter(erin, `"kinds":[0]`)
	if got := reqOnce(t, r, eprofile); len(got) != 1 || got[0].ID != eprof.ID {
		t.Fatalf("held newer profile replaced the stored one before its check")
	}
	if got := reqOnce(t, r, `{"ids":["`+enote.ID.Hex()+`"]}`); len(got) != 1 {
		t.Fatal("held deletion applied before its check")
	}
	g.open()
	waitFor(t, "checked", func() bool { return r.Stats().HeldPending == 0 })
	if got := reqOnce(t, r, eprofile); len(got) != 1 || got[0].ID != eprof2.ID {
		t.Fatalf("verified newer profile did not replace the older one")
	}
	if got := reqOnce(t, r, `{"ids":["`+enote.ID.Hex()+`"]}`); len(got) != 0 {
		t.Fatal("verified deletion not applied")
	}
}

// TestOptimisticPendingLimit: verify_pending events may be held at once
// (at the limit: answered before their check); the next is verified
// before its OK (just past it), counted in limits_tripped.verify_pending,
// and nothing else is disturbed.
func TestOptimisticPendingLimit(t *testing.T) {
	const limit = 3
	g := newGate()
	r := startOptimistic(t, relay.Config{VerifyPending: limit}, g)
	c := relaytest.Dial(t, r.URL)
	sub := relaytest.Dial(t, r.URL)
	sub.Req("live", `{"kinds":[1]}`)
	var evs []*nostr.Event
	for i := 0; i <= limit; i++ {
		evs = append(evs, relaytest.NewKey(fmt.Sprintf("pending %d", i)).Note("n"))
	}
	g.shut()
	for _, ev := range evs[:limit] {
		if m := c.Publish(ev); !m.OK {
			t.Fatalf("at the limit: %s", describe(m))
		}
	}
	if st := r.Stats(); st.HeldPending != limit || st.LimitTrips["verify_pending"] != 0 {
		t.Fatalf("pending %d, trips %d; want %d, 0", st.HeldPending, st.LimitTrips["verify_pending"], limit)
	}
	c.SendRaw(`["EVENT",` + string(evs[limit].Raw) + `]`)
	for _, m := range barrier(t, c) {
		t.Fatalf("past the limit, answered before its check: %s", describe(m))
	}
	// A verifier takes the event after the barrier's answer, maybe.
	waitFor(t, "the verify_pending trip", func() bool { return r.Stats().LimitTrips["verify_pending"] == 1 })
	if st := r.Stats(); st.EventsHeld != limit {
		t.Fatalf("held %d; want %d", st.EventsHeld, limit)
	}
	g.open()
	if m := c.ExpectType("OK"); !m.OK || m.EventID != evs[limit].ID {
		t.Fatalf("past the limit: %s", describe(m))
	}
	seen := map[nostr.ID]int{}
	for range evs {
		seen[sub.ExpectType("EVENT").Event.ID]++
	}
	for _, ev := range evs {
		if seen[ev.ID] != 1 {
			t.Fatalf("event delivered %d times", seen[ev.ID])
		}
	}
	waitFor(t, "checked", func() bool { return r.Stats().HeldPending == 0 })
	expectQuiet(t, sub)
	// Slots come back: the next events are held again.
	g.shut()
	for i := 0; i < limit; i++ {
		if m := c.Publish(relaytest.NewKey(fmt.Sprintf("again %d", i)).Note("n")); !m.OK {
			t.Fatalf("after the slots came back: %s", describe(m))
		}
	}
	g.open()
}

// TestOptimisticRace publishes valid and forged events from many
// connections at once while others query, count and subscribe, with the
// checks running freely: no forged event is ever delivered, returned or
// counted, and every valid one is delivered live exactly once and stored.
func TestOptimisticRace(t *testing.T) { testRace(t, nil) }

// TestOptimisticRacePostgres is the same over the PostgreSQL store.
func TestOptimisticRacePostgres(t *testing.T) { testRace(t, pgtest.Open(t)) }

func testRace(t *testing.T, backend store.Store) {
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{VerifyMode: relay.VerifyOptimistic}, Store: backend})
	const pubs, per = 4, 60
	var valid, forged []*nostr.Event
	plan := make([][]*nostr.Event, pubs)
	for p := 0; p < pubs; p++ {
		k := relaytest.NewKey(fmt.Sprintf("race %d", p))
		for i := 0; i < per; i++ {
			ev := k.Note(fmt.Sprintf("race %d %d", p, i), nostr.Tag{"t", "race"})
			if i%4 == 3 {
				// A forgery under a fresh pubkey (each one quarantines
				// its pubkey), and a forged copy of a valid event sent
				// before it.
				f := forge(relaytest.NewKey(fmt.Sprintf("forger %d %d", p, i)).Note("forged", nostr.Tag{"t", "race"}))
				forged = append(forged, f)
				plan[p] = append(plan[p], f, forge(ev))
			}
			valid = append(valid, ev)
			plan[p] = append(plan[p], ev)
		}
	}
	isForged := map[string]bool{}
	for _, f := range forged {
		isForged[f.ID.Hex()] = true
	}
	validSig := map[nostr.ID]nostr.Sig{}
	for _, ev := range valid {
		validSig[ev.ID] = ev.Sig
	}
	check := func(where string, ev *nostr.Event) {
		if isForged[ev.ID.Hex()] {
			t.Errorf("%s: forged event %.12s served", where, ev.ID.Hex())
		} else if validSig[ev.ID] != ev.Sig {
			t.Errorf("%s: event %.12s served with a forged signature", where, ev.ID.Hex())
		}
	}
	sub := relaytest.Dial(t, r.URL)
	sub.Req("live", `{"#t":["race"]}`)

	var stop atomic.Bool
	var wg sync.WaitGroup
	// Readers racing the checks. Their subscriptions stay live after
	// EOSE, so every EVENT they read, for whichever subscription, is
	// checked.
	forgedIDs := `{"ids":` + idsJSON(forged) + `}`
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := relaytest.Dial(t, r.URL)
			// until reads until the message that ends the request subID.
			until := func(typ, subID string) *nostr.RelayMessage {
				for {
					m := c.Read()
					switch {
					case m.Type == "EVENT":
						check("REQ "+m.SubID, m.Event)
						if strings.HasPrefix(m.SubID, "f") {
							t.Errorf("REQ by forged ids got %.12s", m.Event.ID.Hex())
						}
					case m.Type == typ && m.SubID == subID:
						return m
					case m.Type == "CLOSED" || m.Type == "NOTICE":
						t.Errorf("reader: %s", describe(m))
						return m
					}
				}
			}
			for n := 0; !stop.Load(); n++ {
				c.SendRaw(fmt.Sprintf(`["REQ","r%d",{"#t":["race"]}]`, n))
				until("EOSE", fmt.Sprintf("r%d", n))
				c.SendRaw(fmt.Sprintf(`["REQ","f%d",%s]`, n, forgedIDs))
				until("EOSE", fmt.Sprintf("f%d", n))
				c.SendRaw(fmt.Sprintf(`["COUNT","c%d",%s]`, n, forgedIDs))
				if m := until("COUNT", fmt.Sprintf("c%d", n)); m.Count != 0 {
					t.Errorf("COUNT of forged ids = %d", m.Count)
				}
				c.SendRaw(fmt.Sprintf(`["CLOSE","r%d"]`, n))
				c.SendRaw(fmt.Sprintf(`["CLOSE","f%d"]`, n))
			}
		}()
	}
	var pw sync.WaitGroup
	for p := 0; p < pubs; p++ {
		pw.Add(1)
		go func() {
			defer pw.Done()
			c := relaytest.Dial(t, r.URL)
			for _, ev := range plan[p] {
				c.SendRaw(`["EVENT",` + string(ev.Raw) + `]`)
			}
			oks := 0
			for oks < len(plan[p]) {
				if m := c.Read(); m.Type == "OK" {
					oks++
				}
			}
		}()
	}
	pw.Wait()
	live := map[nostr.ID]int{}
	for len(live) < len(valid) {
		m := sub.ExpectType("EVENT")
		check("live", m.Event)
		live[m.Event.ID]++
	}
	waitFor(t, "checked", func() bool { return r.Stats().HeldPending == 0 })
	stop.Store(true)
	wg.Wait()
	for _, m := range barrier(t, sub) {
		t.Errorf("after every valid event: %s", describe(m))
	}
	for id, n := range live {
		if n != 1 {
			t.Errorf("%.12s delivered %d times", id.Hex(), n)
		}
	}
	got := relaytest.Dial(t, r.URL).Req("all", `{"#t":["race"]}`)
	for _, ev := range got {
		check("final REQ", ev)
	}
	if len(got) != len(valid) {
		t.Fatalf("stored %d, want %d valid events", len(got), len(valid))
	}
	st := r.Stats()
	t.Logf("held %d, held invalid %d, quarantined %d, verify_pending trips %d", st.EventsHeld, st.EventsHeldInvalid, st.QuarantinedPubKeys, st.LimitTrips["verify_pending"])
	if st.EventsHeld == 0 {
		t.Fatal("no event was held: the test did not exercise optimistic mode")
	}
}

// TestVerifyModeConfig: an unknown verify_mode is refused at start, and
// by Config.Check (petrel serve --check) with a bad url beside it.
func TestVerifyModeConfig(t *testing.T) {
	st, err := relaytest.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := relay.New(relay.Config{VerifyMode: "later"}, relay.Options{Store: st}); err == nil || !strings.Contains(err.Error(), "verify_mode") {
		t.Fatalf("verify_mode later: %v", err)
	}
	for _, c := range []relay.Config{{}, {VerifyMode: relay.VerifySync}, {VerifyMode: relay.VerifyOptimistic, URL: "wss://relay.example.com"}} {
		if err := c.Check(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	err = relay.Config{VerifyMode: "later", URL: "ftp://relay.example.com"}.Check()
	if err == nil || !strings.Contains(err.Error(), `verify_mode "later"`) || !strings.Contains(err.Error(), "relay: url") {
		t.Fatalf("a bad verify_mode and url: %v, want both reported", err)
	}
}

// lateList is a pebble store whose listing of held events waits for the
// first hold of the run (or a second, if none comes): it makes the race
// between the start's listing and the first held event go the wrong way
// whenever the listing is not done before the relay takes events.
type lateList struct {
	*pebble.Store
	once   sync.Once
	held   chan struct{} // closed at the first hold's answer
	listed chan struct{} // closed when the listing is done
	n      atomic.Int64  // events listed
}

func (s *lateList) SubmitUnverified(ctx context.Context, ev *nostr.Event, done func(store.SaveResult)) error {
	return s.Store.SubmitUnverified(ctx, ev, func(res store.SaveResult) {
		done(res)
		s.once.Do(func() { close(s.held) })
	})
}

func (s *lateList) Unverified(ctx context.Context, fn func(ev *nostr.Event) error) error {
	select {
	case <-s.held:
	case <-time.After(time.Second):
	}
	defer close(s.listed)
	return s.Store.Unverified(ctx, func(ev *nostr.Event) error {
		s.n.Add(1)
		return fn(ev)
	})
}

// TestOptimisticRecoveryListsEarlierHoldsOnly: the events held by an
// earlier run are listed before the relay takes any, so an event held by
// this run is checked once, not also as a recovered one (with a second
// slot). Listed from the recovery goroutine, as it was, the listing
// came after the hold (this test: "listed 1 held by this run"; the CI
// of 2026-12-06 met the race unforced in TestOptimisticServesOnlyVerified:
// held 2, pending 3).
func TestOptimisticRecoveryListsEarlierHoldsOnly(t *testing.T) {
	st, err := relaytest.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	g := newGate()
	late := &lateList{Store: st.(*pebble.Store), held: make(chan struct{}), listed: make(chan struct{})}
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{VerifyMode: relay.VerifyOptimistic}, Verifier: g, Store: late})
	g.openAtEnd(t)
	alice := relaytest.NewKey("recovery alice")
	sub := relaytest.Dial(t, r.URL)
	sub.Req("live", authorFilter(alice, ""))
	pub := relaytest.Dial(t, r.URL)
	ev := alice.Note("held once")
	g.shut()
	if m := pub.Publish(ev); !m.OK {
		t.Fatalf("held event: %s", describe(m))
	}
	<-late.listed
	if n := late.n.Load(); n != 0 {
		t.Fatalf("the start's listing of held events listed %d held by this run", n)
	}
	if st := r.Stats(); st.EventsHeld != 1 || st.HeldPending != 1 || st.EventsHeldRecovered != 0 {
		t.Fatalf("held %d, pending %d, recovered %d; want 1, 1, 0", st.EventsHeld, st.HeldPending, st.EventsHeldRecovered)
	}
	g.open()
	if m := sub.ExpectType("EVENT"); m.Event.ID != ev.ID {
		t.Fatalf("live delivery of %s", describe(m))
	}
	waitFor(t, "checked", func() bool { return r.Stats().HeldPending == 0 })
	expectQuiet(t, sub)
}
