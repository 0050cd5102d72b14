package pebble

import (
	"bytes"
	"fmt"
	"slices"
	"sync"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// entry is one index entry: an event's place in newest-first order and
// its meta.
type entry struct {
	createdAt int64
	id        nostr.ID
	m         meta
}

// before reports whether a comes before b newest-first: created_at
// descending, then id ascending.
func (a *entry) before(b *entry) bool {
	if a.createdAt != b.createdAt {
		return a.createdAt > b.createdAt
	}
	return bytes.Compare(a.id[:], b.id[:]) < 0
}

func (a *entry) same(b *entry) bool { return a.createdAt == b.createdAt && a.id == b.id }

// source is a newest-first stream of entries: a key range [lo, hi) of one
// index, read through the query's shared pebble iterator in chunks (each
// refill is one seek), or a fixed list (id lookups).
type source struct {
	q     *query
	lo    []byte // next key to read; advances as chunks are read
	hi    []byte // exclusive end; nil means no end
	buf   []entry
	pos   int
	done  bool // nothing left to read beyond buf
	chunk int
	slab  bool // buf is part of a shared allocation: never pooled
}

func (s *source) head() *entry {
	if s.pos < len(s.buf) {
		return &s.buf[s.pos]
	}
	return nil
}

// pop moves past the head, refilling the buffer when it runs out.
func (s *source) pop() error {
	s.pos++
	if s.pos >= len(s.buf) && !s.done {
		return s.fill()
	}
	return nil
}

// entryPool recycles source buffers between queries.
var entryPool = sync.Pool{New: func() any { return new([]entry) }}

// fill reads the next chunk of entries.
func (s *source) fill() error {
	if cap(s.buf) < s.chunk {
		s.releaseBuf()
		s.slab = false
		s.buf = getEntries(s.chunk)
	}
	s.buf, s.pos = s.buf[:0], 0
	it, err := s.q.indexIter()
	if err != nil {
		return err
	}
	for valid := it.SeekGE(s.lo); valid; valid = it.Next() {
		k := it.Key()
		if s.hi != nil && bytes.Compare(k, s.hi) >= 0 {
			break
		}
		if len(s.buf) == s.chunk {
			s.lo = append(s.lo[:0], k...) // resume here
			s.chunk = min(2*s.chunk, maxChunk)
			return nil
		}
		ts, id, ok := decodeTail(k)
		m, good := decodeMeta(it.Value())
		if !ok || !good {
			return fmt.Errorf("%w: index entry %x", errCorrupt, k)
		}
		s.buf = append(s.buf, entry{createdAt: ts, id: id, m: m})
	}
	s.done = true
	return it.Error()
}

// getEntries returns a pooled buffer of n entries.
func getEntries(n int) []entry {
	p := entryPool.Get().(*[]entry)
	if cap(*p) < n {
		return make([]entry, n)
	}
	return (*p)[:n]
}

func putEntries(b []entry) {
	b = b[:0]
	entryPool.Put(&b)
}

// releaseBuf returns the buffer to the pool.
func (s *source) releaseBuf() {
	if cap(s.buf) > 0 && !s.slab {
		putEntries(s.buf)
	}
	s.buf = nil
}

// filterStream yields the events matching one filter, newest first,
// without duplicates, up to the filter's limit. Its sources are kept in a
// heap ordered by their heads; entries are checked against the parts of
// the filter the chosen index does not guarantee.
type filterStream struct {
	q    *query
	f    *nostr.Filter
	srcs []*source // heap
	left int       // matches still allowed; -1 for no limit

	// Post-filters (what the index does not guarantee).
	kinds      []int             // check the kind (from meta) when non-nil
	authors    []nostr.PubKey    // check the author (pk8 from meta, exact from body) when non-nil; sorted
	authorSet  map[[8]byte]int32 // pk8 -> index in authors (-1: shared prefix), when there are many
	checkTime  bool              // check since/until (list sources are not bounded by key)
	since      int64
	until      int64
	parseTags  bool // parse the body and run f.Matches
	wantBody   bool // load the body of every match (Query)
	needsBody  bool // some check needs the body
	last       entry
	hasLast    bool
	cur        entry
	ok         bool
	pk         nostr.PubKey
	raw        []byte
	haveBody   bool
	plannedIdx byte // the table used, for tests and explain

	// Scan phase (see manyStreams): entries left before switching to the
	// per-author streams in later, which then start just after the last
	// entry seen. budget < 0 means no switch is pending.
	budget     int
	laterKinds []int // kinds of the later streams (nil: per author only)
}

func srcLess(a, b *source) bool { return a.head().before(b.head()) }

func (fs *filterStream) down(i int) {
	h := fs.srcs
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && srcLess(h[r], h[l]) {
			m = r
		}
		if !srcLess(h[m], h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// init fills every source and builds the heap.
func (fs *filterStream) init() error {
	live := fs.srcs[:0]
	for _, s := range fs.srcs {
		if len(s.buf) == 0 && !s.done {
			if err := s.fill(); err != nil {
				return err
			}
		}
		if s.head() != nil {
			live = append(live, s)
		}
	}
	clear(fs.srcs[len(live):])
	fs.srcs = live
	for i := len(fs.srcs)/2 - 1; i >= 0; i-- {
		fs.down(i)
	}
	return nil
}

// advance moves to the next match; fs.ok reports whether there is one.
func (fs *filterStream) advance() error {
	fs.ok = false
	if fs.left == 0 {
		return nil
	}
	for len(fs.srcs) > 0 || fs.budget == 0 {
		if fs.budget == 0 {
			if err := fs.switchToLater(); err != nil {
				return err
			}
			continue
		}
		if fs.budget > 0 {
			fs.budget--
		}
		top := fs.srcs[0]
		e := *top.head()
		if err := top.pop(); err != nil {
			return err
		}
		if top.head() == nil {
			n := len(fs.srcs) - 1
			fs.srcs[0] = fs.srcs[n]
			fs.srcs[n] = nil
			fs.srcs = fs.srcs[:n]
		}
		if len(fs.srcs) > 1 {
			fs.down(0)
		}
		if fs.hasLast && e.same(&fs.last) {
			continue
		}
		fs.last, fs.hasLast = e, true
		ok, err := fs.check(&e)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		fs.cur, fs.ok = e, true
		if fs.left > 0 {
			fs.left--
		}
		return nil
	}
	return nil
}

// switchToLater ends the scan phase: the per-author streams start just
// after the last entry the scan phase saw, which every entry it had not
// yet seen follows.
func (fs *filterStream) switchToLater() error {
	fs.budget = -1
	if !fs.hasLast {
		return nil
	}
	fs.srcs = fs.srcs[:0]
	q := fs.q
	table := byte(pfxAuthor)
	if fs.plannedIdx == pfxAuthKind {
		table = pfxAuthKind
	} else {
		fs.kinds = fs.laterKinds
	}
	later := authorPrefixes(fs.authors, table, fs.laterKinds)
	if len(later) == 0 {
		return nil
	}
	chunk := min(max(fs.left/len(later)+1, minChunk), maxChunk)
	fs.srcs = q.newSources(fs.srcs, later, &fs.last, 0, fs.since, chunk)
	return fs.init()
}

// check applies the post-filters to e, loading the body when needed.
func (fs *filterStream) check(e *entry) (bool, error) {
	if e.m.expired(fs.q.now) {
		return false, nil
	}
	if fs.checkTime && (e.createdAt < fs.since || e.createdAt > fs.until) {
		return false, nil
	}
	if fs.kinds != nil && !slices.Contains(fs.kinds, int(e.m.kind)) {
		return false, nil
	}
	if fs.authors != nil {
		if fs.authorSet != nil {
			if _, ok := fs.authorSet[e.m.pk8]; !ok {
				return false, nil
			}
		} else if !pk8In(fs.authors, &e.m.pk8) {
			return false, nil
		}
	}
	fs.haveBody = false
	if !fs.wantBody && !fs.needsBody {
		return true, nil
	}
	pk, raw, ok, err := fs.q.body(e.m.serial, fs.raw)
	fs.raw = raw
	if err != nil || !ok {
		return false, err
	}
	fs.pk, fs.haveBody = pk, true
	if fs.authors != nil && !fs.hasAuthor(&pk) {
		return false, nil
	}
	if fs.parseTags {
		ev, err := nostr.ParseEvent(raw, nil)
		if err != nil {
			return false, fmt.Errorf("%w: body %d: %v", errCorrupt, e.m.serial, err)
		}
		if !fs.f.Matches(ev) {
			return false, nil
		}
	}
	return true, nil
}

func pk8In(list []nostr.PubKey, pk8 *[8]byte) bool {
	for i := range list {
		if [8]byte(list[i][:8]) == *pk8 {
			return true
		}
	}
	return false
}

// hasAuthor reports whether pk is one of fs.authors.
func (fs *filterStream) hasAuthor(pk *nostr.PubKey) bool {
	if fs.authorSet != nil {
		if i, ok := fs.authorSet[[8]byte(pk[:8])]; ok && i >= 0 {
			return fs.authors[i] == *pk
		}
	}
	return slices.Contains(fs.authors, *pk)
}

// merger merges the filter streams of one request newest first, without
// duplicates.
type merger struct {
	q       *query
	streams []*filterStream // heap by cur
	started bool
	top     *filterStream // the stream that produced the current entry
	last    entry
	hasLast bool
}

func streamLess(a, b *filterStream) bool { return a.cur.before(&b.cur) }

func (m *merger) down(i int) {
	h := m.streams
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && streamLess(h[r], h[l]) {
			c = r
		}
		if !streamLess(h[c], h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// newMerger plans every filter.
func (q *query) newMerger(filters []nostr.Filter, forQuery, wantBody bool) (*merger, error) {
	m := &merger{q: q}
	for i := range filters {
		fs, err := q.plan(&filters[i], forQuery, wantBody)
		if err != nil {
			return nil, err
		}
		if fs != nil {
			m.streams = append(m.streams, fs)
		}
	}
	return m, nil
}

// fixTop restores the heap after the top stream moved.
func (m *merger) fixTop() {
	if !m.streams[0].ok {
		n := len(m.streams) - 1
		m.streams[0] = m.streams[n]
		m.streams[n] = nil
		m.streams = m.streams[:n]
	}
	if len(m.streams) > 1 {
		m.down(0)
	}
}

// next moves to the next event; it returns nil at the end.
func (m *merger) next() (*filterStream, error) {
	if !m.started {
		m.started = true
		live := m.streams[:0]
		for _, fs := range m.streams {
			if err := fs.init(); err != nil {
				return nil, err
			}
			if err := fs.advance(); err != nil {
				return nil, err
			}
			if fs.ok {
				live = append(live, fs)
			}
		}
		clear(m.streams[len(live):])
		m.streams = live
		for i := len(m.streams)/2 - 1; i >= 0; i-- {
			m.down(i)
		}
	} else if m.top != nil {
		if err := m.top.advance(); err != nil {
			return nil, err
		}
		m.fixTop()
		m.top = nil
	}
	for len(m.streams) > 0 {
		top := m.streams[0]
		if m.hasLast && top.cur.same(&m.last) {
			if err := top.advance(); err != nil {
				return nil, err
			}
			m.fixTop()
			continue
		}
		m.last, m.hasLast, m.top = top.cur, true, top
		return top, nil
	}
	return nil, nil
}
