package relay

import (
	"sync"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// entry is one place a subscription is listed in the index. pos is its
// position in the bucket, kept so removal is O(1).
type entry struct {
	sub *sub
	b   *bucket
	pos int
}

// bucket lists the entries under one index key; it remembers its key so an
// emptied bucket can be deleted from its map in O(1).
type bucket struct {
	entries []*entry
	dim     uint8
	id      [32]byte // dimID: the event id; dimAuthor: the pubkey
	kind    int
	tag     tagKey
}

const (
	dimAll uint8 = iota
	dimID
	dimAuthor
	dimKind
	dimTag
)

func (b *bucket) add(e *entry) {
	e.b = b
	e.pos = len(b.entries)
	b.entries = append(b.entries, e)
}

// remove swap-deletes e and reports whether the bucket is now empty.
func (b *bucket) remove(e *entry) bool {
	last := len(b.entries) - 1
	if e.pos != last {
		moved := b.entries[last]
		b.entries[e.pos] = moved
		moved.pos = e.pos
	}
	b.entries[last] = nil
	b.entries = b.entries[:last]
	if len(b.entries) == 0 {
		b.entries = nil
		return true
	}
	return false
}

type tagKey struct {
	name  byte
	value string
}

// index is the live subscription index. Each filter of a subscription is
// listed under one dimension, the most selective it has: its ids, else its
// authors, else the values of its tag condition with the fewest values,
// else its kinds, else the match-all set. An event's candidates are the
// union of the buckets for its id, author, kind, tag values and the
// match-all set; the exact filter match is the final check.
type index struct {
	mu       sync.RWMutex
	byID     map[nostr.ID]*bucket
	byAuthor map[nostr.PubKey]*bucket
	byKind   map[int]*bucket
	byTag    map[tagKey]*bucket
	all      bucket
	subs     int
	// The most keys each map has held since it was last made: Go's maps
	// keep the table of their largest size after deletes, so a map that
	// held a flood of keys is made again once it is down to a quarter
	// (shrinkMaps).
	peakID, peakAuthor, peakKind, peakTag int
	shrinkMin                             int // the smallest peak at which a map is made again (shrinkAt)
}

// shrinkAt is index.shrinkMin: below it a map's table is small enough to
// keep.
const shrinkAt = 4096

func newIndex() *index {
	return &index{
		byID:      make(map[nostr.ID]*bucket),
		byAuthor:  make(map[nostr.PubKey]*bucket),
		byKind:    make(map[int]*bucket),
		byTag:     make(map[tagKey]*bucket),
		shrinkMin: shrinkAt,
	}
}

// add lists sub under its filters. ix.mu must not be held.
func (ix *index) add(s *sub) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if s.listed {
		return
	}
	s.listed = true
	ix.subs++
	for fi := range s.filters {
		f := &s.filters[fi]
		if f.Empty() {
			continue
		}
		switch {
		case f.HasIDs():
			for _, id := range f.IDs {
				s.entries = append(s.entries, put(s, bucketFor(ix.byID, &ix.peakID, id, bucket{dim: dimID, id: id})))
			}
		case f.HasAuthors():
			for _, pk := range f.Authors {
				s.entries = append(s.entries, put(s, bucketFor(ix.byAuthor, &ix.peakAuthor, pk, bucket{dim: dimAuthor, id: pk})))
			}
		case len(f.Tags) > 0:
			best := 0
			for i := range f.Tags {
				if len(f.Tags[i].Values) < len(f.Tags[best].Values) {
					best = i
				}
			}
			tf := &f.Tags[best]
			for _, v := range tf.Values {
				k := tagKey{tf.Name, v}
				s.entries = append(s.entries, put(s, bucketFor(ix.byTag, &ix.peakTag, k, bucket{dim: dimTag, tag: k})))
			}
		case f.HasKinds():
			for _, k := range f.Kinds {
				s.entries = append(s.entries, put(s, bucketFor(ix.byKind, &ix.peakKind, k, bucket{dim: dimKind, kind: k})))
			}
		default:
			e := &entry{sub: s}
			ix.all.add(e)
			s.entries = append(s.entries, e)
		}
	}
}

// bucketFor returns m's bucket under k, adding a copy of empty (which
// names its key) when there is none; peak is m's most keys.
func bucketFor[K comparable](m map[K]*bucket, peak *int, k K, empty bucket) *bucket {
	b := m[k]
	if b == nil {
		b = &empty
		m[k] = b
		*peak = max(*peak, len(m))
	}
	return b
}

// shrunk returns m, or m made again at its size when it holds a quarter
// of its peak or less (and the peak was min or more); peak is then its
// size. A key is copied once for the three that were deleted before, so
// the cost is spread over the deletes that shrank it.
func shrunk[K comparable](m map[K]*bucket, peak *int, min int) map[K]*bucket {
	if *peak < min || len(m) > *peak/4 {
		return m
	}
	n := make(map[K]*bucket, len(m))
	for k, b := range m {
		n[k] = b
	}
	*peak = len(n)
	return n
}

func put(s *sub, b *bucket) *entry {
	e := &entry{sub: s}
	b.add(e)
	return e
}

// remove unlists sub. It is idempotent. ix.mu must not be held.
func (ix *index) remove(s *sub) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if !s.listed {
		return
	}
	s.listed = false
	ix.subs--
	for _, e := range s.entries {
		b := e.b
		if b.remove(e) && b != &ix.all {
			switch b.dim {
			case dimID:
				delete(ix.byID, b.id)
			case dimAuthor:
				delete(ix.byAuthor, nostr.PubKey(b.id))
			case dimKind:
				delete(ix.byKind, b.kind)
			case dimTag:
				delete(ix.byTag, b.tag)
			}
		}
	}
	s.entries = nil
	ix.byID = shrunk(ix.byID, &ix.peakID, ix.shrinkMin)
	ix.byAuthor = shrunk(ix.byAuthor, &ix.peakAuthor, ix.shrinkMin)
	ix.byKind = shrunk(ix.byKind, &ix.peakKind, ix.shrinkMin)
	ix.byTag = shrunk(ix.byTag, &ix.peakTag, ix.shrinkMin)
}

// candidates calls visit for every subscription that may match ev; a
// subscription listed under several of the event's keys is visited once per
// key (the caller deduplicates). ix.mu is held for reading during the
// calls: visit must not call add or remove.
func (ix *index) candidates(ev *nostr.Event, visit func(*sub)) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	visitBucket := func(b *bucket) {
		if b == nil {
			return
		}
		for _, e := range b.entries {
			visit(e.sub)
		}
	}
	if len(ix.byID) > 0 {
		visitBucket(ix.byID[ev.ID])
	}
	if len(ix.byAuthor) > 0 {
		visitBucket(ix.byAuthor[ev.PubKey])
	}
	if len(ix.byKind) > 0 {
		visitBucket(ix.byKind[ev.Kind])
	}
	if len(ix.byTag) > 0 {
		for _, t := range ev.Tags {
			if len(t) >= 2 && len(t[0]) == 1 {
				visitBucket(ix.byTag[tagKey{t[0][0], t[1]}])
			}
		}
	}
	visitBucket(&ix.all)
}

// count returns the number of listed subscriptions.
func (ix *index) count() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.subs
}
