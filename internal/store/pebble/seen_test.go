package pebble

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

func randomID(rng *rand.Rand) nostr.ID {
	var id nostr.ID
	for i := 0; i < len(id); i += 8 {
		binary.LittleEndian.PutUint64(id[i:], rng.Uint64())
	}
	return id
}

// TestIDBloom: every added id is found; at the design density few
// others are.
func TestIDBloom(t *testing.T) {
	f := newIDBloom(1 << 16)
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]nostr.ID, f.capacity)
	for i := range ids {
		ids[i] = randomID(rng)
		f.add(&ids[i])
	}
	for i := range ids {
		if !f.mayContain(&ids[i]) {
			t.Fatalf("id %d of %d added is not found", i, len(ids))
		}
	}
	const probes = 100000
	fp := 0
	for range probes {
		id := randomID(rng)
		if f.mayContain(&id) {
			fp++
		}
	}
	if rate := float64(fp) / probes; rate > 0.005 {
		t.Fatalf("false positives at %d bits per id: %.3f%%, want under 0.5%%", idBloomBitsPerID, 100*rate)
	}
	if f.count.Load() != f.capacity {
		t.Fatalf("count %d, want %d", f.count.Load(), f.capacity)
	}
}

func TestIDBloomBytes(t *testing.T) {
	for _, c := range []struct {
		n            int64
		least, limit int
		want         int
	}{
		{0, 64, 1 << 20, 64},
		{1, 64, 1 << 20, 64},
		{32, 64, 1 << 20, 64},           // 32 ids * 2 bytes
		{33, 64, 1 << 20, 128},          // rounded up to a power of two
		{1 << 30, 64, 1 << 20, 1 << 20}, // capped
		{10, 1 << 20, 1 << 26, 1 << 20},
	} {
		if got := idBloomBytes(c.n, c.least, c.limit); got != c.want {
			t.Errorf("idBloomBytes(%d, %d, %d) = %d, want %d", c.n, c.least, c.limit, got, c.want)
		}
	}
}

// waitSeen starts the store's filter (the first HasAt does) and waits
// until it is built and no build runs.
func waitSeen(t *testing.T, s *Store) *idBloom {
	t.Helper()
	hasAt(t, s, nostr.ID{})
	return waitSeenBuilt(t, s)
}

