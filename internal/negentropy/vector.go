package negentropy

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
)

// IDSize is the size of an item id in bytes.
const IDSize = 32

// FingerprintSize is the size of a range fingerprint in bytes.
const FingerprintSize = 16

// Item is one element of a reconciled set: for NIP-77, an event's
// created_at and id. Items are ordered by Timestamp, then by ID bytewise.
// Timestamp 2^64-1 is reserved for infinity and cannot be used.
type Item struct {
	Timestamp uint64
	ID        [IDSize]byte
}

// Compare returns -1, 0 or +1 as a sorts before, equal to or after b.
func (a Item) Compare(b Item) int { return compareItems(&a, &b) }

func compareItems(a, b *Item) int {
	if a.Timestamp != b.Timestamp {
		return cmp.Compare(a.Timestamp, b.Timestamp)
	}
	return bytes.Compare(a.ID[:], b.ID[:])
}

// Fingerprint is the 16-byte digest of a range of items.
type Fingerprint [FingerprintSize]byte

// sumStride is how many items one entry of Vector.sums covers: a
// fingerprint adds at most 2*sumStride ids whatever the range's length, at
// a memory cost of 32/sumStride bytes per item.
const sumStride = 64

// Vector is a sorted set of items with the range queries the protocol
// needs. It is immutable after NewVector, so one Vector can serve any
// number of sessions concurrently.
type Vector struct {
	items []Item
	// sums[k] is the sum of the ids of items[:k*sumStride].
	sums []sum256
}

// NewVector makes a Vector of items. It sorts items in place (cheaply when
// they are already ascending, as store.Items returns them) and drops exact
// duplicates; it takes ownership of the slice, which the caller must not
// use afterwards. It fails with ErrReservedTimestamp if an item has
// timestamp 2^64-1.
func NewVector(items []Item) (*Vector, error) {
	sorted, dups := true, false
	for i := range items {
		if items[i].Timestamp == math.MaxUint64 {
			return nil, ErrReservedTimestamp
		}
		if i > 0 && sorted {
			switch c := compareItems(&items[i-1], &items[i]); {
			case c > 0:
				sorted = false
			case c == 0:
				dups = true
			}
		}
	}
	if !sorted {
		slices.SortFunc(items, func(a, b Item) int { return compareItems(&a, &b) })
		dups = true
	}
	if dups {
		items = slices.CompactFunc(items, func(a, b Item) bool { return a == b })
	}
	v := &Vector{items: items, sums: make([]sum256, len(items)/sumStride+1)}
	var s sum256
	for i := range items {
		if i%sumStride == 0 {
			v.sums[i/sumStride] = s
		}
		s.add(&items[i].ID)
	}
	if len(items)%sumStride == 0 {
		v.sums[len(items)/sumStride] = s
	}
	return v, nil
}

// Len returns the number of items in v.
func (v *Vector) Len() int { return len(v.items) }

// Fingerprint returns the fingerprint of items [lo, hi) of v, which must
// satisfy 0 <= lo <= hi <= v.Len().
func (v *Vector) Fingerprint(lo, hi int) Fingerprint {
	var s sum256
	if hi-lo <= v.stepsTo(lo)+v.stepsTo(hi) {
		for i := lo; i < hi; i++ {
			s.add(&v.items[i].ID)
		}
	} else {
		s = v.prefix(hi)
		s.sub(v.prefix(lo))
	}
	return s.fingerprint(uint64(hi - lo))
}

// stepsTo returns how many ids prefix(i) adds or subtracts.
func (v *Vector) stepsTo(i int) int {
	r := i % sumStride
	if r > sumStride/2 && i-r+sumStride <= len(v.items) {
		return sumStride - r
	}
	return r
}

// prefix returns the sum of the ids of v.items[:i], from the nearest
// running sum.
func (v *Vector) prefix(i int) sum256 {
	k, r := i/sumStride, i%sumStride
	if r > sumStride/2 && (k+1)*sumStride <= len(v.items) {
		s := v.sums[k+1]
		var d sum256
		for j := i; j < (k+1)*sumStride; j++ {
			d.add(&v.items[j].ID)
		}
		s.sub(d)
		return s
	}
	s := v.sums[k]
	for j := k * sumStride; j < i; j++ {
		s.add(&v.items[j].ID)
	}
	return s
}

// lowerBound returns the index of the first item in [lo, hi) that is not
// below b, or hi if there is none.
func (v *Vector) lowerBound(lo, hi int, b *bound) int {
	n, _ := slices.BinarySearchFunc(v.items[lo:hi], b, func(it Item, b *bound) int {
		return compareItemBound(&it, b)
	})
	return lo + n
}

// sum256 is a 256-bit unsigned integer as four little-endian 64-bit limbs.
type sum256 [4]uint64

// add adds id, read as a 256-bit little-endian integer, mod 2^256.
func (s *sum256) add(id *[IDSize]byte) {
	var c uint64
	s[0], c = bits.Add64(s[0], binary.LittleEndian.Uint64(id[0:]), 0)
	s[1], c = bits.Add64(s[1], binary.LittleEndian.Uint64(id[8:]), c)
	s[2], c = bits.Add64(s[2], binary.LittleEndian.Uint64(id[16:]), c)
	s[3], _ = bits.Add64(s[3], binary.LittleEndian.Uint64(id[24:]), c)
}

// sub subtracts o mod 2^256.
func (s *sum256) sub(o sum256) {
	var b uint64
	s[0], b = bits.Sub64(s[0], o[0], 0)
	s[1], b = bits.Sub64(s[1], o[1], b)
	s[2], b = bits.Sub64(s[2], o[2], b)
	s[3], _ = bits.Sub64(s[3], o[3], b)
}

// fingerprint returns SHA-256(s as 32 little-endian bytes || varint(n))
// truncated to 16 bytes.
func (s *sum256) fingerprint(n uint64) Fingerprint {
	var buf [IDSize + maxVarintLen]byte
	for i, limb := range s {
		binary.LittleEndian.PutUint64(buf[8*i:], limb)
	}
	in := appendVarint(buf[:IDSize], n)
	h := sha256.Sum256(in)
	return Fingerprint(h[:FingerprintSize])
}
