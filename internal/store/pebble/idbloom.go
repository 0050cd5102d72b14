package pebble

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// idBloom is a Bloom filter over event ids, safe for concurrent add and
// mayContain. It never answers "absent" for an id it was given; another
// id is reported present only as a false positive (about 0.1% at the
// design density), which costs its user one database lookup. Ids are
// SHA-256 hashes, so their bytes serve as the hash functions; an id
// ground to collide only costs a false positive. The store keeps two:
// the ids of every stored event, for HasAt (seen.go), and the ids that
// have NIP-09 tombstones, for the writer (writer.tombstoned).

// idBloomBitsPerID is the filter's design density: about 0.1% false
// positives with idBloomHashes bits per id in 512-bit blocks.
const idBloomBitsPerID = 16

// idBloomHashes is the number of bits an id sets, all in one 512-bit block
// (one cache line), so a lookup costs one cache miss.
const idBloomHashes = 6

type idBloom struct {
	words    []atomic.Uint64 // 8 words (one block) per id's bits
	blocks   uint64          // a power of two
	capacity int64           // ids at idBloomBitsPerID
	count    atomic.Int64    // ids added (an id added twice counts twice)
}

func newIDBloom(bytes int) *idBloom {
	n := uint64(bytes) / 64
	return &idBloom{words: make([]atomic.Uint64, n*8), blocks: n, capacity: int64(bytes) * 8 / idBloomBitsPerID}
}

// idBloomBytes is the filter size for n ids: the next power of two at
// idBloomBitsPerID, within [least, limit].
func idBloomBytes(n int64, least, limit int) int {
	want := uint64(max(n, 1)) * idBloomBitsPerID / 8
	b := 1 << bits.Len64(want-1)
	return min(max(b, least), limit)
}

// positions returns the id's block and its bits there. Ids are SHA-256
// hashes, so their bytes serve as the hash functions.
func (f *idBloom) positions(id *nostr.ID) (block []atomic.Uint64, h uint64) {
	b := binary.LittleEndian.Uint64(id[0:]) & (f.blocks - 1)
	return f.words[b*8 : b*8+8], binary.LittleEndian.Uint64(id[8:])
}

func (f *idBloom) add(id *nostr.ID) {
	block, h := f.positions(id)
	for range idBloomHashes {
		bit := h & 511
		block[bit/64].Or(1 << (bit % 64))
		h >>= 9
	}
	f.count.Add(1)
}

func (f *idBloom) mayContain(id *nostr.ID) bool {
	block, h := f.positions(id)
	for range idBloomHashes {
		bit := h & 511
		if block[bit/64].Load()&(1<<(bit%64)) == 0 {
			return false
		}
		h >>= 9
	}
	return true
}
