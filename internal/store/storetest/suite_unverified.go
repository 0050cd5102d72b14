package storetest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// The store.Unverified subtests: they run only on a store that implements
// it, and check its contract: a held event is never served and never
// applied (no replacement, deletion or tombstone) until released; a
// release applies every rule as Submit would; a rejection leaves nothing;
// a forged copy (same id, other signature) cannot keep the genuine one
// out.

// unverified is the helper the subtests share.
type unverified struct {
	*h
	u store.Unverified
}

func newUnverified(t *testing.T, st store.Store) *unverified {
	u, ok := st.(store.Unverified)
	if !ok {
		t.Skip("the store does not implement store.Unverified")
	}
	return &unverified{h: newH(t, st), u: u}
}

// call runs one of the Submit* methods and waits for its result.
func (u *unverified) call(f func(context.Context, *nostr.Event, func(store.SaveResult)) error, ev *nostr.Event) store.SaveResult {
	u.t.Helper()
	var wg sync.WaitGroup
	var res store.SaveResult
	calls := 0
	wg.Add(1)
	if err := f(context.Background(), ev, func(r store.SaveResult) { res = r; calls++; wg.Done() }); err != nil {
		u.t.Fatalf("submit: %v", err)
	}
	wg.Wait()
	if calls != 1 {
		u.t.Fatalf("done called %d times", calls)
	}
	return res
}

func (u *unverified) hold(ev *nostr.Event, want store.Outcome) {
	u.t.Helper()
	if r := u.call(u.u.SubmitUnverified, ev); r.Outcome != want || (want == store.Held && r.Seq != 0) {
		u.t.Fatalf("SubmitUnverified(kind %d): %v (seq %d, err %v), want %v with seq 0", ev.Kind, r.Outcome, r.Seq, r.Err, want)
	}
}

func (u *unverified) release(ev *nostr.Event, want store.Outcome) store.SaveResult {
	u.t.Helper()
	r := u.call(u.u.SubmitVerified, ev)
	if r.Outcome != want {
		u.t.Fatalf("SubmitVerified(kind %d): %v (err %v), want %v", ev.Kind, r.Outcome, r.Err, want)
	}
	if want == store.Stored && r.Seq == 0 {
		u.t.Fatal("SubmitVerified: Stored with commit position 0")
	}
	return r
}

func (u *unverified) reject(ev *nostr.Event) {
	u.t.Helper()
	errc := make(chan error, 2)
	if err := u.u.SubmitRejected(context.Background(), ev, func(err error) { errc <- err }); err != nil {
		u.t.Fatalf("SubmitRejected: %v", err)
	}
	if err := <-errc; err != nil {
		u.t.Fatalf("SubmitRejected done: %v", err)
	}
}

// held returns the (id, sig) pairs Unverified lists, checking each
// event's Raw against want when it is one of them.
func (u *unverified) held(want ...*nostr.Event) {
	u.t.Helper()
	type key struct {
		id  nostr.ID
		sig nostr.Sig
	}
	got := map[key]*nostr.Event{}
	err := u.u.Unverified(context.Background(), func(ev *nostr.Event) error {
		got[key{ev.ID, ev.Sig}] = ev
		return nil
	})
	if err != nil {
		u.t.Fatalf("Unverified: %v", err)
	}
	if len(got) != len(want) {
		u.t.Fatalf("Unverified lists %d events, want %d", len(got), len(want))
	}
	for _, w := range want {
		g, ok := got[key{w.ID, w.Sig}]
		if !ok {
			u.t.Fatalf("Unverified does not list %s", w.ID.Hex()[:8])
		}
		if string(g.Raw) != string(w.Raw) || g.Kind != w.Kind || g.PubKey != w.PubKey {
			u.t.Fatalf("Unverified lists %s as %q, want %q", w.ID.Hex()[:8], g.Raw, w.Raw)
		}
	}
}

