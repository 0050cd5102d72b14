package pebble

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/search"
)

// NIP-50 search: the index is a posting list per term (S keys: posting
// blocks, newest documents first) plus the collection figures (in the
// commit state), written by the writer in the same batch as the events
// they index. See docs/storage.md, "Search".

// SupportsSearch implements store.Searcher: it reports whether the store
// keeps a search index (Options.DisableSearch is false).
func (s *Store) SupportsSearch() bool { return !s.opts.DisableSearch }

// Search build limits: events per batch while (re)building the index.
const buildBatchEvents = 4096

// openSearch brings the search index in line with the options before the
// writer starts: with search off it drops an index that exists; with
// search on it builds the index when it is missing or was built by
// another analyzer version or posting layout (searchIndexVersion). The
// version key is written in the batch that completes the index (with its
// figures in the commit state), so a crash midway leaves a database whose
// index is built again at the next Open.
func (s *Store) openSearch() error {
	have, ok, err := s.getMeta(searchKey)
	if err != nil {
		return err
	}
	if s.opts.ReadOnly {
		// Nothing can be built or dropped: search is on exactly when the
		// database holds a current index.
		current := ok && (string(have) == searchIndexVersion || string(have) == searchIndexV2 || string(have) == searchIndexV1)
		s.segments = current && string(have) != searchIndexV1
		if !current && !s.opts.DisableSearch {
			s.log.Warn("store: read-only open of a store without a current search index: search is off", "path", s.opts.Path)
		}
		s.opts.DisableSearch = !current
		return nil
	}
	if s.opts.DisableSearch {
		c, _, err := readCommit(s.db)
		if err != nil {
			return err
		}
		if !ok && c.search == (search.Stats{}) && !s.anySearchKeys() {
			return nil
		}
		b := s.db.NewBatch()
		defer b.Close()
		if err := dropSearch(b); err != nil {
			return err
		}
		if err := s.setSearchStats(b, search.Stats{}); err != nil {
			return err
		}
		if ok {
			s.log.Info("store: search disabled, search index dropped")
		}
		if err := s.spaceFor(int(b.Len())); err != nil {
			return err
		}
		return b.Commit(pebble.Sync)
	}
	s.segments = true
	if ok && string(have) == searchIndexVersion && !s.opts.RebuildSearch {
		return nil
	}
	if ok && (string(have) == searchIndexV2 || string(have) == searchIndexV1) && !s.opts.RebuildSearch {
		// A previous layout: blocks2 is this one whose folds were single
		// batches (never a searchFoldKey), blocks1 this one without
		// segments. Upgrade in place: the version key changes (an older
		// build must not read a fold it does not know), and G keys under
		// blocks1 can only be ones an older build left behind (it
		// rebuilt the index without knowing them): drop them.
		b := s.db.NewBatch()
		defer b.Close()
		if string(have) == searchIndexV1 {
			if err := b.DeleteRange([]byte{pfxSegment}, []byte{pfxSegment + 1}, nil); err != nil {
				return err
			}
		}
		if err := b.Set(searchKey, []byte(searchIndexVersion), nil); err != nil {
			return err
		}
		if err := s.spaceFor(int(b.Len())); err != nil {
			return err
		}
		s.log.Info("store: search index upgraded in place", "from", string(have), "to", searchIndexVersion)
		return b.Commit(pebble.Sync)
	}
	return s.buildSearch(string(have))
}

// getMeta reads a metadata key from the database.
func (s *Store) getMeta(key []byte) ([]byte, bool, error) { return getValue(s.db, key) }

// getMetaU64 reads a metadata key holding a uint64(8); 0 when absent.
func (s *Store) getMetaU64(key []byte) (uint64, error) {
	v, _, err := getU64(s.db, key)
	return v, err
}

// anySearchKeys reports whether the database holds an S, F or G key.
func (s *Store) anySearchKeys() bool {
	for _, pfx := range []byte{pfxSearch, pfxDoc, pfxSegment} {
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfx}, UpperBound: []byte{pfx + 1}})
		if err != nil {
			return true // be safe: drop whatever is there
		}
		found := it.First()
		it.Close()
		if found {
			return true
		}
	}
	return false
}

