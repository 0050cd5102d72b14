package mempool

import (
	"testing"
)

// TestAlignedIndex (petrel patch 13): the pool alignedIndex picks for
// every size up to the largest pooled buffer is the smallest pool whose
// buffers hold it, as the table init used to fill said; and a buffer from
// Malloc(size) has that pool's capacity and goes back to the same pool.
func TestAlignedIndex(t *testing.T) {
	for size := 0; size <= maxAlignedBufferSize; size++ {
		want := byte(0xFF)
		for i := 0; i < alignedPoolBucketNum; i++ {
			if size <= 1<<(i+minAlignedBufferSizeBits) {
				want = byte(i)
				break
			}
		}
		if got := alignedIndex(size); got != want {
			t.Fatalf("alignedIndex(%d) = %d, want %d", size, got, want)
		}
	}
	amp := NewAligned()
	for _, size := range []int{0, 1, 32, 33, 64, 65, 1000, 1024, 1025, 32767, 32768} {
		pbuf := amp.Malloc(size)
		if len(*pbuf) != size {
			t.Fatalf("Malloc(%d): len %d", size, len(*pbuf))
		}
		if want := 1 << (int(alignedIndex(size)) + minAlignedBufferSizeBits); cap(*pbuf) != want {
			t.Fatalf("Malloc(%d): cap %d, want %d", size, cap(*pbuf), want)
		}
		amp.Free(pbuf)
	}
}
