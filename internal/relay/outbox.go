package relay

import (
	"encoding/binary"
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
	// maxWriteChunk is the most bytes handed to the transport in one Write.
	maxWriteChunk = 256 << 10
	// markerMax is the most bytes one accounting marker covers.
	markerMax = 64 << 10
	// keepBufCap: an emptied out-queue keeps its buffer up to this size,
	// so a busy connection does not reallocate and regrow it at every
	// flush (measured: growslice and the GC assists it caused were a third
	// of fan-out CPU). The sweeper drops the buffer of an out-queue that
	// stayed empty since its previous pass (trimIdle), so an idle
	// connection costs little.
	keepBufCap = 64 << 10
	// idleBufCap: the sweeper leaves an idle out-queue at most this much
	// buffer.
	idleBufCap = 512
	// controlBacklogFactor times OutQueueBytes of unwritten control frames
	// means the client is not reading its answers: the connection closes.
	controlBacklogFactor = 4
)

// marker accounts a run of consecutive frames of one category in outbox.buf.
type marker struct {
	cat    uint8
	end    int // offset in buf just past the run
	frames int
}

// outbox is a connection's bounded out-queue: WebSocket frames waiting to
// be handed to the transport, in order, with per-category accounting. It
// is guarded by mu; the flusher takes a prefix, writes it outside the lock,
// then releases it.
type outbox struct {
	mu      sync.Mutex
	buf     []byte   // frames; buf[off:] is unwritten
	off     int      // start of unwritten bytes
	markers []marker // runs covering buf[off:], in order
	mhead   int      // first live marker in markers
	writing bool     // a flusher holds buf[off:off+n] outside the lock
	wasIdle bool     // empty at the sweeper's previous pass
	bytes   [numCats]int
	frames  [numCats]int
	// heldBytes and heldFrames count the live events matched by this
	// connection's subscriptions still in their stored phase (sub.held):
	// they are not in buf yet but count against the live budget.
	heldBytes  int
	heldFrames int
	peak       queuePeaks // high-water marks, for Relay.QueueStats

	scheduled atomic.Bool  // queued on (or running in) the flusher
	inTransp  atomic.Int64 // bytes handed to the transport, not yet on the wire
	progress  atomic.Int64 // unix nanos of the last write progress
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

// account records n bytes (one frame) of category cat appended at the end
// of buf. o.mu must be held.
func (o *outbox) account(cat uint8, n int) {
	o.bytes[cat] += n
	o.frames[cat]++
	o.notePeaks()
	if len(o.markers) > o.mhead {
		m := &o.markers[len(o.markers)-1]
		start := o.off
		if len(o.markers)-1 > o.mhead {
			start = o.markers[len(o.markers)-2].end
		}
		if m.cat == cat && m.end-start < markerMax {
			m.end = len(o.buf)
			m.frames++
			return
		}
	}
	o.markers = append(o.markers, marker{cat: cat, end: len(o.buf), frames: 1})
}

// appendPayload appends one text frame whose payload is built by the
// caller into scratch space: it is used for small control messages.
// o.mu must be held.
func (o *outbox) appendFrame(cat uint8, payload []byte) {
	o.buf = appendWSHeader(o.buf, opText, len(payload))
	o.buf = append(o.buf, payload...)
	o.account(cat, wsHeaderLen(len(payload))+len(payload))
}

// appendEventFrame appends ["EVENT",<subid>,<raw>] using the subscription's
// pre-built prefix `["EVENT","<subid>",`. o.mu must be held.
func (o *outbox) appendEventFrame(cat uint8, prefix, raw []byte) int {
	n := len(prefix) + len(raw) + 1
	o.buf = appendWSHeader(o.buf, opText, n)
	o.buf = append(o.buf, prefix...)
	o.buf = append(o.buf, raw...)
	o.buf = append(o.buf, ']')
	total := wsHeaderLen(n) + n
	o.account(cat, total)
	return total
}

// appendRaw appends a pre-built frame (ping, close) as control.
// o.mu must be held.
func (o *outbox) appendRawFrame(frame []byte) {
	o.buf = append(o.buf, frame...)
	o.account(catControl, len(frame))
}

// hold adds n bytes and frames (negative: removes them) to the live
// events held by subscriptions in their stored phase. o.mu must be held.
func (o *outbox) hold(n, frames int) {
	o.heldBytes += n
	o.heldFrames += frames
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
	p.liveFrames = max(p.liveFrames, o.frames[catLive]+o.heldFrames)
	p.liveBytes = max(p.liveBytes, o.bytes[catLive]+o.heldBytes)
	p.stored = max(p.stored, o.bytes[catStored])
	p.control = max(p.control, o.bytes[catControl])
}

// pending reports whether anything is queued. o.mu must be held.
func (o *outbox) pending() bool { return len(o.buf) > o.off }

// takeChunk returns the next bytes to write: whole marker runs from the
// front, at most maxWriteChunk (but at least one run). It returns nil when
// nothing is queued or a write is already in progress. The accounting for
// the returned bytes is released at once: they now belong to the
// transport. o.mu must be held; the caller must call doneChunk.
func (o *outbox) takeChunk(released *[numCats]int) []byte {
	if o.writing || o.off >= len(o.buf) {
		return nil
	}
	end := o.off
	i := o.mhead
	for i < len(o.markers) {
		m := o.markers[i]
		if end > o.off && m.end-o.off > maxWriteChunk {
			break
		}
		start := end
		end = m.end
		o.bytes[m.cat] -= end - start
		o.frames[m.cat] -= m.frames
		released[m.cat] += end - start
		i++
	}
	o.mhead = i
	chunk := o.buf[o.off:end:end]
	o.off = end
	o.writing = true
	o.wasIdle = false
	return chunk
}

// doneChunk ends a write started by takeChunk and compacts the buffer.
// o.mu must be held.
func (o *outbox) doneChunk() {
	o.writing = false
	if o.off == len(o.buf) {
		if cap(o.buf) > keepBufCap {
			o.buf = nil
		} else {
			o.buf = o.buf[:0]
		}
		o.off = 0
		o.markers = nil
		o.mhead = 0
	} else if o.off > len(o.buf)/2 && o.off > 4096 {
		// compact: move the unwritten tail to the front.
		n := copy(o.buf, o.buf[o.off:])
		shift := o.off
		o.buf = o.buf[:n]
		o.off = 0
		k := copy(o.markers, o.markers[o.mhead:])
		o.markers = o.markers[:k]
		o.mhead = 0
		for j := range o.markers {
			o.markers[j].end -= shift
		}
	}
}

// trimIdle drops the buffer of an out-queue that has been empty since the
// previous call (so a connection that is actively written keeps its
// buffer). o.mu must be held.
func (o *outbox) trimIdle() {
	if o.pending() || o.writing {
		o.wasIdle = false
		return
	}
	if o.wasIdle && cap(o.buf) > idleBufCap {
		o.buf = nil
	}
	o.wasIdle = true
}

// touch records write progress now.
func (o *outbox) touch(now time.Time) { o.progress.Store(now.UnixNano()) }
