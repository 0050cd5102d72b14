package pebble

import (
	"sync/atomic"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// bodyCache holds the bodies of the most recently stored events, by
// serial, so that queries over recent events (home feeds, a subscription's
// catch-up) read them without a pebble seek. Recent events are in the
// memtables, where a seek is a walk down skiplists with a cache miss at
// every level: loading bodies was 45% of the relay's CPU for a 20-author
// feed over a freshly filled store (perf).
//
// A body never changes once stored and a serial is never reused, so an
// entry is valid for any query that asks for its serial: a query asks
// only for serials whose index entries its snapshot holds, and a removed
// event's entry is then simply never asked for. The writer adds the
// bodies of each batch after committing it; queries read concurrently
// (one atomic load per lookup). Slots are indexed by serial, and the
// writer evicts the oldest serials while the cached bytes exceed the
// budget.
type bodyCache struct {
	slots  []atomic.Pointer[cachedBody]
	mask   uint64
	budget int64
	// Writer only.
	bytes  int64
	oldest uint64 // no serial below it is cached; 0 before the first add (serials start at 1)
}

type cachedBody struct {
	serial uint64
	pk     nostr.PubKey
	raw    []byte
}

// cachedBodyOverhead approximates the memory of an entry beyond its raw
// bytes (the struct, the slice header, allocator rounding).
const cachedBodyOverhead = 96

// bodyCacheSlots is the most bodies cached at once.
const bodyCacheSlots = 1 << 16

func newBodyCache(budget int64) *bodyCache {
	if budget <= 0 {
		return nil
	}
	return &bodyCache{slots: make([]atomic.Pointer[cachedBody], bodyCacheSlots), mask: bodyCacheSlots - 1, budget: budget}
}

// get returns the cached body of serial, or nil.
func (c *bodyCache) get(serial uint64) *cachedBody {
	if c == nil {
		return nil
	}
	if e := c.slots[serial&c.mask].Load(); e != nil && e.serial == serial {
		return e
	}
	return nil
}

// add caches a copy of raw as the body of serial, evicting the oldest
// bodies to stay within the budget. Serials must be added in increasing
// order. Called by the writer only.
func (c *bodyCache) add(serial uint64, pk *nostr.PubKey, raw []byte) {
	if c == nil || int64(len(raw)+cachedBodyOverhead) > c.budget/4 {
		return
	}
	if c.oldest == 0 {
		c.oldest = serial
	}
	slot := &c.slots[serial&c.mask]
	if old := slot.Load(); old != nil {
		c.bytes -= int64(len(old.raw) + cachedBodyOverhead)
	}
	slot.Store(&cachedBody{serial: serial, pk: *pk, raw: append([]byte(nil), raw...)})
	c.bytes += int64(len(raw) + cachedBodyOverhead)
	// Evict from the oldest serial up; a slot already reused by a newer
	// serial (or never filled) is skipped.
	for c.bytes > c.budget && c.oldest < serial {
		s := &c.slots[c.oldest&c.mask]
		if e := s.Load(); e != nil && e.serial == c.oldest {
			c.bytes -= int64(len(e.raw) + cachedBodyOverhead)
			s.Store(nil)
		}
		c.oldest++
	}
}
