package relay

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
)

// outboxModel is one out-queue under test with what it should write.
type outboxModel struct {
	o            outbox
	want, got    bytes.Buffer
	queued       [numCats]int
	queuedFrames [numCats]int
	inflight     []byte // a chunk taken and not yet written (nil: none)
}

// TestOutboxSegments drives three out-queues with random frames of random
// categories and sizes (small control frames to frames over segMax),
// interleaving writes the way flushers do: a chunk taken from one queue is
// written only later, while the others append, take and drain (and so take
// segments from the shared pool). It checks that the bytes each queue
// writes are exactly the frames appended to it, in order (a segment
// pooled while a write still reads it would corrupt them), that the
// per-category accounting always equals what is still queued, and that
// a drained out-queue holds no buffer.
func TestOutboxSegments(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		var ms [3]outboxModel
		prefix := `["EVENT","s",`
		write := func(m *outboxModel) {
			m.got.Write(m.inflight)
			m.inflight = nil
			m.o.doneChunk()
		}
		for step := 0; step < 6000; step++ {
			m := &ms[rng.IntN(len(ms))]
			o := &m.o
			switch r := rng.IntN(10); {
			case r < 6:
				cat := uint8(rng.IntN(int(numCats)))
				size := 1 + rng.IntN(300)
				if rng.IntN(50) == 0 {
					size = segMax + rng.IntN(3*segMax) // bigger than a segment
				}
				raw := bytes.Repeat([]byte{byte('a' + step%26)}, size)
				var frame []byte
				if cat == catControl {
					frame = appendWSHeader(nil, opText, len(raw))
					frame = append(frame, raw...)
					o.appendFrame(cat, raw)
				} else {
					n := len(prefix) + len(raw) + 1
					frame = appendWSHeader(nil, opText, n)
					frame = append(append(append(frame, prefix...), raw...), ']')
					if got := o.appendEventFrame(cat, prefix, raw); got != len(frame) {
						t.Fatalf("seed %d: appendEventFrame size %d, want %d", seed, got, len(frame))
					}
				}
				m.want.Write(frame)
				m.queued[cat] += len(frame)
				m.queuedFrames[cat]++
			case r < 9:
				if m.inflight != nil {
					write(m)
					continue
				}
				var rel [numCats]int
				chunk := o.takeChunk(&rel)
				if chunk == nil {
					if o.pending() {
						t.Fatalf("seed %d: nothing taken while pending", seed)
					}
					continue
				}
				for c := range rel {
					m.queued[c] -= rel[c]
				}
				m.inflight = chunk
				if rng.IntN(3) == 0 { // appends while the write is in progress
					o.appendFrame(catControl, []byte("x"))
					frame := append(appendWSHeader(nil, opText, 1), 'x')
					m.want.Write(frame)
					m.queued[catControl] += len(frame)
					m.queuedFrames[catControl]++
				}
				if rng.IntN(2) == 0 {
					write(m)
				}
			default:
				// An out-queue with nothing queued and no write in
				// progress holds no buffer: the drain returned them.
				if m.inflight == nil && !o.pending() {
					if n := o.bufferBytes(); n != 0 || o.first != nil || o.last != nil || o.spare != nil {
						t.Fatalf("seed %d step %d: drained out-queue holds %d bytes of buffers", seed, step, n)
					}
				}
			}
			for c := range m.queued {
				if o.bytes[c] != m.queued[c] {
					t.Fatalf("seed %d step %d: category %d accounts %d bytes, %d queued", seed, step, c, o.bytes[c], m.queued[c])
				}
			}
		}
		for i := range ms {
			m := &ms[i]
			o := &m.o
			if m.inflight != nil {
				write(m)
			}
			for {
				var rel [numCats]int
				chunk := o.takeChunk(&rel)
				if chunk == nil {
					break
				}
				m.got.Write(chunk)
				o.doneChunk()
			}
			if !bytes.Equal(m.got.Bytes(), m.want.Bytes()) {
				t.Fatalf("seed %d queue %d: wrote %d bytes, appended %d, or in another order", seed, i, m.got.Len(), m.want.Len())
			}
			for c := range o.bytes {
				if o.bytes[c] != 0 || o.frames[c] != 0 {
					t.Fatalf("seed %d: drained out-queue still accounts %d bytes / %d frames in category %d", seed, o.bytes[c], o.frames[c], c)
				}
			}
			if o.first != nil || o.last != nil || o.spare != nil || o.bufferBytes() != 0 {
				t.Fatalf("seed %d: drained out-queue kept its segments", seed)
			}
		}
	}
}

