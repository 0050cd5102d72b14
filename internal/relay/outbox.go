package relay

import (
	"encoding/binary"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// frame categories. The out-queue accounts bytes and frames per category
// because each has its own bound:
//   - catLive: live events; capped by OutQueueFrames/OutQueueBytes, overflow
//     closes the subscription with CLOSED.
//   - catStored: stored-query results; capped by QueryBytesPerConn and
//     QueryBytesTotal, reaching the cap pauses the query.
//   - catControl: OK, EOSE, CLOSED, NOTICE, AUTH, COUNT, NEG-*; never
//     dropped, but a connection whose control backlog passes
//     controlBacklogFactor*OutQueueBytes is closed (it is not reading).
const (
	catControl uint8 = iota
	catLive
	catStored
	numCats
)

const (
	// transportLowWater: the out-queue hands bytes to the transport only
	// while the transport holds less than this, so that bytes stay in the
	// out-queue where they are counted, coalesced and can be refused.
	transportLowWater = 64 << 10
	// segMin and segMax bound the size of the out-queue's segments: the
	// first segment of a burst is small (one event to ten thousand idle
	// subscribers must not cost ten thousand big buffers), and each new
	// one doubles up to segMax. A frame larger than segMax gets a segment
	// of its own size.
	segMin = 1 << 10
	segMax = 32 << 10
	// controlBacklogFactor times OutQueueBytes of unwritten control frames
	// means the client is not reading its answers: the connection closes.
	controlBacklogFactor = 4
)

// marker accounts a run of consecutive frames of one category in a
// segment.
type marker struct {
	cat    uint8
	end    int // offset in the segment just past the run
	frames int
}

// seg is one segment of an out-queue: whole frames, in order. Segments are
// never reallocated or copied once written: an out-queue grows by adding
// segments (measured: regrowing one contiguous buffer, and the GC work it
// caused, was a third of the CPU of a 1000-event REQ and of a fan-out).
type seg struct {
	b       []byte   // frames; b[off:] is unwritten
	off     int      // start of unwritten bytes
	markers []marker // runs covering b[off:], in order
	mhead   int      // first live marker
	next    *seg     // the next newer segment of its out-queue
}

// reset empties s for reuse.
func (s *seg) reset() {
	s.b = s.b[:0]
	s.off = 0
	s.markers = s.markers[:0]
	s.mhead = 0
	s.next = nil
}

// segPool recycles the segments of the standard sizes (segMin, 2*segMin,
// ..., segMax) that a burst has finished with (popHead), one pool per size:
// under fan-out every connection takes a run of growing segments per
// burst, and allocating them afresh made the GC a tenth of the relay's CPU
// (1,000 subscribers x 200 events). A drained out-queue returns all its
// segments here (release), so an idle connection holds none; what the pool
// holds is not per connection, and the GC empties it when it is not used.
var segPool [segClasses]sync.Pool

const segClasses = 6 // log2(segMax/segMin) + 1

// segClass returns the pool index of a segment capacity, or -1 if it is
// not a standard size.
func segClass(c int) int {
	if c < segMin || c > segMax || c&(c-1) != 0 {
		return -1
	}
	return bits.TrailingZeros(uint(c)) - bits.TrailingZeros(uint(segMin))
}

// newSeg returns an empty segment of capacity size, from the pool when
// size is a standard one.
func newSeg(size int) *seg {
	if k := segClass(size); k >= 0 {
		if t, _ := segPool[k].Get().(*seg); t != nil {
			return t
		}
	}
	return &seg{b: make([]byte, 0, size)}
}

// freeSeg returns a segment nothing refers to any more to the pool.
func freeSeg(t *seg) {
	if k := segClass(cap(t.b)); k >= 0 {
		t.reset()
		segPool[k].Put(t)
	}
}

// outbox is a connection's bounded out-queue: WebSocket frames waiting to
// be handed to the transport, in order, with per-category accounting. It
// is guarded by mu; the flusher takes a prefix, writes it outside the lock,
// then releases it.
type outbox struct {
	mu sync.Mutex
	// The segments, oldest first, linked by seg.next; the last takes
	// appends. A list, not a slice: a drained out-queue holds nothing,
	// and a slice would be allocated again at every burst's start.
	first, last *seg
	spare       *seg // an emptied segment kept for reuse
	bytes       [numCats]int
	frames      [numCats]int
	// heldBytes and heldFrames count the live events matched by this
	// connection's subscriptions still in their stored phase (sub.held):
	// they are not in buf yet but count against the live budget.
	heldBytes int
	peak      queuePeaks // high-water marks, for Relay.QueueStats

	// The small fields share one word (Session's size class: TestSizes).
	heldFrames int32        // at most OutQueueFrames
	nextSeg    int32        // size of the next new segment (at most segMax)
	scheduled  atomic.Bool  // queued on (or running in) the flusher
	writing    bool         // a flusher holds part of the first segment outside the lock; o.mu
	touched    bool         // in the dispatcher's list of sessions to flush; dispatcher only
	zbits      uint8        // permessage-deflate window bits, 0: off; set before Start (compress.go)
	inTransp   atomic.Int64 // bytes handed to the transport, not yet on the wire
	progress   atomic.Int64 // unix nanos of the last write progress
	// queued mirrors the sum of bytes and heldBytes for readers that do
	// not take mu (Relay.OutQueueBytes); written only under mu.
	queued atomic.Int64
}

// wsHeaderLen returns the length of a server (unmasked) frame header for a
// payload of n bytes.
func wsHeaderLen(n int) int {
	switch {
	case n < 126:
		return 2
	case n <= 0xffff:
		return 4
	}
	return 10
}

// appendWSHeader appends a FIN text (opcode) frame header for n bytes.
func appendWSHeader(dst []byte, opcode byte, n int) []byte {
	switch {
	case n < 126:
		return append(dst, 0x80|opcode, byte(n))
	case n <= 0xffff:
		return append(dst, 0x80|opcode, 126, byte(n>>8), byte(n))
	}
	var b [10]byte
	b[0], b[1] = 0x80|opcode, 127
	binary.BigEndian.PutUint64(b[2:], uint64(n))
	return append(dst, b[:]...)
}

const (
	opText  = 0x1
	opClose = 0x8
	opPing  = 0x9
	opPong  = 0xA
)

// tail returns the segment that takes the next n bytes, adding one if
// needed. o.mu must be held.
func (o *outbox) tail(n int) *seg {
	if t := o.last; t != nil && cap(t.b)-len(t.b) >= n {
		return t
	}
	size := max(int(o.nextSeg), segMin)
	o.nextSeg = int32(min(size*2, segMax))
	var t *seg
	if sp := o.spare; sp != nil && cap(sp.b) >= n && cap(sp.b) >= size/2 {
		o.spare = nil
		sp.reset()
		t = sp
	} else {
		t = newSeg(max(size, n))
	}
	if o.last != nil {
		o.last.next = t
	} else {
		o.first = t
	}
	o.last = t
	return t
}

// account records n bytes (one frame) of category cat just appended to
// segment t. o.mu must be held.
func (o *outbox) account(t *seg, cat uint8, n int) {
	if o.bytes[catControl]+o.bytes[catLive]+o.bytes[catStored] == 0 && o.inTransp.Load() <= 0 {
		// The connection starts sending after being idle: the drain
		// deadline counts from now, not from its last write (which may be
		// hours old; the sweeper would otherwise close it as stuck the
		// moment one frame waits, e.g. its own ping).
		o.progress.Store(time.Now().UnixNano())
	}
	o.bytes[cat] += n
	o.frames[cat]++
	o.queued.Add(int64(n))
	o.notePeaks()
	if len(t.markers) > t.mhead {
		m := &t.markers[len(t.markers)-1]
		if m.cat == cat {
			m.end = len(t.b)
			m.frames++
			return
		}
	}
	t.markers = append(t.markers, marker{cat: cat, end: len(t.b), frames: 1})
}

// appendFrame appends one text frame whose payload the caller built (small
// control messages). o.mu must be held.
func (o *outbox) appendFrame(cat uint8, payload []byte) {
	n := wsHeaderLen(len(payload)) + len(payload)
	t := o.tail(n)
	t.b = appendWSHeader(t.b, opText, len(payload))
	t.b = append(t.b, payload...)
	o.account(t, cat, n)
}

// appendControlFrame appends a frame of another opcode (pong) as control.
// o.mu must be held.
func (o *outbox) appendControlFrame(opcode byte, payload []byte) {
	n := wsHeaderLen(len(payload)) + len(payload)
	t := o.tail(n)
	t.b = appendWSHeader(t.b, opcode, len(payload))
	t.b = append(t.b, payload...)
	o.account(t, catControl, n)
}

// appendEventFrame appends ["EVENT",<subid>,<raw>] using the subscription's
// pre-built prefix `["EVENT","<subid>",`, and returns its size. o.mu must
// be held.
func (o *outbox) appendEventFrame(cat uint8, prefix string, raw []byte) int {
	n := len(prefix) + len(raw) + 1
	total := wsHeaderLen(n) + n
	t := o.tail(total)
	t.b = appendWSHeader(t.b, opText, n)
	t.b = append(t.b, prefix...)
	t.b = append(t.b, raw...)
	t.b = append(t.b, ']')
	o.account(t, cat, total)
	return total
}

// appendRawFrame appends a pre-built frame (ping, close) as control.
// o.mu must be held.
func (o *outbox) appendRawFrame(frame []byte) {
	t := o.tail(len(frame))
	t.b = append(t.b, frame...)
	o.account(t, catControl, len(frame))
}

// hold adds n bytes and frames (negative: removes them) to the live
// events held by subscriptions in their stored phase. o.mu must be held.
func (o *outbox) hold(n, frames int) {
	o.heldBytes += n
	o.heldFrames += int32(frames)
	o.queued.Add(int64(n))
	o.notePeaks()
}

// queuePeaks are one out-queue's high-water marks.
type queuePeaks struct {
	liveFrames, liveBytes int // queued live frames plus held events
	stored, control       int // queued bytes
	transport             int64
}

func (p *queuePeaks) merge(q queuePeaks) {
	p.liveFrames = max(p.liveFrames, q.liveFrames)
	p.liveBytes = max(p.liveBytes, q.liveBytes)
	p.stored = max(p.stored, q.stored)
	p.control = max(p.control, q.control)
	p.transport = max(p.transport, q.transport)
}

// notePeaks updates the high-water marks. o.mu must be held. It costs a
// few compares per queued frame.
func (o *outbox) notePeaks() {
	p := &o.peak
	p.liveFrames = max(p.liveFrames, o.frames[catLive]+int(o.heldFrames))
	p.liveBytes = max(p.liveBytes, o.bytes[catLive]+o.heldBytes)
	p.stored = max(p.stored, o.bytes[catStored])
	p.control = max(p.control, o.bytes[catControl])
}

// pending reports whether anything is queued. o.mu must be held.
func (o *outbox) pending() bool {
	for t := o.first; t != nil; t = t.next {
		if len(t.b) > t.off {
			return true
		}
	}
	return false
}

// takeChunk returns the next bytes to write: the unwritten frames of the
// oldest segment (whole marker runs). It returns nil when nothing is
// queued or a write is already in progress. The accounting for the
// returned bytes is released at once: they now belong to the transport.
// o.mu must be held; the caller must call doneChunk.
func (o *outbox) takeChunk(released *[numCats]int) []byte {
	if o.writing {
		return nil
	}
	for o.first != nil {
		t := o.first
		if t.off < len(t.b) {
			break
		}
		if t == o.last {
			o.release() // nothing queued
			return nil
		}
		o.popHead()
	}
	t := o.first
	if t == nil {
		return nil
	}
	start := t.off
	end := t.off
	for _, m := range t.markers[t.mhead:] {
		o.bytes[m.cat] -= m.end - end
		o.frames[m.cat] -= m.frames
		released[m.cat] += m.end - end
		end = m.end
	}
	o.queued.Add(int64(start - end))
	t.mhead = len(t.markers)
	t.off = end
	o.writing = true
	return t.b[start:end:end]
}

// popHead drops the fully written oldest segment, keeping it as the spare
// when it is the tail (appends continue into it) or of reusable size.
// o.mu must be held.
func (o *outbox) popHead() {
	t := o.first
	if t == o.last {
		t.reset() // the tail: reuse it in place
		return
	}
	o.first = t.next
	t.next = nil
	if o.spare == nil && cap(t.b) <= segMax {
		o.spare = t
	} else {
		freeSeg(t)
	}
}

// doneChunk ends a write started by takeChunk. o.mu must be held.
func (o *outbox) doneChunk() {
	o.writing = false
	if t := o.first; t != nil && t.off == len(t.b) {
		o.popHead()
	}
	if !o.pending() {
		o.release()
	}
}

// release returns the segments of a drained out-queue to the pool, so
// that a connection holds no buffer between bursts: an idle connection's
// out-queue costs only its fields in the Session. The next frame takes a
// small segment again (from the pool, where a busy relay's drained
// segments wait for the next connection that needs one). o.mu must be
// held; nothing may be queued or being written.
func (o *outbox) release() {
	for t := o.first; t != nil; {
		next := t.next
		freeSeg(t)
		t = next
	}
	if o.spare != nil {
		freeSeg(o.spare)
	}
	o.first, o.last, o.spare, o.nextSeg = nil, nil, nil, 0
}

// reset drops everything queued (the connection is gone). o.mu must be
// held.
func (o *outbox) reset() {
	o.first, o.last, o.spare, o.nextSeg = nil, nil, nil, 0
	o.bytes = [numCats]int{}
	o.frames = [numCats]int{}
	o.queued.Store(int64(o.heldBytes))
}

// touch records write progress now.
func (o *outbox) touch(now time.Time) { o.progress.Store(now.UnixNano()) }

// stuck reports whether the connection has stopped reading: output has
// waited (queued, or handed to a transport that cannot write it) with no
// write progress for longer than limit, and the session is not waiting
// for a flusher. While it is queued on (or running in) the flusher, the
// wait is the relay's own backlog, not the client's: at a million
// connections on one box the flushers fell 30-60 s behind a fan-out, and
// the sweeper closed 1,884 connections that were reading
// ("not reading: out-queue stuck", docs/BENCHMARKS.md, issue 14). A
// client that stops reading is still found: its socket fills, the
// transport holds the bytes, and the flusher leaves the session
// unscheduled until Written. o.mu must be held.
func (o *outbox) stuck(now time.Time, limit time.Duration) bool {
	if !o.pending() && o.inTransp.Load() <= 0 {
		return false
	}
	if o.scheduled.Load() {
		return false
	}
	return time.Duration(now.UnixNano()-o.progress.Load()) > limit
}

// bufferBytes returns the capacity of the segments the out-queue holds,
// the spare included. o.mu must be held.
func (o *outbox) bufferBytes() int64 {
	var n int64
	for t := o.first; t != nil; t = t.next {
		n += int64(cap(t.b))
	}
	if o.spare != nil {
		n += int64(cap(o.spare.b))
	}
	return n
}
