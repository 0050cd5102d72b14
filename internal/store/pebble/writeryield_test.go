package pebble

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// After a commit's report the writer yields: on one processor, a
// goroutine the report woke runs before the writer commits the next
// batch (here one queued by that report, committed without a sync so
// that nothing else would let the woken goroutine in first). Go's
// scheduler serves its global queue, where the yield puts the writer,
// first one round in 61, so the test asks it of most rounds, not all:
// without the yield none passes.
func TestWriterYieldsAfterReport(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	s := openTest(t, Options{NoSync: true})
	defer s.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	pk := storetest.Key(1)
	ctx := context.Background()
	const rounds = 20
	first := 0
	for i := 0; i < rounds; i++ {
		a := storetest.NewEvent(rng, pk, 1, int64(1_700_000_000+2*i), nil, "a")
		b := storetest.NewEvent(rng, pk, 1, int64(1_700_000_001+2*i), nil, "b")
		var bDone atomic.Bool
		woken := make(chan struct{})
		sawB := make(chan bool, 1)
		go func() {
			<-woken
			sawB <- bDone.Load()
		}()
		done := make(chan struct{})
		err := s.Submit(ctx, a, func(res store.SaveResult) {
			if res.Outcome != store.Stored {
				t.Errorf("a: %+v", res)
			}
			// Queue b for the next batch, then wake the goroutine.
			if err := s.Submit(ctx, b, func(store.SaveResult) { bDone.Store(true); close(done) }); err != nil {
				t.Error(err)
			}
			close(woken)
		})
		if err != nil {
			t.Fatal(err)
		}
		if !<-sawB {
			first++
		}
		<-done
	}
	if first < rounds*3/4 {
		t.Errorf("the goroutine a report woke ran before the next batch's commit in %d of %d rounds", first, rounds)
	}
}
