package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// Planner limits.
const (
	// maxPairs is the most (author, kind) streams a filter gets; above it
	// the planner streams per author and checks the kind from the meta.
	maxPairs = 4096
	// manyStreams is the number of per-author streams above which a
	// filter with a limit first scans the kind (or created_at) index with
	// an author set, for a budget of scanBudgetPerResult entries per
	// result wanted (between minScanBudget and maxScanBudget), before
	// seeking every author.
	manyStreams         = 64
	scanBudgetPerResult = 8
	minScanBudget       = 256
	maxScanBudget       = 4096
	// minChunk and maxChunk bound how many entries a source reads per
	// seek; the chunk doubles on each refill.
	minChunk     = 4
	maxChunk     = 1024
	defaultChunk = 64
	// maxInitialEntries bounds the entries a filter's sources buffer
	// before any of them is refilled.
	maxInitialEntries = 16384
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
	it := s.q.it
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

// query is the read state shared by the streams of one Query, Count or
// Items call: a pebble snapshot, one iterator over it for index scans,
// and the time used for expiration.
type query struct {
	s      *Store
	srcs   []*source // every range source, to recycle their buffers
	slabs  [][]entry // shared initial buffers, recycled at close
	snap   *pebble.Snapshot
	it     *pebble.Iterator // index scans
	bodyIt *pebble.Iterator // body reads, created on first use
	docIt  *pebble.Iterator // search doc reads, created on first use
	cands  []*[]cand        // search candidate heaps, recycled at close
	now    int64
	keyBuf []byte
}

func (s *Store) newQuery() (*query, error) {
	snap := s.db.NewSnapshot()
	it, err := snap.NewIter(nil)
	if err != nil {
		snap.Close()
		return nil, err
	}
	return &query{s: s, snap: snap, it: it, now: time.Now().Unix()}, nil
}

func (q *query) close() error {
	if q.it == nil {
		return nil
	}
	for _, s := range q.srcs {
		s.releaseBuf()
	}
	for _, b := range q.slabs {
		putEntries(b)
	}
	for _, c := range q.cands {
		putCands(*c)
		*c = nil
	}
	q.srcs, q.slabs, q.cands = nil, nil, nil
	err := q.it.Close()
	for _, it := range []*pebble.Iterator{q.bodyIt, q.docIt} {
		if it != nil {
			if cerr := it.Close(); err == nil {
				err = cerr
			}
		}
	}
	if cerr := q.snap.Close(); err == nil {
		err = cerr
	}
	q.it, q.bodyIt, q.docIt, q.snap = nil, nil, nil, nil
	return err
}

// body reads the body with this serial and appends its raw JSON to
// dst[:0]; it returns the author too. Bodies are read through one
// iterator kept open for the query: a seek on an open iterator costs a
// fraction of a Get, which opens its sstable iterators anew every time.
func (q *query) body(serial uint64, dst []byte) (nostr.PubKey, []byte, bool, error) {
	if e := q.s.bodies.get(serial); e != nil {
		return e.pk, append(dst[:0], e.raw...), true, nil
	}
	if q.bodyIt == nil {
		it, err := q.snap.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxBody}, UpperBound: []byte{pfxBody + 1}})
		if err != nil {
			return nostr.PubKey{}, dst, false, err
		}
		q.bodyIt = it
	}
	q.keyBuf = appendBodyKey(q.keyBuf[:0], serial)
	if !q.bodyIt.SeekGE(q.keyBuf) || !bytes.Equal(q.bodyIt.Key(), q.keyBuf) {
		if err := q.bodyIt.Error(); err != nil {
			return nostr.PubKey{}, dst, false, err
		}
		return nostr.PubKey{}, dst, false, fmt.Errorf("%w: no body for serial %d", errCorrupt, serial)
	}
	v, err := q.bodyIt.ValueAndErr()
	if err != nil {
		return nostr.PubKey{}, dst, false, err
	}
	pk, raw, ok := decodeBody(v)
	if !ok {
		return pk, dst, false, fmt.Errorf("%w: body %d", errCorrupt, serial)
	}
	return pk, append(dst[:0], raw...), true, nil
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

