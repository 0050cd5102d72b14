package cluster

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// TestEveryNodeOnce: events accepted on any node reach the subscribers of
// every node exactly once; the accepting node fans out locally and
// ignores its own echo; ephemeral events cross without being stored.
func TestEveryNodeOnce(t *testing.T) {
	t.Parallel()
	url, subject, st := sharedNATS(t), testSubject(t), sharedStore(t)
	a := startNode(t, url, "a", subject, st, nil)
	b := startNode(t, url, "b", subject, st, nil)
	c := startNode(t, url, "c", subject, st, nil)
	waitConnected(t, a, b, c)
	alice := relaytest.NewKey("cluster-alice")
	subs := []*subscriber{subscribe(t, a, alice), subscribe(t, b, alice), subscribe(t, c, alice)}

	fromA, fromB := notes(alice, "from a", 20), notes(alice, "from b", 10)
	pa, pb := relaytest.Dial(t, a.r.URL), relaytest.Dial(t, b.r.URL)
	for _, ev := range fromA {
		pa.MustPublish(ev)
	}
	for _, ev := range fromB {
		pb.MustPublish(ev)
	}
	eph := alice.Event(20001, "ephemeral from c", nil, 0)
	relaytest.Dial(t, c.r.URL).MustPublish(eph)

	all := append(append(append([]*nostr.Event(nil), fromA...), fromB...), eph)
	// A last event from each origin: on the bus it follows the others,
	// so once it is in, every copy of them has been handled.
	lastA, lastB := alice.Note("last from a"), alice.Note("last from b")
	pa.MustPublish(lastA)
	pb.MustPublish(lastB)
	all = append(all, lastA, lastB)
	for i, s := range subs {
		s.until(all...)
		s.fence([]*node{a, b, c}[i], alice)
		s.exactlyOnce(all...)
	}

	for _, n := range []*node{a, b, c} {
		s := n.b.Stats()
		if s.EchoesIgnored == 0 {
			t.Errorf("%s ignored no echo", n.name)
		}
		if s.GapsDetected != 0 || s.CaughtUp != 0 || s.DuplicatesSkipped != 0 {
			t.Errorf("%s: %d gaps, %d caught up, %d duplicates skipped, want none without a loss", n.name, s.GapsDetected, s.CaughtUp, s.DuplicatesSkipped)
		}
	}
	if s := a.b.Stats(); s.Published != 21 || s.PublishDrops != 0 {
		t.Errorf("a published %d (dropped %d), want 21", s.Published, s.PublishDrops)
	}
	// c heard a's 21 events and b's 11.
	if s := c.b.Stats(); s.Received != 32 {
		t.Errorf("c received %d events, want 32", s.Received)
	}
	// b heard a's 21 and c's ephemeral one.
	if s := b.b.Stats(); s.Received != 22 {
		t.Errorf("b received %d events, want 22", s.Received)
	}
	if has, err := st.Has(context.Background(), eph.ID); err != nil || has {
		t.Errorf("ephemeral event stored: %v %v", has, err)
	}
	if has, err := st.Has(context.Background(), fromB[0].ID); err != nil || !has {
		t.Errorf("stored event missing: %v %v", has, err)
	}
}

// TestDeletionOnEveryNode: a deletion or a request to vanish accepted on
// one node removes the events on every node: stored queries no longer
// return them, and a copy that reaches a node after the deletion (the bus
// orders messages per origin only) is not fanned out.
func TestDeletionOnEveryNode(t *testing.T) {
	t.Parallel()
	url, subject, st := sharedNATS(t), testSubject(t), sharedStore(t)
	a := startNode(t, url, "a", subject, st, nil)
	b := startNode(t, url, "b", subject, st, nil)
	waitConnected(t, a, b)
	alice, bob := relaytest.NewKey("cluster-del-alice"), relaytest.NewKey("cluster-del-bob")
	sub := subscribe(t, b, alice)
	pa := relaytest.Dial(t, a.r.URL)

	x := alice.Note("to be deleted")
	pa.MustPublish(x)
	sub.until(x)
	del := alice.Event(nostr.KindDeletion, "", nostr.Tags{{"e", x.ID.Hex()}}, 0)
	relaytest.Dial(t, b.r.URL).MustPublish(del)
	sub.until(del)
	for _, n := range []*node{a, b} {
		c := relaytest.Dial(t, n.r.URL)
		for _, ev := range c.Req("q", `{"ids":["`+x.ID.Hex()+`"]}`) {
			t.Errorf("%s still serves deleted %s", n.name, ev.ID.Hex())
		}
	}

	// Out of order on the bus: another node's deletion of y arrives
	// before y itself (as when y's node is slow to publish).
	y := alice.Note("deleted before it arrives")
	delY := alice.Event(nostr.KindDeletion, "", nostr.Tags{{"e", y.ID.Hex()}}, 0)
	vanishAt := time.Now().Unix()
	old := alice.Event(nostr.KindTextNote, "older than the vanish", nil, vanishAt-10)
	wrap := bob.Event(nostr.KindGiftWrap, "wrap", nostr.Tags{{"p", alice.PK.Hex()}}, vanishAt-10)
	vanish := alice.Event(nostr.KindRequestToVanish, "", nostr.Tags{{"relay", "ALL_RELAYS"}}, vanishAt)
	newer := alice.Event(nostr.KindTextNote, "newer than the vanish", nil, vanishAt+1)
	for _, ev := range []*nostr.Event{y, delY, old, wrap, vanish, newer} {
		if _, err := st.Save(context.Background(), []*nostr.Event{ev}); err != nil {
			t.Fatal(err)
		}
	}
	inject := foreignOrigin(t, url, subject, "elsewhere")
	inject(delY, 1)
	inject(y, 2)
	inject(vanish, 3)
	inject(old, 4)
	inject(wrap, 5)
	// Expired on its way (NIP-40): not sent either.
	inject(alice.Event(nostr.KindTextNote, "expired", nostr.Tags{{"expiration", strconv.FormatInt(vanishAt-1, 10)}}, vanishAt+1), 6)
	inject(newer, 7)
	sub.until(delY, vanish, newer)
	sub.fence(b, alice)
	sub.exactlyOnce(x, del, delY, vanish, newer)
	if s := b.b.Stats(); s.DeletedSkipped != 3 || s.ExpiredSkipped != 1 {
		t.Errorf("b skipped %d deleted and %d expired events, want 3 (y, the older note, the gift wrap) and 1", s.DeletedSkipped, s.ExpiredSkipped)
	}
}

// foreignOrigin returns a function that publishes events on the bus as a
// node of another process would, with the sequence numbers given.
func foreignOrigin(t testing.TB, url, subject, name string) func(ev *nostr.Event, seq uint64) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	origin := originHeader(name, 42, time.Now().Add(-time.Hour).UnixNano())
	return func(ev *nostr.Event, seq uint64) {
		t.Helper()
		msg := appendEnvelope(nil, envEvent, origin, seq, time.Now().UnixNano(), 0, ev.Raw)
		if err := nc.Publish(subject, msg); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
}