// dropSearch adds the removal of the whole search index to b.
func dropSearch(b *pebble.Batch) error {
	if err := b.DeleteRange([]byte{pfxSearch}, []byte{pfxSearch + 1}, nil); err != nil {
		return err
	}
	if err := b.DeleteRange([]byte{pfxDoc}, []byte{pfxDoc + 1}, nil); err != nil {
		return err
	}
	if err := b.DeleteRange([]byte{pfxSegment}, []byte{pfxSegment + 1}, nil); err != nil {
		return err
	}
	if err := b.Delete(searchKey, nil); err != nil {
		return err
	}
	if err := b.Delete(searchFoldKey, nil); err != nil {
		return err
	}
	if err := b.Delete(searchSerialKey, nil); err != nil {
		return err
	}
	return b.Delete(searchDeadKey, nil)
}

// buildSearch drops any index and builds it from every stored event, in
// batches committed without sync; the last batch (the figures in the
// commit state, the version key) is synced. Until that batch commits
// the version key is absent, so an interrupted build starts over at the
// next Open. Bodies are read newest first, so each batch's postings
// cover a serial range older than the previous batch's: one block per
// term per batch, as the writer's, with disjoint ranges.
func (s *Store) buildSearch(old string) error {
	start := time.Now()
	b := s.db.NewBatch()
	if err := dropSearch(b); err != nil {
		b.Close()
		return err
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxBody}, UpperBound: []byte{pfxBody + 1}})
	if err != nil {
		b.Close()
		return err
	}
	var an search.Analyzer
	var st search.Stats
	var key, val []byte
	var pb postingBuf
	pb.reset()
	n, inBatch := 0, 0
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		if len(k) != 9 {
			err = fmt.Errorf("%w: body key %x", errCorrupt, k)
			break
		}
		serial := ^binary.BigEndian.Uint64(k[1:])
		_, raw, ok := decodeBody(it.Value())
		if !ok {
			err = fmt.Errorf("%w: body %d", errCorrupt, serial)
			break
		}
		ev, perr := nostr.ParseEvent(raw, nil)
		if perr != nil {
			err = fmt.Errorf("%w: body %d: %v", errCorrupt, serial, perr)
			break
		}
		doc := an.Analyze(ev)
		n++
		if doc.Empty() {
			continue
		}
		m := eventMeta(ev, serial)
		key = appendDocKey(key[:0], serial)
		val = appendDocValue(val[:0], &ev.ID, ev.CreatedAt, &m)
		if err = b.Set(key, val, nil); err != nil {
			break
		}
		p := posting{kind: uint16(ev.Kind), docLen: uint64(doc.Len)}
		for i := range doc.Terms {
			p.freq = uint8(doc.Terms[i].Freq)
			pb.add(doc.Terms[i].Text, serial, p)
		}
		st.Docs++
		st.TotalLen += int64(doc.Len)
		if inBatch++; inBatch == buildBatchEvents {
			if err = pb.flush(b); err != nil {
				break
			}
			pb.reset()
			if err = s.spaceFor(int(b.Len())); err != nil {
				break
			}
			if err = b.Commit(pebble.NoSync); err != nil {
				break
			}
			b.Close()
			b, inBatch = s.db.NewBatch(), 0
		}
	}
	if cerr := closeIter(it); err == nil {
		err = cerr
	}
	if err == nil {
		err = pb.flush(b)
	}
	if err == nil {
		err = s.setSearchStats(b, st)
	}
	if err == nil {
		err = b.Set(searchKey, []byte(searchIndexVersion), nil)
	}
	if err == nil {
		err = s.spaceFor(int(b.Len()))
	}
	if err == nil {
		err = b.Commit(pebble.Sync)
	}
	b.Close()
	if err != nil {
		return fmt.Errorf("build search index: %w", err)
	}
	if n > 0 || old != "" {
		s.log.Info("store: built the search index", "events", n, "documents", st.Docs,
			"previous", old, "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// searchStream yields the matches of one filter with Search, best first:
// the candidates found through the posting lists are scored (BM25) and
// kept in a heap; each is then checked against the rest of the filter,
// from its doc entry (F) and, when needed, its body, until the filter's
// limit is reached. See docs/storage.md, "Search".
type searchStream struct {
	q     *query
	f     *nostr.Filter
	left  int   // matches still allowed; -1 for no limit
	kinds []int // sorted; nil for any (checked while scoring)
	post  *filterStream
	ids   map[nostr.ID]struct{} // the filter's ids, if any
	built bool
	cands []cand // heap, best first

	// cur is the current match; its body is post.pk and post.raw when
	// post.haveBody.
	cur entry

	// Figures of the build and the reads, for tests.
	steps   int // posting list reads and seeks
	seeks   int // pebble seeks into posting lists
	matched int // candidates scored
}

// cand is a document that has every term of the query.
type cand struct {
	score  float64
	serial uint64
}

// better orders candidates: higher score first, then newer (higher serial).
func (a *cand) better(b *cand) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.serial > b.serial
}

// newSearch returns the stream of a filter with Search, or nil when it
// cannot match (search disabled, an empty filter, a limit of 0). wantBody
// asks for the body of every match (Query).
func (q *query) newSearch(f *nostr.Filter, forQuery, wantBody bool) *searchStream {
	if q.s.opts.DisableSearch || f.Search == "" || f.Empty() || (forQuery && f.HasLimit && f.Limit <= 0) {
		return nil
	}
	ss := &searchStream{q: q, f: f, left: -1}
	if forQuery && f.HasLimit {
		ss.left = f.Limit
	}
	since, until := int64(0), int64(nostr.MaxTimestamp)
	if f.HasSince {
		since = max(since, f.Since)
	}
	if f.HasUntil {
		until = min(until, f.Until)
	}
	// The planner's post-filters, applied to doc entries.
	post := &filterStream{q: q, f: f, left: -1, since: since, until: until, checkTime: true, wantBody: wantBody, budget: -1}
	if f.HasKinds() {
		ss.kinds = slices.Clone(f.Kinds)
		slices.Sort(ss.kinds)
		post.kinds = ss.kinds
	}
	post.setAuthors(f.HasAuthors(), f.Authors)
	post.parseTags = len(f.Tags) > 0
	post.needsBody = post.parseTags || post.authors != nil
	ss.post = post
	if f.HasIDs() {
		ss.ids = make(map[nostr.ID]struct{}, len(f.IDs))
		for _, id := range f.IDs {
			ss.ids[id] = struct{}{}
		}
	}
	return ss
}

// cursor is one term's posting list, read through its own iterator, one
// block at a time: the current block is read in place (its bytes are the
// iterator's value, valid until the iterator moves).
type cursor struct {
	it     *termIter
	prefix []byte
	inv    uint64 // ^serial of the current posting
	p      posting
	blk    blockReader // the current block, positioned after the current posting
	blkMin uint64      // the oldest serial of the block the iterator stands on
	idf    float64
	steps  int
	seeks  int // pebble seeks, for tests
	key    []byte
}

// loadKey reads the key the iterator stands on (valid is its position
// result); it reports false at the end of the list.
func (c *cursor) loadKey(valid bool) (bool, error) {
	if !valid {
		return false, c.it.Error()
	}
	k := c.it.Key()
	if len(k) != len(c.prefix)+8 {
		return false, fmt.Errorf("%w: posting key %x", errCorrupt, k)
	}
	c.blkMin = blockMinSerial(k)
	return true, nil
}

// openBlock starts reading the block the iterator stands on.
func (c *cursor) openBlock() error {
	v, err := c.it.ValueAndErr()
	if err != nil {
		return err
	}
	if !c.blk.reset(c.blkMin, v) {
		return fmt.Errorf("%w: posting block %x = %x", errCorrupt, c.it.Key(), v)
	}
	return nil
}

// load reads the key the iterator stands on and opens its block.
func (c *cursor) load(valid bool) (bool, error) {
	ok, err := c.loadKey(valid)
	if !ok || err != nil {
		return ok, err
	}
	return true, c.openBlock()
}

// step reads the next posting of the current block; it reports false at
// the end of the block.
func (c *cursor) step() (bool, error) {
	ok, err := c.blk.next()
	if err != nil {
		return false, fmt.Errorf("%w %x", err, c.it.Key())
	}
	if ok {
		c.inv, c.p = ^c.blk.serial, c.blk.p
	}
	return ok, nil
}

// stepNew reads the first posting of a block just opened: there is one,
// and it must be older than the posting before (prev, an inverted
// serial; 0 for none).
func (c *cursor) stepNew(prev uint64) (bool, error) {
	ok, err := c.step()
	if err == nil && (!ok || c.inv <= prev) {
		err = fmt.Errorf("%w: posting block %x out of order", errCorrupt, c.it.Key())
	}
	return err == nil, err
}

// first, next and seek each count one step against the budget: a step
// reads one posting, or seeks.
func (c *cursor) first() (bool, error) {
	c.steps++
	ok, err := c.load(c.it.First())
	if !ok || err != nil {
		return ok, err
	}
	return c.stepNew(0)
}

func (c *cursor) next() (bool, error) {
	c.steps++
	ok, err := c.step()
	if ok || err != nil {
		return ok, err
	}
	prev := c.inv
	if ok, err = c.load(c.it.Next()); !ok || err != nil {
		return ok, err
	}
	return c.stepNew(prev)
}

// seek moves to the first posting at or after inv (at or older than its
// serial); the cursor must stand before it. A target within the current
// block is found there, without pebble. Otherwise, since postings of
// common terms are dense, it first steps over a few blocks with Next
// (reading only their keys), which costs a fraction of a seek, then
// seeks to the block holding the target (the one with the newest oldest
// serial at or before it). The whole counts as one step.
func (c *cursor) seek(inv uint64) (bool, error) {
	c.steps++
	target := ^inv
	if target >= c.blkMin {
		return c.scan(inv, 0)
	}
	prev := c.inv
	for i := 0; i < seekNexts; i++ {
		ok, err := c.loadKey(c.it.Next())
		if !ok || err != nil {
			return ok, err
		}
		if target >= c.blkMin {
			if err := c.openBlock(); err != nil {
				return false, err
			}
			return c.scan(inv, prev)
		}
	}
	c.seeks++
	c.key = appendU64(append(c.key[:0], c.prefix...), inv)
	ok, err := c.load(c.it.SeekGE(c.key))
	if !ok || err != nil {
		return ok, err
	}
	return c.scan(inv, prev)
}

// scan reads the current block up to its first posting at or after inv;
// the block's oldest posting is (^inv >= blkMin), so it is found unless
// the block is corrupt. prev is as for stepNew when the block was just
// opened, 0 otherwise.
func (c *cursor) scan(inv, prev uint64) (bool, error) {
	for {
		ok, err := c.step()
		if err != nil {
			return false, err
		}
		if !ok || (prev != 0 && c.inv <= prev) {
			return false, fmt.Errorf("%w: posting block %x out of order", errCorrupt, c.it.Key())
		}
		prev = 0
		if c.inv >= inv {
			return true, nil
		}
	}
}

// seekNexts is how many blocks a seek steps over before it seeks.
const seekNexts = 4

// dfSample is how many postings of each term are counted to estimate its
// document frequency (multi-term queries only).
const dfSample = 1024

// build finds and scores the candidates.
func (ss *searchStream) build() error {
	ss.built = true
	pq := search.ParseQuery(ss.f.Search)
	if len(pq.Terms) == 0 {
		return nil
	}
	q := ss.q
	stats, err := q.searchStats()
	if err != nil {
		return err
	}
	avg := stats.AvgLen()
	curs := make([]*cursor, len(pq.Terms))
	defer func() {
		for _, c := range curs {
			if c != nil {
				c.it.Close()
			}
		}
	}()
	prefixes := make([][]byte, len(pq.Terms))
	for i, t := range pq.Terms {
		prefixes[i] = appendSearchPrefix(nil, []byte(t))
	}
	virt, err := q.segmentBlocks(prefixes)
	if err != nil {
		return err
	}
	floor, err := q.foldFloor()
	if err != nil {
		return err
	}
	for i, prefix := range prefixes {
		// The blocks of a fold under way (oldest serial >= floor) sort
		// first: the lower bound leaves them out.
		lower := prefix
		if floor > 0 {
			lower = appendPostingKey(nil, pq.Terms[i], floor-1)
		}
		it, err := q.snap.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
		if err != nil {
			return err
		}
		curs[i] = &cursor{it: &termIter{virt: virt[i], it: it}, prefix: prefix, idf: 1}
	}
	budget := q.s.opts.SearchPostingsPerTerm
	if len(curs) > 1 {
		if err := ss.estimateIDF(curs, stats); err != nil {
			return err
		}
	}
	for _, c := range curs {
		ok, err := c.first()
		if err != nil || !ok {
			return err
		}
	}
	ss.cands = getCands()
	q.cands = append(q.cands, &ss.cands)
	for {
		// Leapfrog: move every cursor to the oldest of their postings
		// until all stand on the same document.
		target := curs[0].inv
		for _, c := range curs[1:] {
			target = max(target, c.inv)
		}
		agree := true
		for _, c := range curs {
			if c.inv == target {
				continue
			}
			agree = false
			if c.steps >= budget {
				return ss.done(curs)
			}
			ok, err := c.seek(target)
			if err != nil || !ok {
				ss.done(curs)
				return err
			}
			break
		}
		if !agree {
			continue
		}
		ss.score(curs, avg)
		c := curs[0]
		if c.steps >= budget {
			return ss.done(curs)
		}
		ok, err := c.next()
		if err != nil || !ok {
			ss.done(curs)
			return err
		}
	}
}

// score adds the document all cursors stand on, if its kind is wanted.
func (ss *searchStream) score(curs []*cursor, avg float64) {
	c0 := curs[0]
	if ss.kinds != nil {
		if _, ok := slices.BinarySearch(ss.kinds, int(c0.p.kind)); !ok {
			return
		}
	}
	s := 0.0
	dl := float64(c0.p.docLen)
	for _, c := range curs {
		s += c.idf * search.TF(float64(c.p.freq), dl, avg)
	}
	ss.cands = append(ss.cands, cand{score: s, serial: ^c0.inv})
	ss.matched++
}

// done records the work and heapifies the candidates.
func (ss *searchStream) done(curs []*cursor) error {
	for _, c := range curs {
		ss.steps += c.steps
		ss.seeks += c.seeks
	}
	for i := len(ss.cands)/2 - 1; i >= 0; i-- {
		ss.down(i)
	}
	return nil
}

// estimateIDF sets each cursor's IDF from its document frequency: exact
// when the term has at most dfSample postings, otherwise extrapolated from
// the share of the serial range its newest blocks (at least dfSample
// postings, counted from the block headers) span. Postings of removed
// events count too (see writer.index).
func (ss *searchStream) estimateIDF(curs []*cursor, stats search.Stats) error {
	newest, err := ss.q.newestSerial()
	if err != nil {
		return err
	}
	for _, c := range curs {
		n := 0
		var last uint64
		valid := c.it.First()
		for ; valid && n < dfSample; valid = c.it.Next() {
			v, err := c.it.ValueAndErr()
			if err != nil {
				return err
			}
			cnt, ok := blockCount(v)
			if !ok || len(c.it.Key()) != len(c.prefix)+8 {
				return fmt.Errorf("%w: posting block %x = %x", errCorrupt, c.it.Key(), v)
			}
			n += cnt
			last = blockMinSerial(c.it.Key())
		}
		if err := c.it.Error(); err != nil {
			return err
		}
		df := float64(n)
		if n >= dfSample && valid && newest >= last {
			df = float64(n) * float64(newest) / float64(newest-last+1)
		}
		c.idf = search.IDF(float64(max(stats.Docs, 1)), df)
	}
	return nil
}

func (ss *searchStream) down(i int) {
	h := ss.cands
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].better(&h[l]) {
			m = r
		}
		if !h[m].better(&h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// pop removes the best candidate.
func (ss *searchStream) pop() cand {
	h := ss.cands
	c := h[0]
	n := len(h) - 1
	h[0] = h[n]
	ss.cands = h[:n]
	if n > 1 {
		ss.down(0)
	}
	return c
}

// next moves to the next match, best first; it reports false at the end.
// Each candidate is checked against the whole filter (and expiration)
// from its doc entry, and from its body only when a condition needs it,
// so a rejected candidate just makes way for the next one.
func (ss *searchStream) next() (bool, error) {
	if !ss.built {
		if err := ss.build(); err != nil {
			return false, err
		}
	}
	for ss.left != 0 && len(ss.cands) > 0 {
		c := ss.pop()
		e, ok, err := ss.q.doc(c.serial)
		if err != nil {
			return false, err
		}
		if !ok {
			continue // a removed event whose postings remain (writer.index)
		}
		if ss.ids != nil {
			if _, ok := ss.ids[e.id]; !ok {
				continue
			}
		}
		ok, err = ss.post.check(&e)
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		ss.cur = e
		if ss.left > 0 {
			ss.left--
		}
		return true, nil
	}
	return false, nil
}

// candPool recycles candidate heaps between queries.
var candPool = sync.Pool{New: func() any { return new([]cand) }}

func getCands() []cand { return (*candPool.Get().(*[]cand))[:0] }

func putCands(c []cand) {
	if cap(c) > 0 && cap(c) <= 1<<20 {
		c = c[:0]
		candPool.Put(&c)
	}
}

// doc reads the doc entry (F) with this serial. It reports false when
// there is none: the event was removed, and the posting that led here is
// one its removal left in place (writer.index).
func (q *query) doc(serial uint64) (entry, bool, error) {
	if q.docIt == nil {
		it, err := q.snap.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxDoc}, UpperBound: []byte{pfxDoc + 1}})
		if err != nil {
			return entry{}, false, err
		}
		q.docIt = it
	}
	q.keyBuf = appendDocKey(q.keyBuf[:0], serial)
	if !q.docIt.SeekGE(q.keyBuf) || !bytes.Equal(q.docIt.Key(), q.keyBuf) {
		return entry{}, false, q.docIt.Error()
	}
	v, err := q.docIt.ValueAndErr()
	if err != nil {
		return entry{}, false, err
	}
	id, ts, m, ok := decodeDocValue(v)
	if !ok || m.serial != serial {
		return entry{}, false, fmt.Errorf("%w: search doc %d = %x", errCorrupt, serial, v)
	}
	return entry{createdAt: ts, id: id, m: m}, true, nil
}

// searchStats reads the collection figures from the query's snapshot:
// from the commit state, or from searchStatsKey in a formatV2 database
// (open read-only).
func (q *query) searchStats() (search.Stats, error) {
	c, full, err := q.commitState()
	if full || err != nil {
		return c.search, err
	}
	v, found, err := getValue(q.snap, searchStatsKey)
	if !found || err != nil {
		return search.Stats{}, err
	}
	st, ok := decodeSearchStats(v)
	if !ok {
		return st, fmt.Errorf("%w: search stats %x", errCorrupt, v)
	}
	return st, nil
}

// newestSerial returns the highest serial stored (0 in an empty store).
func (q *query) newestSerial() (uint64, error) {
	it, err := q.snap.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxBody}, UpperBound: []byte{pfxBody + 1}})
	if err != nil {
		return 0, err
	}
	var serial uint64
	if it.First() && len(it.Key()) == 9 {
		serial = ^binary.BigEndian.Uint64(it.Key()[1:])
	}
	return serial, closeIter(it)
}
