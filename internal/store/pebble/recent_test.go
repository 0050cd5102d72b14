package pebble

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// submitAfter runs SubmitAfter and waits for its result.
func submitAfter(t *testing.T, s *Store, ev *nostr.Event, token uint64) store.SaveResult {
	t.Helper()
	ch := make(chan store.SaveResult, 1)
	if err := s.SubmitAfter(context.Background(), ev, token, func(r store.SaveResult) { ch <- r }); err != nil {
		t.Fatal(err)
	}
	return <-ch
}

func hasAt(t *testing.T, s *Store, id nostr.ID) (bool, uint64) {
	t.Helper()
	found, token, err := s.HasAt(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return found, token
}

func TestPrecheckSparesLookup(t *testing.T) {
	s := openTest(t, Options{NoSync: true})
	defer s.Close()
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range 5 {
		ev := storetest.NewEvent(rng, storetest.Key(1), 1, storetest.BaseTime+int64(i), nil, "note")
		found, token := hasAt(t, s, ev.ID)
		if found {
			t.Fatal("a new event is found")
		}
		if res := submitAfter(t, s, ev, token); res.Outcome != store.Stored {
			t.Fatalf("event %d: %v", i, res.Outcome)
		}
		if found, _ := hasAt(t, s, ev.ID); !found {
			t.Fatalf("event %d not found after it was stored", i)
		}
	}
	if n := s.precheckHits.Load(); n != 5 {
		t.Fatalf("%d of 5 saves spared their lookup", n)
	}
}

// TestPrecheckRace: two copies of one event are both checked before
// either is stored (two connections publishing it at once); whatever
// batches they land in, exactly one is stored.
func TestPrecheckRace(t *testing.T) {
	s := openTest(t, Options{NoSync: true})
	defer s.Close()
	rng := rand.New(rand.NewPCG(2, 2))
	for i := range 50 {
		ev := storetest.NewEvent(rng, storetest.Key(2), 1, storetest.BaseTime+int64(i), nil, "twice")
		_, t1 := hasAt(t, s, ev.ID)
		_, t2 := hasAt(t, s, ev.ID)
		ch := make(chan store.SaveResult, 2)
		for _, tok := range []uint64{t1, t2} {
			if err := s.SubmitAfter(context.Background(), ev, tok, func(r store.SaveResult) { ch <- r }); err != nil {
				t.Fatal(err)
			}
		}
		a, b := <-ch, <-ch
		if stored := (a.Outcome == store.Stored) != (b.Outcome == store.Stored); !stored || (a.Outcome != store.Duplicate && b.Outcome != store.Duplicate) {
			t.Fatalf("round %d: outcomes %v and %v, want one stored and one duplicate", i, a.Outcome, b.Outcome)
		}
	}
	// One copy committed first, the other submitted later with a token
	// from before that commit.
	ev := storetest.NewEvent(rng, storetest.Key(2), 1, storetest.BaseTime, nil, "later")
	_, old := hasAt(t, s, ev.ID)
	if res := submitAfter(t, s, ev, old); res.Outcome != store.Stored {
		t.Fatalf("first copy: %v", res.Outcome)
	}
	if res := submitAfter(t, s, ev, old); res.Outcome != store.Duplicate {
		t.Fatalf("second copy with a token from before the first commit: %v, want duplicate", res.Outcome)
	}
}

// TestPrecheckTokenTooOld: when the commits since a token are more than
// the writer remembers, it looks the id up as before.
func TestPrecheckTokenTooOld(t *testing.T) {
	s := openTest(t, Options{NoSync: true, recentIDs: 4})
	defer s.Close()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 3))
	ev := storetest.NewEvent(rng, storetest.Key(3), 1, storetest.BaseTime, nil, "checked long ago")
	_, token := hasAt(t, s, ev.ID)
	if _, err := s.Save(ctx, []*nostr.Event{ev}); err != nil {
		t.Fatal(err)
	}
	for i := range 10 { // one commit each: ev's id is forgotten
		other := storetest.NewEvent(rng, storetest.Key(3), 1, storetest.BaseTime+1+int64(i), nil, "other")
		if _, err := s.Save(ctx, []*nostr.Event{other}); err != nil {
			t.Fatal(err)
		}
	}
	hits := s.precheckHits.Load()
	if res := submitAfter(t, s, ev, token); res.Outcome != store.Duplicate {
		t.Fatalf("copy with a token older than the remembered commits: %v, want duplicate", res.Outcome)
	}
	if s.precheckHits.Load() != hits {
		t.Fatal("the lookup was spared with a token older than what the writer remembers")
	}
}
