package main

import (
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"syscall"
	"time"

	"github.com/petrel-relay/petrel/internal/config"
)

// applyRuntime sets the garbage collector's target (unless GOGC is set)
// and GOMAXPROCS (if configured and GOMAXPROCS is not set), and starts
// the loop that returns freed heap to the OS. held, if not nil, reports
// the bytes the relay holds for its connections (out-queues): when they
// drop, what they held is garbage the runtime does not know about until
// it collects. busy, if not nil, reports whether the relay has EVENTs
// waiting for their OK: a release is put off while it does (see
// heapWatch.busy). Both must be safe to call from the loop's goroutine.
// The returned function stops the loop and waits for it to end.
func applyRuntime(c config.Runtime, log *slog.Logger, held func() uint64, busy func() bool) (stop func()) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(c.GCPercent)
	}
	if n := configuredProcs(c); n > 0 {
		runtime.GOMAXPROCS(n)
	}
	if c.MemoryReleaseInterval <= 0 {
		return func() {}
	}
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(c.MemoryReleaseInterval)
		defer t.Stop()
		h := heapWatch{held: held, busy: busy}
		h.check(time.Now()) // the baseline
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				if r, ok := h.check(now); ok {
					log.Debug("returned free heap to the OS", "heap_before", r.before, "heap_after", r.after, "took", r.took.Round(time.Microsecond), "cost", r.cost.Round(time.Microsecond))
				}
			}
		}
	}()
	return func() { close(done); <-ended }
}

// configuredProcs is the GOMAXPROCS runtime.gomaxprocs asks for, or 0
// when it asks for none or the GOMAXPROCS environment variable is set
// (it wins, and Go applied it at start).
func configuredProcs(c config.Runtime) int {
	if os.Getenv("GOMAXPROCS") == "" && c.GOMAXPROCS > 0 {
		return c.GOMAXPROCS
	}
	return 0
}

// releaseMin is the least heap growth worth a release: below it, the
// forced collection and the page faults that follow cost more than the
// memory is worth.
const releaseMin = 16 << 20

// heap is what the runtime reports of its heap, in bytes.
type heap struct {
	free    uint64 // free spans still resident (not returned to the OS)
	objects uint64 // heap objects, live or not yet collected
	allocs  uint64 // allocated since the process started
}

// resident is the heap's resident footprint (the part the runtime has
// not returned to the OS).
func (h heap) resident() uint64 { return h.free + h.objects }

// worthReleasing reports whether to collect and return free heap to the
// OS now, given the heap's resident footprint after the last release (the
// baseline), the bytes allocated since the last check, and the bytes the
// relay let go of since the last release (dropped: out-queue bytes of
// connections that closed or drained). Go keeps freed heap resident and
// returns it only slowly, so after a burst (thousands of connections
// opening, a large query, an import) a relay would keep its peak RSS for
// minutes. Three things are worth reclaiming: growth since the last
// release of at least releaseMin and a quarter of the baseline (which
// part of it is garbage is only known after a collection); free spans a
// collection has already left, of at least releaseMin and a quarter of
// the heap objects; and what the relay dropped, of at least releaseMin
// and a quarter of the heap objects. The last is what a quiet relay
// needs: a release made while the out-queues were full sets a baseline
// that includes them, and when their connections close nothing is
// allocated, so neither the heap figures nor the collector's own pacing
// would ever notice (measured: 1.1 GiB of closed connections' queues
// still held 70 s later). And the burst must be over: less allocated
// since the last check than a quarter of what would be reclaimed, so that
// a busy relay is not made to collect over and over.
func worthReleasing(h heap, baseline, allocatedSince, dropped uint64) bool {
	var grown uint64
	if h.resident() > baseline {
		grown = h.resident() - baseline
	}
	var r uint64
	if grown >= releaseMin && grown >= baseline/4 {
		r = grown
	}
	if h.free >= releaseMin && h.free >= h.objects/4 {
		r = max(r, h.free)
	}
	if dropped >= releaseMin && dropped >= h.objects/4 {
		r = max(r, dropped)
	}
	return r > 0 && allocatedSince < r/4
}

// quietChecks is how many checks in a row must find the heap worth
// releasing: transient state is often dropped a little after a burst
// ends (out-queue segments are trimmed a sweep or two after a
// subscription's EOSE), and a release before that would keep it resident
// (it becomes garbage only after the release, and a later collection
// frees it without the footprint growing, so no release would follow).
const quietChecks = 2

// releaseCostShare bounds the time spent releasing: after a release that
// cost d, the next one waits at least releaseCostShare*d (so at most 1%
// of one core goes to releases, however large the heap). d is the
// release's wall time or the process's CPU time over it, the smaller: a
// relay descheduled in the middle of a release (a starved machine) must
// not count the time it did not run as the release's cost, or one slow
// release would hold back the next for minutes.
const releaseCostShare = 100