// waitSeenBuilt waits until the store's filter, started before, is built
// and no build runs.
func waitSeenBuilt(t *testing.T, s *Store) *idBloom {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if f := s.seen.Load(); f != nil && !s.seenBuild.Load() {
			return f
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the filter of stored ids was not built within 30s")
	return nil
}

// TestSeenSparesLookup: with the filter built, HasAt answers new ids
// without a lookup and still finds stored ones.
func TestSeenSparesLookup(t *testing.T) {
	s := openTest(t, Options{NoSync: true})
	defer s.Close()
	if n := s.Stats().IDFilterBytes; n != 0 {
		t.Fatalf("IDFilterBytes %d before the first HasAt", n)
	}
	waitSeen(t, s)
	if n := s.Stats().IDFilterBytes; n != seenMinBytes {
		t.Fatalf("IDFilterBytes %d for an empty store, want %d", n, seenMinBytes)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var stored []*nostr.Event
	for i := range 20 {
		stored = append(stored, storetest.NewEvent(rng, storetest.Key(1), 1, storetest.BaseTime+int64(i), nil, "note"))
	}
	if _, err := s.Save(context.Background(), stored); err != nil {
		t.Fatal(err)
	}
	for _, ev := range stored {
		if found, _ := hasAt(t, s, ev.ID); !found {
			t.Fatalf("stored event %.12s not found", ev.ID.Hex())
		}
	}
	skips := s.seenSkips.Load()
	for range 200 {
		if found, _ := hasAt(t, s, randomID(rng)); found {
			t.Fatal("a new id is found")
		}
	}
	if n := s.seenSkips.Load() - skips; n != 200 {
		t.Fatalf("the filter spared %d of 200 lookups of new ids", n)
	}
}

// TestSeenBuildWhileWriting: a store reopened with events builds its
// filter (from a size far too small, so it is rebuilt larger on the way)
// while two writers store more; once built, the filter holds every
// stored id.
func TestSeenBuildWhileWriting(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(5, 6))
	batch := func(n int, ts int64) []*nostr.Event {
		evs := make([]*nostr.Event, n)
		for i := range evs {
			evs[i] = storetest.NewEvent(rng, storetest.Key(i%7), 1, ts+int64(i), nil, "x")
		}
		return evs
	}
	s := openTest(t, Options{Path: dir, NoSync: true})
	for i := range 10 {
		if _, err := s.Save(context.Background(), batch(500, storetest.BaseTime+int64(i)*1000)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	more := [2][][]*nostr.Event{}
	for w := range more {
		for i := range 100 {
			more[w] = append(more[w], batch(10, storetest.BaseTime+int64(w*100+i)*1000+500))
		}
	}
	s = openTest(t, Options{Path: dir, NoSync: true, idFilterMinBytes: 64})
	defer s.Close()
	hasAt(t, s, nostr.ID{}) // starts the build
	var wg sync.WaitGroup
	for w := range more {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, evs := range more[w] {
				if _, err := s.Save(context.Background(), evs); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	f := waitSeen(t, s)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxID}, UpperBound: []byte{pfxID + 1}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
		if !f.mayContain((*nostr.ID)(it.Key()[1:])) {
			t.Errorf("stored id %x is not in the filter", it.Key()[1:])
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if n != 7000 {
		t.Fatalf("%d ids stored, want 7000", n)
	}
	if f.capacity < int64(n) {
		t.Fatalf("the filter holds %d ids at full precision, %d are stored: it was not rebuilt larger", f.capacity, n)
	}
}

// TestSeenCloseDuringBuild: closing the store while its filter is being
// built stops the build before pebble closes.
func TestSeenCloseDuringBuild(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, Options{Path: dir, NoSync: true})
	rng := rand.New(rand.NewPCG(7, 8))
	evs := make([]*nostr.Event, 20000)
	for i := range evs {
		evs[i] = storetest.NewEvent(rng, storetest.Key(i%5), 1, storetest.BaseTime+int64(i), nil, "x")
	}
	if _, err := s.Save(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for range 5 {
		s = openTest(t, Options{Path: dir, NoSync: true, idFilterMinBytes: 64})
		hasAt(t, s, nostr.ID{}) // starts the build
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSeenOff: with a negative cap no filter is built and every HasAt
// asks pebble.
func TestSeenOff(t *testing.T) {
	s := openTest(t, Options{NoSync: true, IDFilterMaxBytes: -1})
	defer s.Close()
	rng := rand.New(rand.NewPCG(9, 10))
	for range 100 {
		if found, _ := hasAt(t, s, randomID(rng)); found {
			t.Fatal("a new id is found")
		}
	}
	if s.seen.Load() != nil || s.seenBuild.Load() || s.seenSkips.Load() != 0 || s.Stats().IDFilterBytes != 0 {
		t.Fatal("a filter was built with IDFilterMaxBytes < 0")
	}
}

// TestSeenCap: the filter grows up to IDFilterMaxBytes (rounded down to a
// power of two) and no further; past its capacity at the cap it still
// holds every stored id.
func TestSeenCap(t *testing.T) {
	s := openTest(t, Options{NoSync: true, idFilterMinBytes: 64, IDFilterMaxBytes: 1500})
	defer s.Close()
	const limit = 1024
	if s.opts.IDFilterMaxBytes != limit {
		t.Fatalf("IDFilterMaxBytes 1500 became %d, want %d", s.opts.IDFilterMaxBytes, limit)
	}
	capacity := int64(limit * 8 / idBloomBitsPerID)
	waitSeen(t, s)
	rng := rand.New(rand.NewPCG(13, 14))
	var ids []nostr.ID
	save := func(n int) {
		for range n / 50 {
			var evs []*nostr.Event
			for range 50 {
				ev := storetest.NewEvent(rng, storetest.Key(3), 1, storetest.BaseTime+int64(len(ids)), nil, "x")
				ids = append(ids, ev.ID)
				evs = append(evs, ev)
			}
			saveAll(t, s, evs...)
		}
	}
	save(int(capacity)) // at the cap's capacity: the filter grows to the cap
	f := waitSeen(t, s)
	if n := len(f.words) * 8; n != limit {
		t.Fatalf("filter of %d bytes for %d ids, want the cap, %d", n, len(ids), limit)
	}
	save(2 * int(capacity)) // past it: the filter stays at the cap
	f = waitSeen(t, s)
	if n := s.Stats().IDFilterBytes; n != limit || len(f.words)*8 != limit {
		t.Fatalf("filter of %d bytes (Stats %d) past the cap, want %d", len(f.words)*8, n, limit)
	}
	for i := range ids {
		if !f.mayContain(&ids[i]) {
			t.Fatalf("stored id %d of %d is not in the filter at the cap", i, len(ids))
		}
	}
}