// invisible checks that no read path sees any of evs.
func (u *unverified) invisible(evs ...*nostr.Event) {
	u.t.Helper()
	ids := make([]nostr.ID, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ID
		if u.has(ev.ID) {
			u.t.Fatalf("Has(%s) = true for a held event", ev.ID.Hex()[:8])
		}
	}
	f := fs(nostr.Filter{IDs: ids})
	if got := u.query(f...); len(got) != 0 {
		u.t.Fatalf("Query by id returns held events %s", fmtRecs(got))
	}
	if n := u.count(f...); n != 0 {
		u.t.Fatalf("Count by id = %d for held events", n)
	}
	items, err := u.st.Items(context.Background(), f, 0)
	if err != nil {
		u.t.Fatalf("Items: %v", err)
	}
	if len(items) != 0 {
		u.t.Fatalf("Items returns %d held events", len(items))
	}
}

// forged returns a copy of ev with another signature (same id).
func forged(ev *nostr.Event) *nostr.Event {
	c := *ev
	c.Sig[0] ^= 0xff
	c.Raw = nostr.Serialize(&c)
	return &c
}

// testUnverifiedHidden: held events are served by no read path, listed by
// Unverified, and apply no rule: a newer replaceable or addressable
// version does not replace the stored one, a deletion deletes nothing and
// leaves no tombstone, a request to vanish neither.
func testUnverifiedHidden(t *testing.T, st store.Store) {
	u := newUnverified(t, st)
	note := u.ev(1, 1, BaseTime)
	prof := u.ev(1, 0, BaseTime)
	art := u.ev(1, 30023, BaseTime, nostr.Tag{"d", "a"})
	u.stored(note, prof, art)

	newProf := u.ev(1, 0, BaseTime+10)
	newArt := u.ev(1, 30023, BaseTime+10, nostr.Tag{"d", "a"})
	del := u.ev(1, 5, BaseTime+10, eTag(note), nostr.Tag{"a", ATag(30023, Key(1), "a")})
	vanish := u.ev(1, 62, BaseTime+20, nostr.Tag{"relay", "ALL_RELAYS"})
	plain := u.ev(2, 1, BaseTime+5)
	held := []*nostr.Event{newProf, newArt, del, vanish, plain}
	for _, ev := range held {
		u.hold(ev, store.Held)
	}
	u.invisible(held...)
	u.held(held...)
	all := fs(nostr.Filter{})
	u.expect(all, sortEvs(note, prof, art)...)
	// Nothing they would have tombstoned is refused: a verified event the
	// held deletion and request to vanish cover is stored.
	later := u.ev(1, 1, BaseTime+15)
	u.stored(later)
	// The stored note is still there to be saved as Duplicate (not Deleted).
	u.outcomes([]*nostr.Event{note}, store.Duplicate)
	// Holding a stored id is Duplicate; holding a held event again is Held
	// (idempotent) and lists it once.
	u.hold(note, store.Duplicate)
	u.hold(plain, store.Held)
	u.held(held...)
	// What Submit refuses whatever the state, holding refuses too.
	eph := u.ev(1, 20001, BaseTime)
	if r := u.call(u.u.SubmitUnverified, eph); r.Outcome != store.Failed || !errors.Is(r.Err, store.ErrEphemeral) {
		t.Fatalf("holding an ephemeral event: %v (%v), want Failed with ErrEphemeral", r.Outcome, r.Err)
	}
	u.held(held...)
}

// testUnverifiedRelease: a release applies every rule against the store
// as it is then, with a commit position, and removes the held copy.
func testUnverifiedRelease(t *testing.T, st store.Store) {
	u := newUnverified(t, st)
	note := u.ev(1, 1, BaseTime)
	prof := u.ev(1, 0, BaseTime)
	u.stored(note, prof)
	newProf := u.ev(1, 0, BaseTime+10)
	oldProf := u.ev(1, 0, BaseTime-10)
	del := u.ev(1, 5, BaseTime+10, eTag(note))
	plain := u.ev(2, 1, BaseTime+5)
	for _, ev := range []*nostr.Event{newProf, oldProf, del, plain} {
		u.hold(ev, store.Held)
	}
	r := u.release(newProf, store.Stored)
	if !sameIDs(r.Removed, prof.ID) {
		t.Fatalf("release of the newer profile removed %v, want the older one", r.Removed)
	}
	u.release(oldProf, store.Superseded)
	r = u.release(del, store.Stored)
	if !sameIDs(r.Removed, note.ID) {
		t.Fatalf("release of the deletion removed %v, want the note", r.Removed)
	}
	u.held(plain)
	u.expect(fs(nostr.Filter{}), sortEvs(del, newProf)...)
	// The deletion's tombstone now holds: the note cannot be held back in
	// as a stored event: holding it again is Held, releasing it Deleted.
	u.hold(note, store.Held)
	u.release(note, store.Deleted)
	// A release of an event that was stored meanwhile (another copy
	// verified first) is Duplicate, and still removes the held copy.
	u.stored(plain)
	u.release(plain, store.Duplicate)
	u.held()
	// Releasing twice (a crash between the release and the caller's
	// record of it) is Duplicate the second time.
	again := u.ev(3, 1, BaseTime)
	u.hold(again, store.Held)
	u.release(again, store.Stored)
	u.release(again, store.Duplicate)
	u.expect(fs(nostr.Filter{Authors: []nostr.PubKey{Key(3)}}), again)
}