// processCPU returns the CPU time the process has used (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapWatch reads the runtime's heap figures (runtime/metrics: no
// stop-the-world, unlike runtime.ReadMemStats) and releases when
// worthReleasing says so. Not safe for concurrent use.
type heapWatch struct {
	// held, if not nil, reports the bytes the relay holds for its
	// connections (see applyRuntime).
	held func() uint64
	// busy, if not nil, reports whether the relay has EVENTs waiting for
	// their OK. A release due then waits for a check that finds none:
	// debug.FreeOSMemory collects and then returns every free page
	// without yielding the processor, and on a relay with one core every
	// EVENT arriving meanwhile waits behind it (measured on a ladder:
	// refusals at 3,000-4,000 events/s that went away with releases off,
	// issue 19). With EVENTs arriving at a rate r and each in flight for
	// a time d, a check finds none in flight with probability about
	// exp(-r*d): most checks on a quiet relay, hardly any under load,
	// where the runtime's own scavenger returns memory a little at a time.
	busy       func() bool
	deferred   uint64 // releases put off because the relay was busy (for tests)
	heldPeak   uint64 // the most held since the last release
	samples    []metrics.Sample
	baseline   uint64 // resident footprint after the last release
	lastAllocs uint64
	streak     int       // checks in a row that found a release worth it
	notBefore  time.Time // no release before this (releaseCostShare)
	// cpu reports the process's CPU time; processCPU if nil (tests set it).
	cpu func() time.Duration
}

func (w *heapWatch) read() heap {
	if w.samples == nil {
		w.samples = []metrics.Sample{
			{Name: "/memory/classes/heap/free:bytes"},
			{Name: "/memory/classes/heap/objects:bytes"},
			{Name: "/gc/heap/allocs:bytes"},
		}
	}
	metrics.Read(w.samples)
	return heap{
		free:    w.samples[0].Value.Uint64(),
		objects: w.samples[1].Value.Uint64(),
		allocs:  w.samples[2].Value.Uint64(),
	}
}

// release is what one release did.
type release struct {
	before, after uint64        // resident heap footprint
	took          time.Duration // the collection and the release, wall time
	cost          time.Duration // took, or the process's CPU time over it if less
}

// check reads the heap and releases if it is worth it. The first check
// only sets the baseline.
func (w *heapWatch) check(now time.Time) (release, bool) {
	h := w.read()
	since := h.allocs - w.lastAllocs
	first := w.lastAllocs == 0
	w.lastAllocs = h.allocs
	var held, dropped uint64
	if w.held != nil {
		held = w.held()
		w.heldPeak = max(w.heldPeak, held)
		dropped = w.heldPeak - held
	}
	if first {
		w.baseline = h.resident()
		return release{}, false
	}
	if h.resident() < w.baseline {
		w.baseline = h.resident() // the runtime returned memory itself
	}
	if !worthReleasing(h, w.baseline, since, dropped) {
		w.streak = 0
		return release{}, false
	}
	if w.streak++; w.streak < quietChecks || now.Before(w.notBefore) {
		return release{}, false
	}
	if w.busy != nil && w.busy() {
		w.deferred++ // the streak stands: the next idle check releases
		return release{}, false
	}
	w.streak = 0
	cpu := w.cpu
	if cpu == nil {
		cpu = processCPU
	}
	start, cpuStart := time.Now(), cpu()
	releaseHeap()
	took := time.Since(start)
	cost := min(took, max(cpu()-cpuStart, 0))
	w.notBefore = now.Add(releaseCostShare * cost)
	after := w.read()
	w.lastAllocs, w.baseline = after.allocs, after.resident()
	w.heldPeak = held
	return release{before: h.resident(), after: after.resident(), took: took, cost: cost}, true
}

// releaseHeap collects twice and returns every free page to the OS. One
// collection is not enough for what a quiet relay most needs to return:
// the out-queue segments of connections that closed or drained wait in
// sync.Pools (relay.segPool), and a collection only moves a pool's
// contents to its victim generation, still referenced; the next one frees
// them. After a release nothing may trigger that next collection (no
// allocation, no drop left to notice), so a single one left the segments
// held indefinitely (measured: 67 MiB live 60 s after 100 never-reading
// subscribers closed, against 7 MiB before they came; the reliability
// battery's slow-subscriber test). The second collection marks only what
// the first left live, which on a quiet relay is small.
func releaseHeap() {
	runtime.GC()
	debug.FreeOSMemory()
}
