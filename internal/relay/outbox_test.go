package relay

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestOutboxSegments drives an out-queue with random frames of random
// categories and sizes (small control frames to frames over segMax),
// interleaving writes the way a flusher does, and checks that the bytes
// written are exactly the frames appended, in order, and that the
// per-category accounting always equals what is still queued.
func TestOutboxSegments(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		var o outbox
		var want, got bytes.Buffer
		var queued [numCats]int
		var queuedFrames [numCats]int
		var released [numCats]int
		prefix := `["EVENT","s",`
		for step := 0; step < 3000; step++ {
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
				want.Write(frame)
				queued[cat] += len(frame)
				queuedFrames[cat]++
			case r < 9:
				var rel [numCats]int
				chunk := o.takeChunk(&rel)
				if chunk == nil {
					if o.pending() {
						t.Fatalf("seed %d: nothing taken while pending", seed)
					}
					continue
				}
				got.Write(chunk)
				for c := range rel {
					queued[c] -= rel[c]
					released[c] += rel[c]
				}
				if rng.IntN(3) == 0 { // appends while the write is in progress
					o.appendFrame(catControl, []byte("x"))
					frame := append(appendWSHeader(nil, opText, 1), 'x')
					want.Write(frame)
					queued[catControl] += len(frame)
					queuedFrames[catControl]++
				}
				o.doneChunk()
			default:
				o.trimIdle()
			}
			for c := range queued {
				if o.bytes[c] != queued[c] {
					t.Fatalf("seed %d step %d: category %d accounts %d bytes, %d queued", seed, step, c, o.bytes[c], queued[c])
				}
			}
		}
		for {
			var rel [numCats]int
			chunk := o.takeChunk(&rel)
			if chunk == nil {
				break
			}
			got.Write(chunk)
			o.doneChunk()
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("seed %d: wrote %d bytes, appended %d, or in another order", seed, got.Len(), want.Len())
		}
		for c := range o.bytes {
			if o.bytes[c] != 0 || o.frames[c] != 0 {
				t.Fatalf("seed %d: drained out-queue still accounts %d bytes / %d frames in category %d", seed, o.bytes[c], o.frames[c], c)
			}
		}
		o.trimIdle()
		o.trimIdle()
		if o.segs != nil || o.spare != nil {
			t.Fatalf("seed %d: idle out-queue kept its segments", seed)
		}
	}
}
