package storetest

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

func eTag(ev *nostr.Event) nostr.Tag { return nostr.Tag{"e", ev.ID.Hex()} }

func sameIDs(got []nostr.ID, want ...nostr.ID) bool {
	a, b := slices.Clone(got), slices.Clone(want)
	cmp := func(x, y nostr.ID) int { return slices.Compare(x[:], y[:]) }
	slices.SortFunc(a, cmp)
	slices.SortFunc(b, cmp)
	return slices.Equal(a, b)
}

func testDeleteByID(t *testing.T, st store.Store) {
	h := newH(t, st)
	a := h.ev(1, 1, BaseTime)
	b := h.ev(1, 1, BaseTime+1)
	c := h.ev(2, 1, BaseTime+2)
	h.stored(a, b, c)
	// The author deletes a; a deletion by someone else of c does nothing.
	del := h.ev(1, 5, BaseTime+10, eTag(a), eTag(c))
	res := h.outcomes([]*nostr.Event{del}, store.Stored)
	if !sameIDs(res[0].Removed, a.ID) {
		t.Fatalf("Removed = %v, want [a]", res[0].Removed)
	}
	h.expect(fs(nostr.Filter{Kinds: []int{1}}), c, b)
	h.expect(fs(nostr.Filter{Kinds: []int{5}}), del)
	// a cannot come back; c is untouched and still a duplicate.
	h.outcomes([]*nostr.Event{a, c}, store.Deleted, store.Duplicate)
	// A deletion by another author does not block re-insertion either.
	d := h.ev(3, 1, BaseTime+3)
	h.stored(h.ev(2, 5, BaseTime+10, eTag(d)))
	h.stored(d)
	// Deletion arriving before its target: remembered, and the target
	// (same author) is refused when it arrives.
	later := h.ev(1, 1, BaseTime+4)
	h.stored(h.ev(1, 5, BaseTime+11, eTag(later)))
	h.outcomes([]*nostr.Event{later}, store.Deleted)
	// A deletion can delete a replaceable version, after which an older
	// version is accepted again.
	p1 := h.ev(1, 0, BaseTime)
	p2 := h.ev(1, 0, BaseTime+1)
	h.stored(p1)
	h.stored(p2)
	res = h.outcomes([]*nostr.Event{h.ev(1, 5, BaseTime+12, eTag(p2))}, store.Stored)
	if !sameIDs(res[0].Removed, p2.ID) {
		t.Fatalf("Removed = %v, want [p2]", res[0].Removed)
	}
	h.outcomes([]*nostr.Event{p2}, store.Deleted)
	h.stored(p1)
	h.expect(fs(nostr.Filter{Kinds: []int{0}}), p1)
	// Malformed e tags are ignored.
	h.stored(h.ev(1, 5, BaseTime+13, nostr.Tag{"e", "zz"}, nostr.Tag{"e"}, nostr.Tag{"e", b.ID.Hex()[:63]}))
	h.expect(fs(nostr.Filter{IDs: []nostr.ID{b.ID}}), b)
	// The deletion's created_at does not matter for "e" targets.
	res = h.outcomes([]*nostr.Event{h.ev(1, 5, 1, eTag(b))}, store.Stored)
	if !sameIDs(res[0].Removed, b.ID) {
		t.Fatalf("Removed = %v, want [b]", res[0].Removed)
	}
}

