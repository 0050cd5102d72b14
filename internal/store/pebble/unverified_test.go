package pebble

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// TestUnverifiedWithIDFilter runs the duplicate decisions of holds and
// releases once the filter of stored ids is built (the writer then skips
// the lookup for ids the filter does not hold): a stored id is still
// Duplicate, a release of a stored id too, and the ids a batch stores
// count within that batch.
func TestUnverifiedWithIDFilter(t *testing.T) {
	s := openTest(t, Options{NoSync: true})
	defer s.Close()
	waitSeen(t, s)
	rng := rand.New(rand.NewPCG(7, 7))
	a := storetest.NewEvent(rng, storetest.Key(1), 1, storetest.BaseTime, nil, "stored")
	saveAll(t, s, a)
	call := func(f func(context.Context, *nostr.Event, func(store.SaveResult)) error, ev *nostr.Event) chan store.SaveResult {
		c := make(chan store.SaveResult, 1)
		if err := f(context.Background(), ev, func(r store.SaveResult) { c <- r }); err != nil {
			t.Fatal(err)
		}
		return c
	}
	want := func(c chan store.SaveResult, o store.Outcome) {
		t.Helper()
		if r := <-c; r.Outcome != o {
			t.Fatalf("outcome %v (%v), want %v", r.Outcome, r.Err, o)
		}
	}
	want(call(s.SubmitUnverified, a), store.Duplicate)
	b := storetest.NewEvent(rng, storetest.Key(1), 1, storetest.BaseTime+1, nil, "held")
	want(call(s.SubmitUnverified, b), store.Held)
	want(call(s.SubmitVerified, b), store.Stored)
	want(call(s.SubmitVerified, b), store.Duplicate)
	want(call(s.SubmitUnverified, b), store.Duplicate)
	// Within one batch: the writer drains what is queued into one batch,
	// so queue a Submit and a hold and a release of the same id together,
	// many times, and check that exactly one stores it.
	for i := 0; i < 50; i++ {
		c := storetest.NewEvent(rng, storetest.Key(2), 1, storetest.BaseTime+int64(i), nil, "same batch")
		r1 := call(s.Submit, c)
		r2 := call(s.SubmitUnverified, c)
		r3 := call(s.SubmitVerified, c)
		want(r1, store.Stored)
		want(r2, store.Duplicate)
		want(r3, store.Duplicate)
	}
}