// TestSegPool: only segments of the standard sizes are pooled, and a
// pooled segment comes back empty.
func TestSegPool(t *testing.T) {
	for c, want := range map[int]int{
		segMin / 2: -1, segMin - 1: -1, segMin: 0, segMin + 1: -1, 2 * segMin: 1,
		3 * segMin: -1, segMax: segClasses - 1, segMax + 1: -1, 2 * segMax: -1,
	} {
		if got := segClass(c); got != want {
			t.Errorf("segClass(%d) = %d, want %d", c, got, want)
		}
	}
	t0 := newSeg(4 * segMin)
	t0.b = append(t0.b, "frames"...)
	t0.off = 3
	t0.markers = append(t0.markers, marker{cat: catLive, end: 6, frames: 1})
	freeSeg(t0)
	t1 := newSeg(4 * segMin) // t0 again, unless a GC emptied the pool
	if len(t1.b) != 0 || cap(t1.b) != 4*segMin || t1.off != 0 || len(t1.markers) != 0 || t1.mhead != 0 {
		t.Fatalf("segment from the pool not empty: len %d cap %d off %d markers %d", len(t1.b), cap(t1.b), t1.off, len(t1.markers))
	}
	odd := &seg{b: make([]byte, 0, segMax+100)}
	freeSeg(odd)
	if got := newSeg(segMax + 100); got == odd {
		t.Fatal("a segment of a non-standard size was pooled")
	}
}

// TestOutboxStuck: the sweeper's "not reading" rule. Output that waits
// with no write progress past the limit is stuck; exactly at the limit it
// is not; while the session waits for a flusher (the relay's own
// backlog) it is not, however long; bytes the transport holds count as
// waiting; an idle out-queue is never stuck.
func TestOutboxStuck(t *testing.T) {
	const limit = 30 * time.Second
	t0 := time.Unix(1_800_000_000, 0)
	var o outbox
	o.touch(t0)
	if o.stuck(t0.Add(time.Hour), limit) {
		t.Fatal("an idle out-queue is stuck")
	}
	o.appendRawFrame(appendWSHeader(nil, opPing, 0))
	o.touch(t0) // account stamps the real clock; the test's clock starts here
	if o.stuck(t0.Add(limit), limit) {
		t.Fatal("stuck exactly at the limit")
	}
	if !o.stuck(t0.Add(limit+time.Nanosecond), limit) {
		t.Fatal("not stuck one nanosecond past the limit")
	}
	o.scheduled.Store(true)
	if o.stuck(t0.Add(10*limit), limit) {
		t.Fatal("stuck while waiting for a flusher")
	}
	o.scheduled.Store(false)
	var rel [numCats]int
	if o.takeChunk(&rel) == nil {
		t.Fatal("nothing to take")
	}
	o.inTransp.Store(6) // handed to a transport that could not write it
	o.doneChunk()
	if o.pending() {
		t.Fatal("still pending after the chunk")
	}
	if !o.stuck(t0.Add(limit+time.Nanosecond), limit) {
		t.Fatal("bytes held by the transport past the limit: not stuck")
	}
	o.touch(t0.Add(limit)) // Written: progress
	if o.stuck(t0.Add(limit+time.Nanosecond), limit) {
		t.Fatal("stuck right after progress")
	}
}