func testDeleteByAddress(t *testing.T, st store.Store) {
	h := newH(t, st)
	kind := 30023
	d := nostr.Tag{"d", "post"}
	v1 := h.ev(1, kind, BaseTime+10, d)
	other := h.ev(1, kind, BaseTime+10, nostr.Tag{"d", "other"})
	h.stored(v1, other)
	aTag := nostr.Tag{"a", ATag(kind, Key(1), "post")}
	// Someone else's "a" deletion does nothing.
	h.stored(h.ev(2, 5, BaseTime+20, aTag))
	h.expect(fs(nostr.Filter{Kinds: []int{kind}}), sortEvs(v1, other)...)
	// A deletion older than the stored version does not remove it.
	h.stored(h.ev(1, 5, BaseTime+5, aTag))
	h.expect(fs(nostr.Filter{Kinds: []int{kind}}), sortEvs(v1, other)...)
	h.outcomes([]*nostr.Event{h.ev(1, kind, BaseTime+4, d)}, store.Deleted)
	// The author's deletion at BaseTime+20 removes v1 (<= 20).
	res := h.outcomes([]*nostr.Event{h.ev(1, 5, BaseTime+20, aTag)}, store.Stored)
	if !sameIDs(res[0].Removed, v1.ID) {
		t.Fatalf("Removed = %v, want [v1]", res[0].Removed)
	}
	h.expect(fs(nostr.Filter{Kinds: []int{kind}}), other)
	// Versions at or before the deletion are refused; newer ones are fine.
	h.outcomes([]*nostr.Event{v1, h.ev(1, kind, BaseTime+20, d), h.ev(1, kind, BaseTime+15, d)}, store.Deleted, store.Deleted, store.Deleted)
	v3 := h.ev(1, kind, BaseTime+21, d)
	h.stored(v3)
	h.expect(fs(nostr.Filter{Kinds: []int{kind}}), v3, other)
	// A later deletion moves the horizon forward, an earlier one does not
	// move it back.
	h.stored(h.ev(1, 5, BaseTime+30, aTag))
	h.stored(h.ev(1, 5, BaseTime+25, aTag))
	h.outcomes([]*nostr.Event{h.ev(1, kind, BaseTime+28, d)}, store.Deleted)
	h.expect(fs(nostr.Filter{Kinds: []int{kind}}), other)
	// Replaceable kinds: the address has an empty d.
	p := h.ev(1, 10002, BaseTime+5)
	h.stored(p)
	res = h.outcomes([]*nostr.Event{h.ev(1, 5, BaseTime+6, nostr.Tag{"a", ATag(10002, Key(1), "")})}, store.Stored)
	if !sameIDs(res[0].Removed, p.ID) {
		t.Fatalf("Removed = %v, want [p]", res[0].Removed)
	}
	h.outcomes([]*nostr.Event{p}, store.Deleted)
	// An "a" deletion before any version exists is remembered.
	h.stored(h.ev(1, 5, BaseTime+40, nostr.Tag{"a", ATag(kind, Key(1), "future")}))
	h.outcomes([]*nostr.Event{h.ev(1, kind, BaseTime+39, nostr.Tag{"d", "future"})}, store.Deleted)
	h.stored(h.ev(1, kind, BaseTime+41, nostr.Tag{"d", "future"}))
	// "a" targets of regular kinds and malformed ones are ignored.
	r := h.ev(1, 1, BaseTime)
	h.stored(r)
	h.stored(h.ev(1, 5, BaseTime+50, nostr.Tag{"a", ATag(1, Key(1), "")}), h.ev(1, 5, BaseTime+50, nostr.Tag{"a", "x:y:z"}))
	h.expect(fs(nostr.Filter{Kinds: []int{1}}), r)
}

func testDeleteDeletion(t *testing.T, st store.Store) {
	h := newH(t, st)
	a := h.ev(1, 1, BaseTime)
	h.stored(a)
	del := h.ev(1, 5, BaseTime+1, eTag(a))
	h.stored(del)
	// Deleting the deletion has no effect: it stays, and a stays deleted.
	res := h.outcomes([]*nostr.Event{h.ev(1, 5, BaseTime+2, eTag(del))}, store.Stored)
	if len(res[0].Removed) != 0 {
		t.Fatalf("Removed = %v, want none", res[0].Removed)
	}
	if !h.has(del.ID) {
		t.Fatal("deletion request was deleted")
	}
	h.outcomes([]*nostr.Event{a}, store.Deleted)
	// A deletion request targeted before it arrives is still stored.
	del2 := h.ev(1, 5, BaseTime+3)
	h.stored(h.ev(1, 5, BaseTime+4, eTag(del2)))
	h.stored(del2)
	// A request to vanish cannot be deleted by a deletion request.
	van := h.ev(2, 62, BaseTime+5, nostr.Tag{"relay", "ALL_RELAYS"})
	h.stored(van)
	h.outcomes([]*nostr.Event{h.ev(2, 5, BaseTime+6, eTag(van))}, store.Stored)
	if !h.has(van.ID) {
		t.Fatal("request to vanish was deleted by a deletion request")
	}
	van2 := h.ev(3, 62, BaseTime+5)
	h.stored(h.ev(3, 5, BaseTime+6, eTag(van2)))
	h.stored(van2)
}