// testUnverifiedReject: a rejected held event leaves nothing behind, and
// a forged copy of an id (another signature) neither keeps the genuine
// copy out nor takes it down when it is rejected.
func testUnverifiedReject(t *testing.T, st store.Store) {
	u := newUnverified(t, st)
	genuine := u.ev(1, 1, BaseTime)
	fake := forged(genuine)
	u.hold(fake, store.Held)
	u.hold(genuine, store.Held)
	u.held(fake, genuine)
	u.reject(fake)
	u.held(genuine)
	u.invisible(genuine)
	u.reject(fake) // idempotent
	u.held(genuine)
	u.release(genuine, store.Stored)
	u.held()
	u.expect(fs(nostr.Filter{}), genuine)
	// A forged copy of a stored id is Duplicate: never held.
	u.hold(forged(genuine), store.Duplicate)
	u.held()
	// Released with the genuine copy still held beside a forged one: the
	// release removes its own copy; the forged one stays until it is
	// rejected (or released: Duplicate, since the id is stored).
	other := u.ev(2, 1, BaseTime)
	fakeOther := forged(other)
	u.hold(other, store.Held)
	u.hold(fakeOther, store.Held)
	u.release(other, store.Stored)
	u.held(fakeOther)
	u.reject(fakeOther)
	u.held()
	u.expect(fs(nostr.Filter{Authors: []nostr.PubKey{Key(2)}}), other)
	// A rejected event never becomes visible, even to a later query.
	bad := u.ev(3, 1, BaseTime)
	u.hold(bad, store.Held)
	u.reject(bad)
	u.held()
	u.invisible(bad)
}

// testUnverifiedConcurrent: many holds, releases and rejections at once
// end with exactly the released events stored and nothing held.
func testUnverifiedConcurrent(t *testing.T, st store.Store) {
	u := newUnverified(t, st)
	const n = 200
	evs := make([]*nostr.Event, n)
	for i := range evs {
		evs[i] = u.ev(i%7+1, 1, BaseTime+int64(i))
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i, ev := range evs {
		wg.Add(1)
		err := u.u.SubmitUnverified(context.Background(), ev, func(r store.SaveResult) {
			if r.Outcome != store.Held {
				errs <- errors.New("hold: " + r.Outcome.String())
				wg.Done()
				return
			}
			// Follow up from another goroutine: done must not call back
			// into the store.
			go func() {
				var err error
				if i%3 == 0 {
					err = u.u.SubmitRejected(context.Background(), ev, func(error) { wg.Done() })
				} else {
					err = u.u.SubmitVerified(context.Background(), ev, func(r store.SaveResult) {
						if r.Outcome != store.Stored {
							errs <- errors.New("release: " + r.Outcome.String())
						}
						wg.Done()
					})
				}
				if err != nil {
					errs <- err
					wg.Done()
				}
			}()
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	u.held()
	var want []*nostr.Event
	for i, ev := range evs {
		if i%3 != 0 {
			want = append(want, ev)
		}
	}
	slices.SortFunc(want, func(a, b *nostr.Event) int { return int(b.CreatedAt - a.CreatedAt) })
	u.expect(fs(nostr.Filter{}), want...)
}
