package pebble

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// TestBatchIndexedOnlyForReads: the writer's batch is indexed only when
// it must read through it (writer.reader). Checked new notes, however
// they batch, are written without a read; a read in a batch that already
// holds writes moves them into an indexed batch, once, and sees them.
func TestBatchIndexedOnlyForReads(t *testing.T) {
	s := openTest(t, Options{NoSync: true, PurgeInterval: -1})
	defer s.Close()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(19, 1))
	author := storetest.Key(19)

	// Checked notes from many goroutines at once (so several share a
	// batch): no read, no index.
	const notes = 64
	var wg sync.WaitGroup
	for i := range notes {
		ev := storetest.NewEvent(rng, author, 1, storetest.BaseTime+int64(i), nostr.Tags{{"t", "lazy"}}, "a checked note "+strconv.Itoa(i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, token := hasAt(t, s, ev.ID)
			if res := submitAfter(t, s, ev, token); res.Outcome != store.Stored {
				t.Errorf("checked note %d: %v", i, res.Outcome)
			}
		}()
	}
	wg.Wait()
	if n := s.batchIndexed.Load(); n != 0 {
		t.Fatalf("%d batches of checked notes were indexed, want 0", n)
	}
	if n := countAll(t, s); n != notes {
		t.Fatalf("%d events stored, want %d", n, notes)
	}

	// One batch (one Save): a note written to the plain batch, then a
	// deletion of it, whose duplicate lookup indexes the batch and whose
	// removal must find the note's entries there; then a replaceable
	// event and its newer version, which must find the first's address.
	note := storetest.NewEvent(rng, author, 1, storetest.BaseTime+100, nil, "deleted in its own batch")
	del := storetest.NewEvent(rng, author, nostr.KindDeletion, storetest.BaseTime+101, nostr.Tags{{"e", note.ID.Hex()}}, "")
	v1 := storetest.NewEvent(rng, author, 0, storetest.BaseTime+102, nil, `{"name":"one"}`)
	v2 := storetest.NewEvent(rng, author, 0, storetest.BaseTime+103, nil, `{"name":"two"}`)
	res, err := s.Save(ctx, []*nostr.Event{note, del, v1, v2})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []store.Outcome{store.Stored, store.Stored, store.Stored, store.Stored} {
		if res[i].Outcome != want {
			t.Fatalf("event %d: %v, want %v", i, res[i].Outcome, want)
		}
	}
	if len(res[1].Removed) != 1 || res[1].Removed[0] != note.ID {
		t.Fatalf("the deletion removed %v, want the note of its own batch", res[1].Removed)
	}
	if len(res[3].Removed) != 1 || res[3].Removed[0] != v1.ID {
		t.Fatalf("the newer profile removed %v, want the older of its own batch", res[3].Removed)
	}
	if n := s.batchIndexed.Load(); n != 1 {
		t.Fatalf("%d batches indexed by the Save, want 1 (once, at its first read after a write)", n)
	}
	for _, gone := range []nostr.ID{note.ID, v1.ID} {
		if found, _ := hasAt(t, s, gone); found {
			t.Fatalf("%s is still stored", gone.Hex())
		}
	}
	if n := countAll(t, s); n != notes+2 { // + the deletion and v2
		t.Fatalf("%d events stored, want %d", n, notes+2)
	}
	if err := checkIntegrity(s.db); err != nil {
		t.Fatal(err)
	}
}