func testVanish(t *testing.T, st store.Store) {
	h := newH(t, st)
	var mine []*nostr.Event
	for i := 0; i < 20; i++ {
		mine = append(mine, h.ev(1, []int{1, 0, 30023, 5, 7}[i%5], BaseTime+int64(i), nostr.Tag{"d", "x"}))
	}
	theirs := h.ev(2, 1, BaseTime)
	h.stored(mine...)
	h.stored(theirs)
	stored := h.query(nostr.Filter{Authors: []nostr.PubKey{Key(1)}})
	van := h.ev(1, 62, BaseTime+10, nostr.Tag{"relay", "ALL_RELAYS"})
	res := h.outcomes([]*nostr.Event{van}, store.Stored)
	var want []nostr.ID
	var kept []*nostr.Event
	for _, r := range stored {
		if r.CreatedAt <= BaseTime+10 {
			want = append(want, r.ID)
		}
	}
	for _, ev := range mine {
		if ev.CreatedAt > BaseTime+10 && h.has(ev.ID) {
			kept = append(kept, ev)
		}
	}
	if !sameIDs(res[0].Removed, want...) {
		t.Fatalf("Removed %d ids, want %d", len(res[0].Removed), len(want))
	}
	h.expect(fs(nostr.Filter{Authors: []nostr.PubKey{Key(1)}}), sortEvs(append(kept, van)...)...)
	h.expect(fs(nostr.Filter{Authors: []nostr.PubKey{Key(2)}}), theirs)
	// Older events of the author are refused, whatever their kind; newer
	// ones are fine.
	h.outcomes([]*nostr.Event{
		h.ev(1, 1, BaseTime+10), h.ev(1, 5, BaseTime), h.ev(1, 62, BaseTime+9), h.ev(1, 0, BaseTime+1), h.ev(1, 1, BaseTime+11),
	}, store.Deleted, store.Deleted, store.Deleted, store.Deleted, store.Stored)
	// A second, later request moves the horizon; an older one is refused.
	van2 := h.ev(1, 62, BaseTime+30)
	h.stored(van2)
	h.expect(fs(nostr.Filter{Authors: []nostr.PubKey{Key(1)}}), van2)
	h.outcomes([]*nostr.Event{h.ev(1, 62, BaseTime+20)}, store.Deleted)
	// The vanished event ids cannot come back either (they are older).
	h.outcomes([]*nostr.Event{mine[0], van}, store.Deleted, store.Deleted)
}

