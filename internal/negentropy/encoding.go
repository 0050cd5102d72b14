package negentropy

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
)

// maxVarintLen is the longest varint that appendVarint writes (64 bits in
// 7-bit digits).
const maxVarintLen = 10

// appendVarint appends n to dst as a Negentropy varint: base-128 digits,
// most significant first, the high bit set on every byte but the last.
func appendVarint(dst []byte, n uint64) []byte {
	var buf [maxVarintLen]byte
	i := len(buf) - 1
	buf[i] = byte(n & 0x7f)
	for n >>= 7; n != 0; n >>= 7 {
		i--
		buf[i] = byte(n&0x7f) | 0x80
	}
	return append(dst, buf[i:]...)
}

// reader consumes a message. Its methods fail with ErrTruncated when the
// message ends early and never read past it.
type reader struct {
	buf []byte
}

func (r *reader) len() int { return len(r.buf) }

func (r *reader) byte() (byte, error) {
	if len(r.buf) == 0 {
		return 0, ErrTruncated
	}
	b := r.buf[0]
	r.buf = r.buf[1:]
	return b, nil
}

// bytes returns the next n bytes, aliasing the message.
func (r *reader) bytes(n uint64) ([]byte, error) {
	if n > uint64(len(r.buf)) {
		return nil, ErrTruncated
	}
	b := r.buf[:n]
	r.buf = r.buf[n:]
	return b, nil
}

// varint reads a varint. Leading zero digits are accepted, as the reference
// implementations accept them; a value above 2^64-1 is ErrVarint.
func (r *reader) varint() (uint64, error) {
	var n uint64
	for i, b := range r.buf {
		if n>>57 != 0 {
			return 0, ErrVarint
		}
		n = n<<7 | uint64(b&0x7f)
		if b&0x80 == 0 {
			r.buf = r.buf[i+1:]
			return n, nil
		}
	}
	return 0, ErrTruncated
}

// bound is a range boundary: an item position that sorts after every item
// below it and at or before every item from it on. The id holds the prefix
// padded with zero bytes; n is the prefix length that goes on the wire.
type bound struct {
	ts uint64
	id [IDSize]byte
	n  int
}

// infinity is the bound after every item.
var infinity = bound{ts: math.MaxUint64}

// itemBound is the bound that sits exactly at it (the full id).
func itemBound(it *Item) bound { return bound{ts: it.Timestamp, id: it.ID, n: IDSize} }

// minimalBound is the shortest bound that separates prev from the next item
// curr (prev < curr): the timestamp alone if they differ, otherwise the
// common id prefix plus the first differing byte.
func minimalBound(prev, curr *Item) bound {
	b := bound{ts: curr.Timestamp}
	if curr.Timestamp != prev.Timestamp {
		return b
	}
	shared := 0
	for shared < IDSize && curr.ID[shared] == prev.ID[shared] {
		shared++
	}
	b.n = min(shared+1, IDSize)
	copy(b.id[:b.n], curr.ID[:b.n])
	return b
}

func compareItemBound(it *Item, b *bound) int {
	if c := cmp.Compare(it.Timestamp, b.ts); c != 0 {
		return c
	}
	return bytes.Compare(it.ID[:], b.id[:])
}

func compareBounds(a, b *bound) int {
	if c := cmp.Compare(a.ts, b.ts); c != 0 {
		return c
	}
	return bytes.Compare(a.id[:], b.id[:])
}

// decoder holds the per-message state of reading bounds: timestamps are
// deltas from the previous bound of the same message.
type decoder struct {
	reader
	lastTS uint64
}

func (d *decoder) bound() (bound, error) {
	var b bound
	t, err := d.varint()
	if err != nil {
		return b, err
	}
	// 0 is infinity; otherwise 1 + delta. Like the reference, a sum that
	// overflows saturates to infinity (and infinity stays infinity).
	if t == 0 {
		b.ts = math.MaxUint64
	} else {
		b.ts = t - 1 + d.lastTS
		if b.ts < d.lastTS {
			b.ts = math.MaxUint64
		}
	}
	d.lastTS = b.ts
	n, err := d.varint()
	if err != nil {
		return b, err
	}
	if n > IDSize {
		return b, fmt.Errorf("%w: %d", ErrBoundLength, n)
	}
	p, err := d.bytes(n)
	if err != nil {
		return b, err
	}
	b.n = copy(b.id[:], p)
	return b, nil
}

// encoder holds the per-message state of writing bounds.
type encoder struct {
	lastTS uint64
}

func (e *encoder) appendBound(dst []byte, b *bound) []byte {
	if b.ts == math.MaxUint64 {
		e.lastTS = math.MaxUint64
		dst = append(dst, 0)
	} else {
		if b.ts < e.lastTS {
			panic("BUG: negentropy: bounds encoded out of order")
		}
		dst = appendVarint(dst, b.ts-e.lastTS+1)
		e.lastTS = b.ts
	}
	dst = appendVarint(dst, uint64(b.n))
	return append(dst, b.id[:b.n]...)
}
