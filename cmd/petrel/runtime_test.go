package main

import (
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/petrel-relay/petrel/internal/config"
)

func TestWorthReleasing(t *testing.T) {
	const min = releaseMin
	cases := []struct {
		name                     string
		h                        heap
		baseline, since, dropped uint64
		want                     bool
	}{
		{"at every limit", heap{free: min, objects: 4 * min}, 4 * min, min/4 - 1, 0, true},
		{"grown less than the floor", heap{free: min - 1}, 0, 0, 0, false},
		{"grown less than a quarter", heap{free: min, objects: 4*min + 4}, 4*min + 4, 0, 0, false},
		{"still allocating", heap{free: min, objects: 4 * min}, 4 * min, min / 4, 0, false},
		{"garbage not yet collected counts", heap{objects: 5 * min}, 4 * min, 0, 0, true},
		{"shrunk below the baseline", heap{objects: min}, 4 * min, 0, 0, false},
		{"free spans left by a collection", heap{free: min, objects: 3 * min}, 4 * min, 0, 0, true},
		{"free spans under a quarter of the heap", heap{free: min, objects: 4*min + 4}, 4*min + 4, 0, 0, false},
		{"free spans, still allocating", heap{free: min, objects: 3 * min}, 4 * min, min / 4, 0, false},
		// A release while the out-queues were full set the baseline with
		// them in it; their connections then closed on a quiet relay.
		{"dropped at every limit", heap{objects: 4 * min}, 4 * min, min/4 - 1, min, true},
		{"dropped less than the floor", heap{objects: 2 * min}, 2 * min, 0, min - 1, false},
		{"dropped less than a quarter of the heap", heap{objects: 4*min + 4}, 4*min + 4, 0, min, false},
		{"dropped, still allocating", heap{objects: 4 * min}, 4 * min, min / 4, min, false},
	}
	for _, c := range cases {
		if got := worthReleasing(c.h, c.baseline, c.since, c.dropped); got != c.want {
			t.Errorf("%s: worthReleasing(%+v, %d, %d, %d) = %v, want %v", c.name, c.h, c.baseline, c.since, c.dropped, got, c.want)
		}
	}
}

var sink [][]byte