// testVanishGiftWraps: a request to vanish also removes the gift wraps
// (kind 1059) addressed to its author up to its created_at, whoever wrote
// them, and refuses such wraps afterwards, re-broadcasts included.
func testVanishGiftWraps(t *testing.T, st store.Store) {
	h := newH(t, st)
	p := func(k int) nostr.Tag { return nostr.Tag{"p", Key(k).Hex()} }
	toMe := h.ev(2, 1059, BaseTime+5, p(1))
	toMeAndOther := h.ev(3, 1059, BaseTime+6, p(4), p(1))
	toMeLater := h.ev(2, 1059, BaseTime+20, p(1))
	toOther := h.ev(2, 1059, BaseTime+5, p(4))
	noteToMe := h.ev(2, 1, BaseTime+5, p(1)) // not a gift wrap: stays
	h.stored(toMe, toMeAndOther, toMeLater, toOther, noteToMe)
	van := h.ev(1, 62, BaseTime+10, nostr.Tag{"relay", "ALL_RELAYS"})
	// A wrap earlier in the same batch goes with the others.
	inBatch := h.ev(5, 1059, BaseTime+7, p(1))
	res := h.outcomes([]*nostr.Event{inBatch, van}, store.Stored, store.Stored)
	if !sameIDs(res[1].Removed, toMe.ID, toMeAndOther.ID, inBatch.ID) {
		t.Fatalf("Removed %d ids, want the 3 wraps addressed to the author", len(res[1].Removed))
	}
	wraps := fs(nostr.Filter{Kinds: []int{1059}})
	h.expect(wraps, toMeLater, toOther)
	h.expect(fs(nostr.Filter{Kinds: []int{1}}), noteToMe)
	// Re-broadcasts and new wraps at or before the request are refused;
	// later ones, and wraps to others, are stored.
	h.outcomes([]*nostr.Event{
		toMe, toMeAndOther, h.ev(6, 1059, BaseTime+10, p(1)), h.ev(6, 1059, BaseTime+11, p(1)), h.ev(6, 1059, BaseTime+1, p(7)),
	}, store.Deleted, store.Deleted, store.Deleted, store.Stored, store.Stored)
	// Refused in the same batch as the request, after it.
	van2 := h.ev(7, 62, BaseTime+10)
	h.outcomes([]*nostr.Event{van2, h.ev(8, 1059, BaseTime+9, p(7))}, store.Stored, store.Deleted)
}

func testExpiration(t *testing.T, st store.Store) {
	h := newH(t, st)
	now := time.Now().Unix()
	exp := func(ts int64) nostr.Tag { return nostr.Tag{"expiration", strconv.FormatInt(ts, 10)} }
	past := h.ev(1, 1, BaseTime+1, exp(now-100), nostr.Tag{"t", "x"})
	future := h.ev(1, 1, BaseTime+2, exp(now+1_000_000), nostr.Tag{"t", "x"})
	plain := h.ev(1, 1, BaseTime+3, nostr.Tag{"t", "x"})
	bad := h.ev(1, 1, BaseTime+4, nostr.Tag{"expiration", "soon"}, nostr.Tag{"t", "x"})
	pastRepl := h.ev(1, 0, BaseTime+5, exp(now-100))
	h.stored(past, future, plain, bad, pastRepl)
	all := fs(nostr.Filter{})
	h.expect(all, bad, plain, future)
	h.expect(fs(nostr.Filter{Tags: []nostr.TagFilter{{Name: 't', Values: []string{"x"}}}}), bad, plain, future)
	h.expect(fs(nostr.Filter{Authors: []nostr.PubKey{Key(1)}, Kinds: []int{1}}), bad, plain, future)
	h.expect(fs(nostr.Filter{IDs: []nostr.ID{past.ID, future.ID}}), future)
	h.expect(fs(nostr.Filter{Kinds: []int{0}}))
	h.expect(fs(nostr.Filter{Limit: 1, HasLimit: true}), bad)
	items, err := st.Items(context.Background(), all, 0)
	if err != nil || len(items) != 3 {
		t.Fatalf("Items = %v, %v; want 3", items, err)
	}
	// The background purge may have removed the expired ones already;
	// PurgeExpired with now removes them if not.
	if _, err := st.PurgeExpired(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	if h.has(past.ID) || h.has(pastRepl.ID) {
		t.Fatal("expired events still stored after PurgeExpired")
	}
	if !h.has(future.ID) {
		t.Fatal("unexpired event purged")
	}
	// Purging with a later now removes the other one, and reports it.
	n, err := st.PurgeExpired(context.Background(), now+2_000_000)
	if err != nil || n != 1 {
		t.Fatalf("PurgeExpired(later) = %d, %v; want 1", n, err)
	}
	if h.has(future.ID) {
		t.Fatal("event still stored after PurgeExpired past its expiration")
	}
	h.expect(all, bad, plain)
	// A purged replaceable version no longer blocks older versions.
	h.stored(h.ev(1, 0, BaseTime+4))
	// Expiration exactly now counts as expired.
	edge := h.ev(2, 1, BaseTime, exp(now))
	h.stored(edge)
	h.expect(fs(nostr.Filter{Authors: []nostr.PubKey{Key(2)}}))
}
