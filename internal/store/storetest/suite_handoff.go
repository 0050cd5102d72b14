package storetest

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// The Store contract's hand-off section: commit positions
// (SaveResult.Seq) and the snapshot every iterator reports.

// testCommitPositions: the events one commit stores share one position
// above 0, outcomes other than Stored have none, and a later commit has
// a higher position than an earlier one made by the same caller.
func testCommitPositions(t *testing.T, st store.Store) {
	h := newH(t, st)
	ctx := context.Background()
	a, b := h.ev(1, 1, BaseTime), h.ev(2, 1, BaseTime+1)
	res := h.outcomes([]*nostr.Event{a, b, a}, store.Stored, store.Stored, store.Duplicate)
	if res[0].Seq == 0 || res[1].Seq != res[0].Seq {
		t.Fatalf("one commit: positions %d and %d, want equal and above 0", res[0].Seq, res[1].Seq)
	}
	if res[2].Seq != 0 {
		t.Fatalf("duplicate: position %d, want 0", res[2].Seq)
	}
	last := res[0].Seq
	// Outcomes that store nothing have no position.
	old := h.ev(3, 0, BaseTime)
	newer := h.ev(3, 0, BaseTime+10)
	h.stored(newer)
	for _, r := range h.outcomes([]*nostr.Event{old}, store.Superseded) {
		if r.Seq != 0 {
			t.Fatalf("superseded: position %d, want 0", r.Seq)
		}
	}
	res, err := st.Save(ctx, []*nostr.Event{h.ev(4, 1, BaseTime)})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Seq <= last {
		t.Fatalf("later Save: position %d, not above the earlier %d", res[0].Seq, last)
	}
	last = res[0].Seq
	// Submit reports positions too, increasing with the submission
	// order (events may share a commit, and so a position).
	var mu sync.Mutex
	var seqs []uint64
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		if err := st.Submit(ctx, h.ev(5, 1, BaseTime+int64(i)), func(r store.SaveResult) {
			mu.Lock()
			seqs = append(seqs, r.Seq)
			mu.Unlock()
			wg.Done()
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for i, s := range seqs {
		if i > 0 && s < seqs[i-1] {
			t.Fatalf("Submit %d: position %d below the previous %d (done out of order?)", i, s, seqs[i-1])
		}
	}
	if seqs[0] <= last {
		t.Fatalf("first Submit: position %d, not above %d", seqs[0], last)
	}
}

// testSnapshotIncludes: an iterator's snapshot includes every commit made
// before the query and none made after it, and never position 0.
func testSnapshotIncludes(t *testing.T, st store.Store) {
	h := newH(t, st)
	ctx := context.Background()
	before := h.save(h.ev(1, 1, BaseTime))[0]
	it, err := st.Query(ctx, fs(nostr.Filter{}))
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	after := h.save(h.ev(1, 1, BaseTime+1))[0]
	snap := it.Snapshot()
	if !snap.Includes(before.Seq) {
		t.Fatalf("snapshot %+v does not include the earlier commit %d", snap, before.Seq)
	}
	if snap.Includes(after.Seq) {
		t.Fatalf("snapshot %+v includes the later commit %d", snap, after.Seq)
	}
	if snap.Includes(0) {
		t.Fatal("snapshot includes position 0")
	}
	n := 0
	for it.Next() {
		n++
	}
	if n != 1 {
		t.Fatalf("iterator returned %d events, want the 1 stored before it", n)
	}
	if again := it.Snapshot(); !sameSnapshot(again, snap) {
		t.Fatalf("Snapshot changed after iterating: %+v then %+v", snap, again)
	}
}

// testSnapshotExact: with writers committing while queries run, each
// query returns exactly the events whose positions its snapshot
// includes: a position included but its event missing would lose the
// event (the live path skips it), an event returned but its position not
// included would deliver it twice.
func testSnapshotExact(t *testing.T, st store.Store) {
	const writers, each, readers = 4, 120, 3
	ctx := context.Background()
	evs := make([][]*nostr.Event, writers)
	for w := range evs {
		rng := rand.New(rand.NewPCG(uint64(w), 99))
		for i := 0; i < each; i++ {
			evs[w] = append(evs[w], NewEvent(rng, Key(w), 1, BaseTime+int64(i), nil, "exact"))
		}
	}
	var mu sync.Mutex
	seq := map[nostr.ID]uint64{}
	type seen struct {
		snap store.Snapshot
		ids  map[nostr.ID]bool
	}
	var views []seen
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	for r := 0; r < readers; r++ {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				it, err := st.Query(ctx, fs(nostr.Filter{Kinds: []int{1}}))
				if err != nil {
					t.Error(err)
					return
				}
				v := seen{snap: it.Snapshot(), ids: map[nostr.ID]bool{}}
				for it.Next() {
					v.ids[it.Record().ID] = true
				}
				if err := it.Err(); err != nil {
					t.Error(err)
				}
				it.Close()
				mu.Lock()
				views = append(views, v)
				mu.Unlock()
			}
		}()
	}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, ev := range evs[w] {
				if i%3 == 0 {
					res, err := st.Save(ctx, []*nostr.Event{ev})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					seq[ev.ID] = res[0].Seq
					mu.Unlock()
					continue
				}
				wg.Add(1)
				if err := st.Submit(ctx, ev, func(r store.SaveResult) {
					mu.Lock()
					seq[ev.ID] = r.Seq
					mu.Unlock()
					wg.Done()
				}); err != nil {
					t.Error(err)
					wg.Done()
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	rwg.Wait()
	if len(seq) != writers*each {
		t.Fatalf("%d positions for %d events", len(seq), writers*each)
	}
	for id, s := range seq {
		if s == 0 {
			t.Fatalf("event %x stored without a position", id[:4])
		}
	}
	partial := 0
	for i, v := range views {
		n := 0
		for id, s := range seq {
			inc := v.snap.Includes(s)
			if inc != v.ids[id] {
				t.Fatalf("query %d: event %x at position %d: included %v, returned %v (snapshot %+v)", i, id[:4], s, inc, v.ids[id], v.snap)
			}
			if inc {
				n++
			}
		}
		if n > 0 && n < len(seq) {
			partial++
		}
	}
	if partial == 0 {
		t.Logf("no query overlapped the writes (%d queries): the check was not exercised mid-write", len(views))
	}
}

func sameSnapshot(a, b store.Snapshot) bool {
	if a.Low != b.Low || a.High != b.High || len(a.Open) != len(b.Open) {
		return false
	}
	for i := range a.Open {
		if a.Open[i] != b.Open[i] {
			return false
		}
	}
	return true
}
