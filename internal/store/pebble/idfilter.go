package pebble

import (
	"encoding/binary"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// idFilter is an in-memory Bloom filter over the ids that have NIP-09
// tombstones (D keys), so that saving an event costs no tombstone lookup
// unless its id may have one. Ids are SHA-256 hashes, so their bytes serve
// as the hash functions; a ground id only costs a false positive (one
// lookup), never a wrong answer. The filter is sized at open from the
// number of tombstones; it only grows less precise as tombstones are added
// until the next open. Used by the writer goroutine only.
type idFilter struct {
	bits []uint64
	mask uint64
}

const idFilterHashes = 4

// newIDFilter returns a filter sized for n ids (at least 8 Mi bits).
func newIDFilter(n int) *idFilter {
	m := uint64(1 << 23)
	for m < uint64(n)*16 {
		m <<= 1
	}
	return &idFilter{bits: make([]uint64, m/64), mask: m - 1}
}

func (f *idFilter) add(id *nostr.ID) {
	for i := 0; i < idFilterHashes; i++ {
		h := binary.LittleEndian.Uint64(id[8*i:]) & f.mask
		f.bits[h/64] |= 1 << (h % 64)
	}
}

func (f *idFilter) mayContain(id *nostr.ID) bool {
	for i := 0; i < idFilterHashes; i++ {
		h := binary.LittleEndian.Uint64(id[8*i:]) & f.mask
		if f.bits[h/64]&(1<<(h%64)) == 0 {
			return false
		}
	}
	return true
}