// active reports whether a filter can match anything; for Query a limit
// of 0 or less also makes it inactive.
func active(f *nostr.Filter, forQuery bool) bool {
	if f.Empty() || f.Search != "" {
		return false
	}
	return !(forQuery && f.HasLimit && f.Limit <= 0)
}

// tagRank orders tag names by how selective their values tend to be:
// ids and addresses first, then pubkeys, then the rest.
func tagRank(name byte) int {
	switch name {
	case 'e', 'a', 'd', 'E', 'A', 'q':
		return 0
	case 'p', 'P':
		return 1
	}
	return 2
}

// bestTag returns the index in f.Tags of the tag condition to scan: the
// one with fewest values, then the most selective name.
func bestTag(f *nostr.Filter) int {
	best := 0
	for i := 1; i < len(f.Tags); i++ {
		a, b := &f.Tags[i], &f.Tags[best]
		if len(a.Values) < len(b.Values) || (len(a.Values) == len(b.Values) && tagRank(a.Name) < tagRank(b.Name)) {
			best = i
		}
	}
	return best
}

// plan builds the stream for one filter, or returns nil when the filter
// cannot match anything. See docs/storage.md, "Planner".
func (q *query) plan(f *nostr.Filter, forQuery, wantBody bool) (*filterStream, error) {
	if !active(f, forQuery) {
		return nil, nil
	}
	since, until := int64(0), int64(nostr.MaxTimestamp)
	if f.HasSince && f.Since > since {
		since = f.Since
	}
	if f.HasUntil && f.Until < until {
		until = f.Until
	}
	if since > until {
		return nil, nil
	}
	fs := &filterStream{q: q, f: f, left: -1, since: since, until: until, wantBody: wantBody, budget: -1}
	if forQuery && f.HasLimit {
		fs.left = f.Limit
	}
	var kinds []int
	if f.HasKinds() {
		kinds = make([]int, 0, len(f.Kinds))
		for _, k := range f.Kinds {
			if 0 <= k && k <= nostr.MaxKind {
				kinds = append(kinds, k)
			}
		}
		if len(kinds) == 0 {
			return nil, nil
		}
		slices.Sort(kinds)
		kinds = slices.Compact(kinds)
	}
	authors := f.Authors // may hold duplicates: only checked against
	hasAuthors := f.HasAuthors()
	var prefixes [][]byte
	tagIdx := -1
	if len(f.Tags) > 0 {
		tagIdx = bestTag(f)
		if hasAuthors && tagRank(f.Tags[tagIdx].Name) != 0 {
			tagIdx = -1 // authors are the better index
		}
	}
	switch {
	case f.HasIDs():
		fs.plannedIdx = pfxID
		src, err := q.idSource(f.IDs)
		if err != nil {
			return nil, err
		}
		fs.srcs = []*source{src}
		fs.checkTime = true
		fs.kinds = kinds
		fs.setAuthors(hasAuthors, authors)
		fs.parseTags = len(f.Tags) > 0
	case tagIdx >= 0:
		fs.plannedIdx = pfxTag
		tf := &f.Tags[tagIdx]
		exact := true
		for _, v := range tf.Values {
			p, ex := tagPrefix(tf.Name, v)
			exact = exact && ex
			if !containsBytes(prefixes, p) {
				prefixes = append(prefixes, p)
			}
		}
		fs.kinds = kinds
		fs.setAuthors(hasAuthors, authors)
		fs.parseTags = len(f.Tags) > 1 || !exact
	case hasAuthors:
		fs.parseTags = len(f.Tags) > 0
		fs.plannedIdx = pfxAuthor
		streams := len(authors)
		if kinds != nil && len(authors)*len(kinds) <= maxPairs {
			fs.plannedIdx = pfxAuthKind
			streams *= len(kinds)
		} else {
			fs.kinds = kinds
		}
		if fs.left > 0 && streams > manyStreams {
			// Many authors: scan the newest events of the kinds first,
			// with the authors as a set; most follow lists find their
			// page there. The per-author streams are built only if the
			// scan gives up (switchToLater).
			fs.budget = min(max(scanBudgetPerResult*fs.left, minScanBudget), maxScanBudget)
			fs.laterKinds = kinds
			fs.setAuthors(true, authors)
			if kinds != nil {
				for _, k := range kinds {
					prefixes = append(prefixes, appendU16([]byte{pfxKind}, uint16(k)))
				}
				fs.kinds = nil // guaranteed by the K streams
			} else {
				prefixes = [][]byte{{pfxCreated}}
			}
		} else {
			prefixes = authorPrefixes(authors, fs.plannedIdx, kinds)
		}
	case kinds != nil:
		fs.plannedIdx = pfxKind
		for _, k := range kinds {
			prefixes = append(prefixes, appendU16([]byte{pfxKind}, uint16(k)))
		}
		fs.parseTags = len(f.Tags) > 0
	default:
		fs.plannedIdx = pfxCreated
		prefixes = [][]byte{{pfxCreated}}
		fs.parseTags = len(f.Tags) > 0
	}
	fs.needsBody = fs.parseTags || fs.authors != nil
	if prefixes != nil {
		chunk := defaultChunk
		if fs.left > 0 {
			chunk = min(max(fs.left/len(prefixes)+1, minChunk), maxChunk)
		}
		fs.srcs = q.newSources(fs.srcs, prefixes, nil, until, since, chunk)
	}
	return fs, nil
}