// TestPurgeAddressableIndexesMidRemoval: a purge alone in its batch reads
// the expired event through the empty batch (the database), deletes its
// entries into the plain batch, then reads its address pointer, which
// moves those deletes into an indexed batch. Every delete must land in
// the batch that is committed: afterwards the store is consistent and the
// address is free for an older version.
func TestPurgeAddressableIndexesMidRemoval(t *testing.T) {
	s := openTest(t, Options{NoSync: true, PurgeInterval: -1})
	defer s.Close()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(19, 2))
	author := storetest.Key(20)
	exp := int64(storetest.BaseTime + 50)
	tags := nostr.Tags{{"d", "post"}, {"expiration", strconv.FormatInt(exp, 10)}}
	art := storetest.NewEvent(rng, author, 30023, storetest.BaseTime+10, tags, "an article that expires")
	if res, err := s.Save(ctx, []*nostr.Event{art}); err != nil || res[0].Outcome != store.Stored {
		t.Fatalf("save: %v %v", res, err)
	}
	before := s.batchIndexed.Load()
	n, err := s.PurgeExpired(ctx, exp+1)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("purged %d, want 1", n)
	}
	if got := s.batchIndexed.Load() - before; got != 1 {
		t.Fatalf("the purge indexed %d batches, want 1 (at the address read)", got)
	}
	if err := checkIntegrity(s.db); err != nil {
		t.Fatal(err)
	}
	if c := countAll(t, s); c != 0 {
		t.Fatalf("%d events left after the purge", c)
	}
	older := storetest.NewEvent(rng, author, 30023, storetest.BaseTime+5, nostr.Tags{{"d", "post"}}, "an older version, now the only one")
	if res, err := s.Save(ctx, []*nostr.Event{older}); err != nil || res[0].Outcome != store.Stored {
		t.Fatalf("older version after the purge: %v %v, want stored (the address pointer was removed)", res, err)
	}
	if err := checkIntegrity(s.db); err != nil {
		t.Fatal(err)
	}
}

// TestSaveSkipsLookupsWithFilter: Save (import, sync, migrate: no HasAt
// token) starts the filter of stored ids itself, and once it is built a
// batch of new events is written without a duplicate lookup, so without
// an indexed batch. Duplicates are still found: of stored events (the
// filter may contain them: looked up) and within the batch (the batch's
// own ids are always looked up).
func TestSaveSkipsLookupsWithFilter(t *testing.T) {
	s := openTest(t, Options{NoSync: true, PurgeInterval: -1})
	defer s.Close()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(19, 3))
	author := storetest.Key(21)
	note := func(i int) *nostr.Event {
		return storetest.NewEvent(rng, author, 1, storetest.BaseTime+int64(i), nostr.Tags{{"t", "import"}}, "an imported note "+strconv.Itoa(i))
	}
	first := []*nostr.Event{note(0), note(1)}
	saveAll(t, s, first...)
	waitSeenBuilt(t, s) // started by the Save: no HasAt was called
	if n := s.Stats().IDFilterBytes; n == 0 {
		t.Fatal("no filter after the first Save")
	}

	const batch = 100
	evs := make([]*nostr.Event, batch)
	for i := range evs {
		evs[i] = note(10 + i)
	}
	before := s.batchIndexed.Load()
	saveAll(t, s, evs...)
	if n := s.batchIndexed.Load() - before; n != 0 {
		t.Fatalf("a Save of %d new notes indexed %d batches, want 0 (no lookup)", batch, n)
	}

	// One batch: a new note, a stored one, the new one again, another
	// stored one.
	fresh := note(500)
	res, err := s.Save(ctx, []*nostr.Event{fresh, first[0], fresh, evs[7]})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []store.Outcome{store.Stored, store.Duplicate, store.Duplicate, store.Duplicate} {
		if res[i].Outcome != want {
			t.Fatalf("event %d of the mixed batch: %v, want %v", i, res[i].Outcome, want)
		}
	}
	if n := countAll(t, s); n != int64(len(first)+batch+1) {
		t.Fatalf("%d events stored, want %d", n, len(first)+batch+1)
	}
	if err := checkIntegrity(s.db); err != nil {
		t.Fatal(err)
	}
}

// TestSaveAfterCloseStartsNoFilter: a Save refused because the store is
// closed (or read-only) starts no build of the filter of stored ids,
// which would read a closed database.
func TestSaveAfterCloseStartsNoFilter(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, Options{Path: dir, NoSync: true, PurgeInterval: -1})
	ev := storetest.NewEvent(rand.New(rand.NewPCG(19, 4)), storetest.Key(22), 1, storetest.BaseTime, nil, "after close")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(context.Background(), []*nostr.Event{ev}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Save after Close: %v, want ErrClosed", err)
	}
	if s.seenBuild.Load() || s.seen.Load() != nil {
		t.Fatal("a Save after Close started the filter's build")
	}

	ro := openTest(t, Options{Path: dir, ReadOnly: true, PurgeInterval: -1})
	defer ro.Close()
	if _, err := ro.Save(context.Background(), []*nostr.Event{ev}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Save to a read-only store: %v, want ErrReadOnly", err)
	}
	if ro.seenBuild.Load() || ro.seen.Load() != nil {
		t.Fatal("a refused Save to a read-only store started the filter's build")
	}
}
