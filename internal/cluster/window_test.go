package cluster

import (
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

func id(n byte) nostr.ID { return nostr.ID{n} }

// TestWindowLimit: DedupMax ids are held; one more pushes the oldest out,
// counted, and the window no longer covers its time.
func TestWindowLimit(t *testing.T) {
	w := newWindow(3, 1000)
	for i := byte(1); i <= 3; i++ {
		if _, fresh := w.claim(id(i), srcRemote, int64(i)); !fresh {
			t.Fatalf("id %d not fresh", i)
		}
	}
	if n, over := w.size(); n != 3 || over != 0 || !w.covers(1) {
		t.Fatalf("at the limit: %d held, %d overflows, covers(1) %v", n, over, w.covers(1))
	}
	w.claim(id(4), srcRemote, 4)
	if n, over := w.size(); n != 3 || over != 1 || w.has(id(1)) || !w.has(id(4)) {
		t.Fatalf("past the limit: %d held, %d overflows, has(1) %v", n, over, w.has(id(1)))
	}
	if w.covers(1) || !w.covers(2) {
		t.Fatalf("covers: after evicting the entry of time 1, covers(1)=%v covers(2)=%v", w.covers(1), w.covers(2))
	}
	if prev, fresh := w.claim(id(3), srcLocal, 5); fresh || prev != srcRemote {
		t.Fatalf("claim of a held id: %d %v", prev, fresh)
	}
}

// TestWindowKeepAndPin: entries older than keep go, unless a pin keeps
// them; the ring grows and shrinks.
func TestWindowKeepAndPin(t *testing.T) {
	w := newWindow(1000, 10)
	w.claim(id(1), srcRemote, 0)
	w.claim(id(2), srcRemote, 5)
	w.setPin(3)
	w.claim(id(3), srcRemote, 20) // cut at min(20-10, pin 3) = 3
	if w.has(id(1)) || !w.has(id(2)) || !w.has(id(3)) {
		t.Fatalf("pinned: has %v %v %v", w.has(id(1)), w.has(id(2)), w.has(id(3)))
	}
	w.setPin(0)
	w.expire(20)
	if w.has(id(2)) || !w.has(id(3)) {
		t.Fatalf("unpinned: has(2) %v has(3) %v", w.has(id(2)), w.has(id(3)))
	}
	for i := 0; i < 500; i++ {
		w.claim(nostr.ID{byte(i), byte(i >> 8), 9}, srcRemote, 21)
	}
	if n, _ := w.size(); n != 501 || len(w.ring) < 501 {
		t.Fatalf("grown: %d held in a ring of %d", n, len(w.ring))
	}
	w.expire(100)
	if n, _ := w.size(); n != 0 || len(w.ring) >= 512 {
		t.Fatalf("expired: %d held in a ring of %d", n, len(w.ring))
	}
}

// TestRemovals: the store's removal rules, applied to copies that arrive
// after the deletion.
func TestRemovals(t *testing.T) {
	alice, bob := relaytest.NewKey("rm-alice"), relaytest.NewKey("rm-bob")
	const now = 1_700_000_000
	x := alice.Event(1, "x", nil, now-100)
	bobs := bob.Event(1, "bob's", nil, now-100)
	prof := alice.Event(0, "{}", nil, now-50)
	art := alice.Event(30023, "article", nostr.Tags{{"d", "a1"}}, now-50)
	artNew := alice.Event(30023, "article v2", nostr.Tags{{"d", "a1"}}, now+50)
	otherD := alice.Event(30023, "other", nostr.Tags{{"d", "a2"}}, now-50)
	oldDel := alice.Event(nostr.KindDeletion, "", nostr.Tags{{"e", x.ID.Hex()}}, now-200)
	del := alice.Event(nostr.KindDeletion, "", nostr.Tags{
		{"e", x.ID.Hex()}, {"e", bobs.ID.Hex()}, {"e", oldDel.ID.Hex()},
		{"a", "30023:" + alice.PK.Hex() + ":a1"}, {"a", "0:" + alice.PK.Hex() + ":"},
	}, now)
	r := newRemovals(100, 1000)
	covered := func(ev *nostr.Event, want bool) {
		t.Helper()
		if got := r.covers(ev); got != want {
			t.Fatalf("%q (kind %d): covered %v, want %v", ev.Content, ev.Kind, got, want)
		}
	}
	covered(x, false)
	r.note(del, 1)
	covered(x, true)       // its author deleted it
	covered(bobs, false)   // another author's deletion has no effect
	covered(oldDel, false) // deletions are not deleted
	covered(prof, true)    // "a" of a replaceable address
	covered(art, true)     // "a" up to the deletion's created_at
	covered(artNew, false) // a later version stays
	covered(otherD, false) // another d

	vanish := alice.Event(nostr.KindRequestToVanish, "", nostr.Tags{{"relay", "ALL_RELAYS"}}, now)
	older := alice.Event(nostr.KindRequestToVanish, "", nostr.Tags{{"relay", "ALL_RELAYS"}}, now-1)
	wrap := bob.Event(nostr.KindGiftWrap, "wrap", nostr.Tags{{"p", alice.PK.Hex()}}, now-1)
	wrapLater := bob.Event(nostr.KindGiftWrap, "wrap later", nostr.Tags{{"p", alice.PK.Hex()}}, now+1)
	eph := alice.Event(20001, "ephemeral", nil, now-1)
	n := alice.Event(1, "before vanish", nil, now)
	r.note(vanish, 5)
	covered(n, true)
	covered(older, true)   // older requests to vanish go too
	covered(vanish, false) // not itself
	covered(wrap, true)
	covered(wrapLater, false)
	covered(bobs, false)
	covered(eph, false) // never stored, never removed

	r.expire(1003) // keep 1000: the deletion's entries (noted at 1) go
	if len(r.ids) != 0 || len(r.addrs) != 0 || len(r.vanished) != 1 {
		t.Fatalf("after expiry: %d ids, %d addresses, %d vanished", len(r.ids), len(r.addrs), len(r.vanished))
	}
	covered(n, true)
	r.expire(2000)
	covered(n, false)

	small := newRemovals(1, 1000) // bounded in count
	small.note(del, 1)            // five entries, one kept: the last ("a" of kind 0)
	covered2 := small.covers(x)
	if covered2 || !small.covers(prof) {
		t.Fatalf("bounded removals: x covered %v, profile covered %v", covered2, small.covers(prof))
	}
}
