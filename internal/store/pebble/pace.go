package pebble

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// pacer decides what a flush or compaction does after each block it
// writes (yieldfs.go): give the processor back (runtime.Gosched), or,
// while the relay is committing events, sleep Options.BackgroundPause.
//
// Why: with Go code on one processor, a 64 MiB memtable flush (230-320
// ms) and the L0 compaction after it (430-640 ms) take two thirds of
// the processor while they run, even yielding after every
// block: the request path (read, verify, commit, answer) then gets less
// than it needs, its goroutines queue, and every OK of the second or so
// that the flush and compaction last takes 5-25 ms. On a one-core relay
// at 3,000 events/s those windows, every 6 s, were the whole OK p99
// (11.3-11.8 ms on tmpfs; 3.7-3.9 ms with a 200 µs pause after every
// block, docs/BENCHMARKS.md, issue 19). Pausing lets the request path
// have the processor first; the flush and compaction take longer (a
// 64 MiB flush a median 1.5-2.5 s instead of 0.4-0.6 over a ladder),
// which the memtables' headroom absorbs until the pressure limits below.
//
// The pause is also the background's share of a busy processor. A
// goroutine that yields (runtime.Gosched) waits on the global run queue,
// which a processor whose local queue never empties reads only every
// 61st scheduling round, while one woken by its sleep's timer takes the
// processor's run-next slot: at 5,000 events/s on one core a yielding
// flush took 14.4 s and commits stalled, a pausing one 1.8-2.8 s with
// no stall. Yet giving the flush more under pressure (no yield, a 1 µs
// sleep instead of the yield, or the pause) was no better in a ladder
// each, and pausing only while another goroutine is runnable was worse
// at every rate (docs/BENCHMARKS.md, issue 19, twentieth sitting).
//
// While pebble stalls commits, the background neither pauses nor yields
// (afterBlock). The pause stops before the background falls far behind:
// it is skipped while pebble is under write pressure (a memtable's worth waiting beside
// the one flushing and the one filling, or L0 deep enough that writes
// would soon stall), while the store is not committing (an idle relay, a
// tool, Close), and when no pause is configured.
type pacer struct {
	pause        time.Duration
	memtableSize uint64
	// busyWindow is how recent the last commit must be for the relay to
	// count as committing.
	busyWindow time.Duration
	// lastCommit is when the writer last committed, as time since
	// paceEpoch (monotonic); 0: never.
	lastCommit atomic.Int64
	// quiet is set at Close: the final flush runs at full speed.
	quiet atomic.Bool

	// pressure is pebble's write pressure, read at most every
	// pressureEvery from metrics (the store's db.Metrics, set once pebble
	// is open: a compaction may already run before).
	metrics       atomic.Pointer[func() *pebble.Metrics]
	pressureEvery time.Duration
	mu            sync.Mutex
	checked       time.Duration // since paceEpoch, when pressure was read
	pressure      atomic.Bool

	// stallStart is the store's events.stallStart: not 0 while pebble
	// stalls commits, when the background neither pauses nor yields.
	// nil: never stalled (a pacer without a store, in tests).
	stallStart *atomic.Int64

	yields, pauses, runs atomic.Uint64 // counted for tests
}

// paceEpoch is the pacer's monotonic time origin.
var paceEpoch = time.Now()

const (
	defaultBusyWindow    = 50 * time.Millisecond
	defaultPressureEvery = 100 * time.Millisecond
	// Pressure: the memtable bytes pebble holds (the mutable one
	// included), in memtable sizes, and L0's sublevels at which the pause
	// stops. Pebble stops writes at 4 memtable sizes (the store's
	// MemTableStopWritesThreshold) and the store at 24 L0 files (Open),
	// and L0 is compacted from 4. Bytes, not memtables: pebble's first
	// memtables are small (256 KiB, doubling), and its first flush
	// takes eight of them at once.
	pressureMemtables   = 3
	pressureL0Sublevels = 8
)

func newPacer(pause time.Duration, memtableSize uint64) *pacer {
	return &pacer{pause: pause, memtableSize: memtableSize, busyWindow: defaultBusyWindow, pressureEvery: defaultPressureEvery}
}

// BackgroundPause is the pause after each block a flush or compaction
// writes while the store commits (Options.BackgroundPause); 0: none, the
// background only yields.
func (s *Store) BackgroundPause() time.Duration { return max(s.pace.pause, 0) }

// committed records a commit of the writer.
func (p *pacer) committed() {
	if p.pause > 0 {
		p.lastCommit.Store(int64(time.Since(paceEpoch)))
	}
}

// afterBlock is called by a flush or compaction after each block it
// writes: it pauses or yields, or, while pebble stalls commits, goes on.
//
// During a write stall no commit can complete until a flush or
// compaction frees room, so the background is the request path's own
// critical path: yielding would put it behind the goroutines that read,
// verify and refuse the events arriving meanwhile (on a busy processor
// a yielding goroutine waits for the global run queue, see pacer), and
// the stall would last longer. It runs until Go preempts it. On one
// core, in ladders at 7,000-10,000 events/s offered, the longest stall of
// a run was 1.10-1.71 s in six runs against 1.32-3.44 s (median 2.40)
// in eight yielding ones, and none of the six stopped early where four
// of the eight refused 26-37% at 7,000 or 8,000 (docs/BENCHMARKS.md,
// issue 19).
func (p *pacer) afterBlock() {
	if p.stallStart != nil && p.stallStart.Load() != 0 {
		p.runs.Add(1)
		return
	}
	if p.shouldPause() {
		p.pauses.Add(1)
		time.Sleep(p.pause)
		return
	}
	p.yields.Add(1)
	runtime.Gosched()
}

func (p *pacer) shouldPause() bool {
	if p.pause <= 0 || p.quiet.Load() {
		return false
	}
	last := p.lastCommit.Load()
	now := time.Since(paceEpoch)
	if last == 0 || now-time.Duration(last) > p.busyWindow {
		return false
	}
	return !p.underPressure(now)
}

// underPressure reports pebble's write pressure, read from its metrics
// at most every pressureEvery (a background goroutine asks; the answer
// may be that old).
func (p *pacer) underPressure(now time.Duration) bool {
	metrics := p.metrics.Load()
	if metrics == nil {
		return false
	}
	if p.mu.TryLock() {
		if now-p.checked >= p.pressureEvery || p.checked == 0 {
			p.checked = now
			m := (*metrics)()
			p.pressure.Store(m.MemTable.Size >= pressureMemtables*p.memtableSize || m.Levels[0].Sublevels >= pressureL0Sublevels)
		}
		p.mu.Unlock()
	}
	return p.pressure.Load()
}