// newSources appends to dst one range source per prefix, covering
// [prefix inv(until), prefix inv(since)+1), or, when after is set,
// starting just after the entry after. Keys and initial buffers come from
// two allocations shared by all the sources.
func (q *query) newSources(dst []*source, prefixes [][]byte, after *entry, until, since int64, chunk int) []*source {
	// Bound the initial buffers of a query with many streams and a large
	// limit (they grow per stream as needed).
	chunk = max(minChunk, min(chunk, maxInitialEntries/len(prefixes)))
	size := 0
	for _, p := range prefixes {
		size += 2*len(p) + 8 + tailLen + 9
	}
	arena := make([]byte, 0, size)
	srcs := make([]source, len(prefixes))
	slab := getEntries(len(prefixes) * chunk)
	q.slabs = append(q.slabs, slab)
	for i, p := range prefixes {
		start := len(arena)
		arena = append(arena, p...)
		if after != nil {
			arena = append(appendTail(arena, after.createdAt, &after.id), 0)
		} else {
			arena = appendU64(arena, inv(until))
		}
		lo := arena[start:len(arena):len(arena)]
		start = len(arena)
		arena = appendU64(append(arena, p...), inv(since))
		hi := arena[start:len(arena):len(arena)]
		// hi = prefixEnd(hi), in place.
		for j := len(hi) - 1; j >= 0; j-- {
			hi[j]++
			if hi[j] != 0 {
				hi = hi[: j+1 : j+1]
				break
			}
			if j == 0 {
				hi = nil
			}
		}
		srcs[i] = source{q: q, lo: lo, hi: hi, chunk: chunk, buf: slab[i*chunk : i*chunk : (i+1)*chunk], slab: true}
		dst = append(dst, &srcs[i])
		q.srcs = append(q.srcs, &srcs[i])
	}
	return dst
}