// TestReleaseAfterBurst allocates and drops a burst: the check right after
// it sees the allocation still going and waits, the next finds one quiet
// interval and waits, the one after releases, and
// the runtime's released figure grows (which also checks the metric names
// are real: a wrong name reads as KindBad, and Uint64 panics); a third
// finds nothing to do.
func TestReleaseAfterBurst(t *testing.T) {
	// Other tests of this package leave heap behind: settle it, and make
	// the burst large against it, so the test does not depend on them.
	debug.FreeOSMemory()
	var w heapWatch
	w.check(time.Now())
	burst := max(64<<20, 2*int(w.baseline))
	makeGarbage(burst)
	if r, ok := w.check(time.Now()); ok {
		t.Fatalf("released %+v while the burst was in the last interval", r)
	}
	if r, ok := w.check(time.Now()); ok {
		t.Fatalf("released %+v after one quiet interval, want %d", r, quietChecks)
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	r, ok := w.check(time.Now())
	if !ok || r.before < r.after+32<<20 {
		t.Fatalf("check after the burst = %+v, %v; want a release of at least 32 MiB", r, ok)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if after.HeapReleased < before.HeapReleased+32<<20 {
		t.Fatalf("HeapReleased %d -> %d: the free heap was not returned", before.HeapReleased, after.HeapReleased)
	}
	if r, ok := w.check(time.Now()); ok {
		t.Fatalf("a check right after a release released again: %+v", r)
	}

	// Another burst right away: the release waits releaseCostShare times
	// the last release's duration, then goes ahead.
	makeGarbage(burst)
	now := time.Now()
	w.check(now) // the burst is in this interval
	w.check(now) // one quiet interval
	if r, ok := w.check(now); ok {
		t.Fatalf("released again right after a release that took %v: %+v", r.took, r)
	}
	if _, ok := w.check(w.notBefore); !ok {
		t.Fatal("no release once the cost bound had passed")
	}
}

// TestReleaseCostIsCPUTime: the wait after a release is releaseCostShare
// times what the release cost the process, not the wall time it took: a
// release during which the process did not run (the clock here reports
// no CPU time spent) holds back nothing, so a relay descheduled in the
// middle of one does not put off the next for minutes.
func TestReleaseCostIsCPUTime(t *testing.T) {
	debug.FreeOSMemory()
	w := heapWatch{cpu: func() time.Duration { return time.Second }}
	w.check(time.Now())
	burst := max(64<<20, 2*int(w.baseline))
	for round := 0; round < 2; round++ {
		makeGarbage(burst)
		now := time.Now()
		w.check(now) // the burst is in this interval
		w.check(now) // one quiet interval
		r, ok := w.check(now)
		if !ok {
			t.Fatalf("round %d: no release after the burst (notBefore %v after now)", round, w.notBefore.Sub(now))
		}
		if r.took <= 0 || r.cost != 0 || !w.notBefore.Equal(now) {
			t.Fatalf("round %d: release took %v, cost %v, next not before now+%v; want cost 0 and no wait", round, r.took, r.cost, w.notBefore.Sub(now))
		}
	}
	// With the process's own clock the cost is positive and at most the
	// wall time.
	w.cpu = nil
	makeGarbage(burst)
	now := time.Now()
	w.check(now)
	w.check(now)
	r, ok := w.check(now)
	if !ok || r.cost <= 0 || r.cost > r.took || !w.notBefore.Equal(now.Add(releaseCostShare*r.cost)) {
		t.Fatalf("release %+v, %v, next not before now+%v", r, ok, w.notBefore.Sub(now))
	}
}

// TestReleaseWaitsForIdle: a release that is due while the relay has
// EVENTs in flight is put off, check after check, and happens at the
// first check that finds none.
func TestReleaseWaitsForIdle(t *testing.T) {
	debug.FreeOSMemory()
	busy := true
	w := heapWatch{busy: func() bool { return busy }}
	w.check(time.Now())
	burst := max(64<<20, 2*int(w.baseline))
	makeGarbage(burst)
	for i := 0; i < quietChecks+4; i++ {
		if r, ok := w.check(time.Now()); ok {
			t.Fatalf("check %d released %+v while the relay was busy", i, r)
		}
	}
	if w.deferred == 0 {
		t.Fatal("no release was due and put off: the burst was not seen")
	}
	busy = false
	if r, ok := w.check(time.Now()); !ok || r.before < r.after+32<<20 {
		t.Fatalf("first idle check = %+v, %v; want a release of at least 32 MiB", r, ok)
	}
}

// TestReleaseWhenHeldDropped is the slow-consumer episode on a quiet
// relay: a release happens while the out-queues are full (they are live,
// so it returns little and its baseline includes them), then their
// connections close. Nothing is allocated afterwards, so only the drop
// the relay reports can show the garbage; the watch must release it
// within quietChecks checks, and then rest.
func TestReleaseWhenHeldDropped(t *testing.T) {
	debug.FreeOSMemory()
	var queued uint64
	w := heapWatch{held: func() uint64 { return queued }}
	w.check(time.Now())
	size := max(96<<20, 2*int(w.baseline))
	for n := 0; n < size; n += 1 << 20 {
		sink = append(sink, make([]byte, 1<<20))
	}
	queued = uint64(size)
	// The queues are full and stay so: quiet checks release what the
	// burst left (little), with the queues in the new baseline.
	released := false
	for i := 0; i < 2*quietChecks+2 && !released; i++ {
		_, released = w.check(w.notBefore)
	}
	if !released {
		t.Fatal("no release after the burst while the queues were full")
	}
	if w.baseline < uint64(size) {
		t.Fatalf("baseline %d after a release with %d held live, want it to include them", w.baseline, size)
	}
	for i := 0; i < quietChecks+1; i++ {
		if r, ok := w.check(w.notBefore); ok {
			t.Fatalf("released again while nothing changed: %+v", r)
		}
	}
	// The connections close: their queues become garbage.
	sink, queued = nil, 0
	var r release
	ok := false
	for i := 0; i < quietChecks && !ok; i++ {
		r, ok = w.check(w.notBefore)
	}
	if !ok || r.before < r.after+uint64(size)/2 {
		t.Fatalf("after the queues were dropped: %+v, %v; want a release of at least %d", r, ok, size/2)
	}
	if r, ok := w.check(w.notBefore); ok {
		t.Fatalf("released again right after: %+v", r)
	}
}

func TestApplyRuntime(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Setenv("GOGC", "")
	stop := applyRuntime(config.Runtime{GCPercent: 37, MemoryReleaseInterval: time.Millisecond}, log, func() uint64 { return 0 }, nil)
	if prev := debug.SetGCPercent(100); prev != 37 {
		t.Errorf("GC target %d after applyRuntime, want 37", prev)
	}
	time.Sleep(10 * time.Millisecond) // let the loop tick a few times
	stop()                            // returns once the loop has ended

	// GOGC set wins.
	t.Setenv("GOGC", "100")
	stop = applyRuntime(config.Runtime{GCPercent: 37, MemoryReleaseInterval: -1}, log, nil, nil)
	if prev := debug.SetGCPercent(100); prev != 100 {
		t.Errorf("GC target %d with GOGC=100 set, want 100", prev)
	}
	stop()

	// GOMAXPROCS: set when configured, left alone at 0 or when the
	// environment sets it.
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)
	t.Setenv("GOMAXPROCS", "")
	applyRuntime(config.Runtime{GOMAXPROCS: procs + 3, MemoryReleaseInterval: -1}, log, nil, nil)()
	if n := runtime.GOMAXPROCS(0); n != procs+3 {
		t.Errorf("GOMAXPROCS %d after configuring %d", n, procs+3)
	}
	runtime.GOMAXPROCS(procs)
	applyRuntime(config.Runtime{MemoryReleaseInterval: -1}, log, nil, nil)()
	if n := runtime.GOMAXPROCS(0); n != procs {
		t.Errorf("GOMAXPROCS %d with 0 configured, want %d (unchanged)", n, procs)
	}
	t.Setenv("GOMAXPROCS", "1")
	applyRuntime(config.Runtime{GOMAXPROCS: procs + 3, MemoryReleaseInterval: -1}, log, nil, nil)()
	if n := runtime.GOMAXPROCS(0); n != procs {
		t.Errorf("GOMAXPROCS %d with the environment variable set, want %d (unchanged)", n, procs)
	}
}

// makeGarbage allocates about n bytes in 1 MiB pieces and drops them.
func makeGarbage(n int) {
	for i := 0; i < n; i += 1 << 20 {
		sink = append(sink, make([]byte, 1<<20))
	}
	sink = nil
}

// TestReleaseEmptiesPools: what a release returns includes what waits in
// a sync.Pool (the out-queue segments of connections that closed), which
// one collection only moves to the pool's victim generation.
func TestReleaseEmptiesPools(t *testing.T) {
	var pool sync.Pool
	var held []weak.Pointer[[1 << 20]byte]
	for range 16 {
		b := new([1 << 20]byte)
		held = append(held, weak.Make(b))
		pool.Put(b)
	}
	releaseHeap()
	for i, w := range held {
		if w.Value() != nil {
			t.Fatalf("pooled buffer %d still reachable after a release", i)
		}
	}
	runtime.KeepAlive(&pool)
}