// setAuthors makes the author a post-filter (when has): the first 8 bytes
// from the meta, then the whole key from the body.
func (fs *filterStream) setAuthors(has bool, authors []nostr.PubKey) {
	if !has {
		return
	}
	fs.authors = authors
	if fs.authors == nil {
		fs.authors = []nostr.PubKey{} // present but empty: Empty() already refused it
	}
	if len(authors) > 16 {
		fs.authorSet = make(map[[8]byte]int32, len(authors))
		for i := range authors {
			k := [8]byte(authors[i][:8])
			if j, ok := fs.authorSet[k]; ok && j >= 0 && authors[j] != authors[i] {
				fs.authorSet[k] = -1 // two authors share the prefix: scan
			} else if !ok {
				fs.authorSet[k] = int32(i)
			}
		}
	}
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

// authorPrefixes returns the stream prefixes of authors (sorted and
// deduplicated, so that the seeks move forward through the index):
// P pubkey, or Q pubkey kind for each kind when table is pfxAuthKind.
func authorPrefixes(authors []nostr.PubKey, table byte, kinds []int) [][]byte {
	authors = slices.Clone(authors)
	slices.SortFunc(authors, func(a, b nostr.PubKey) int {
		x, y := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(b[:8])
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
		return bytes.Compare(a[8:], b[8:])
	})
	authors = slices.Compact(authors)
	if table == pfxAuthor {
		kinds = nil
	}
	n := len(authors) * max(len(kinds), 1)
	arena := make([]byte, 0, n*35)
	prefixes := make([][]byte, 0, n)
	for i := range authors {
		if table == pfxAuthor {
			start := len(arena)
			arena = append(append(arena, pfxAuthor), authors[i][:]...)
			prefixes = append(prefixes, arena[start:len(arena):len(arena)])
			continue
		}
		for _, k := range kinds {
			start := len(arena)
			arena = appendU16(append(append(arena, pfxAuthKind), authors[i][:]...), uint16(k))
			prefixes = append(prefixes, arena[start:len(arena):len(arena)])
		}
	}
	return prefixes
}

func containsBytes(list [][]byte, b []byte) bool {
	for _, x := range list {
		if bytes.Equal(x, b) {
			return true
		}
	}
	return false
}

// idSource looks the ids up and returns them as a sorted list source.
func (q *query) idSource(ids []nostr.ID) (*source, error) {
	src := &source{q: q, done: true}
	for i := range ids {
		q.keyBuf = append(append(q.keyBuf[:0], pfxID), ids[i][:]...)
		v, closer, err := q.snap.Get(q.keyBuf)
		if errors.Is(err, pebble.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ts, m, ok := decodeIDValue(v)
		closer.Close()
		if !ok {
			return nil, fmt.Errorf("%w: id value for %x", errCorrupt, ids[i])
		}
		src.buf = append(src.buf, entry{createdAt: ts, id: ids[i], m: m})
	}
	slices.SortFunc(src.buf, func(a, b entry) int {
		if a.before(&b) {
			return -1
		}
		if b.before(&a) {
			return 1
		}
		return 0
	})
	return src, nil
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

// iterator implements store.Iterator.
type iterator struct {
	mu     sync.Mutex
	s      *Store
	q      *query
	m      *merger
	ss     []*searchStream       // the filters with Search, in order, before the others
	seen   map[nostr.ID]struct{} // ids returned by search streams, when other streams follow
	rec    store.Record
	err    error
	closed bool
	snap   store.Snapshot // fixed at Query
}

// Query implements store.Store.
func (s *Store) Query(ctx context.Context, filters []nostr.Filter) (store.Iterator, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	q, err := s.newQuery()
	if err != nil {
		return nil, err
	}
	m, err := q.newMerger(filters, true, true)
	if err != nil {
		q.close()
		return nil, err
	}
	it := &iterator{s: s, q: q, m: m, ss: q.newSearches(filters, true, true)}
	if len(it.ss) > 1 || len(it.ss) > 0 && len(m.streams) > 0 {
		it.seen = make(map[nostr.ID]struct{})
	}
	if len(m.streams) == 0 && len(it.ss) == 0 {
		q.close()
		it.q = nil
		return it, nil // reads nothing: the zero Snapshot
	}
	last, _, err := getU64(q.snap, commitKey)
	if err != nil {
		q.close()
		return nil, err
	}
	it.snap = store.Snapshot{Low: last + 1, High: last + 1}
	if !s.track(it) {
		q.close()
		return nil, store.ErrClosed
	}
	return it, nil
}

// Next implements store.Iterator.
func (it *iterator) Next() bool {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.closed || it.err != nil || it.q == nil {
		return false
	}
	for len(it.ss) > 0 {
		ss := it.ss[0]
		ok, err := ss.next()
		if err != nil {
			it.err = err
			it.release()
			return false
		}
		if !ok {
			it.ss = it.ss[1:]
			continue
		}
		e := &ss.cur
		if it.seen != nil {
			if _, dup := it.seen[e.id]; dup {
				continue
			}
			it.seen[e.id] = struct{}{}
		}
		it.rec = store.Record{ID: e.id, PubKey: ss.post.pk, CreatedAt: e.createdAt, Kind: int(e.m.kind), Raw: ss.post.raw}
		return true
	}
	for {
		fs, err := it.m.next()
		if err != nil {
			it.err = err
			it.release()
			return false
		}
		if fs == nil {
			it.release()
			return false
		}
		e := &fs.cur
		if it.seen != nil {
			if _, dup := it.seen[e.id]; dup {
				continue
			}
		}
		it.rec = store.Record{ID: e.id, PubKey: fs.pk, CreatedAt: e.createdAt, Kind: int(e.m.kind), Raw: fs.raw}
		return true
	}
}

// newSearches returns the streams of the filters with Search, in order.
func (q *query) newSearches(filters []nostr.Filter, forQuery, wantBody bool) []*searchStream {
	var out []*searchStream
	for i := range filters {
		if ss := q.newSearch(&filters[i], forQuery, wantBody); ss != nil {
			out = append(out, ss)
		}
	}
	return out
}

// Record implements store.Iterator.
func (it *iterator) Record() *store.Record { return &it.rec }

// Snapshot implements store.Iterator: the query sees every commit up to
// the last one that wrote commitKey into its pebble snapshot.
func (it *iterator) Snapshot() store.Snapshot { return it.snap }

// Err implements store.Iterator.
func (it *iterator) Err() error {
	it.mu.Lock()
	defer it.mu.Unlock()
	return it.err
}

// Close implements store.Iterator.
func (it *iterator) Close() error {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.closed = true
	it.rec = store.Record{}
	it.release()
	return nil
}

// release frees the snapshot. it.mu must be held.
func (it *iterator) release() {
	if it.q == nil {
		return
	}
	if err := it.q.close(); err != nil && it.err == nil {
		it.err = err
	}
	it.q = nil
	it.m = nil
	it.ss = nil
	it.s.untrack(it)
}

// forceClose is called by Store.Close for an iterator still open.
func (it *iterator) forceClose() {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.q != nil {
		it.q.close()
		it.q, it.m, it.ss = nil, nil, nil
		if it.err == nil && !it.closed {
			it.err = store.ErrClosed
		}
	}
}

// scan calls fn for every distinct event matching any of filters
// (ignoring limits), newest first, without loading bodies unless a check
// needs them.
func (s *Store) scan(ctx context.Context, filters []nostr.Filter, fn func(e *entry) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return store.ErrClosed
	}
	q, err := s.newQuery()
	if err != nil {
		return err
	}
	defer q.close()
	m, err := q.newMerger(filters, false, false)
	if err != nil {
		return err
	}
	// Search matches first (they need their bodies parsed anyway), then
	// the other filters' matches that are not among them.
	var seen map[nostr.ID]struct{}
	for _, ss := range q.newSearches(filters, false, false) {
		if seen == nil {
			seen = make(map[nostr.ID]struct{})
		}
		for n := 0; ; n++ {
			if n&1023 == 1023 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			ok, err := ss.next()
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if _, dup := seen[ss.cur.id]; dup {
				continue
			}
			seen[ss.cur.id] = struct{}{}
			if err := fn(&ss.cur); err != nil {
				return err
			}
		}
	}
	for n := 0; ; n++ {
		if n&1023 == 1023 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		fs, err := m.next()
		if err != nil || fs == nil {
			return err
		}
		if seen != nil {
			if _, dup := seen[fs.cur.id]; dup {
				continue
			}
		}
		if err := fn(&fs.cur); err != nil {
			return err
		}
	}
}

// Count implements store.Store.
func (s *Store) Count(ctx context.Context, filters []nostr.Filter) (int64, error) {
	var n int64
	err := s.scan(ctx, filters, func(*entry) error { n++; return nil })
	if err != nil {
		return 0, err
	}
	return n, nil
}

// Items implements store.Store.
func (s *Store) Items(ctx context.Context, filters []nostr.Filter, max int) ([]store.Item, error) {
	var items []store.Item
	err := s.scan(ctx, filters, func(e *entry) error {
		if max > 0 && len(items) == max {
			return store.ErrTooMany
		}
		items = append(items, store.Item{CreatedAt: e.createdAt, ID: e.id})
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(items, store.CompareItems)
	return items, nil
}
