package pebble

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Posting segments (G keys). A write batch of the writer does not write
// one S block per term it holds: it writes all of its blocks into one G
// key, a segment, and the writer keeps the postings of the segments in
// memory (writer.pend). Once the segments hold foldPostings postings or
// number maxSegments, the next batch folds them: the postings of every
// segment and its own become S blocks, one per term (more past
// maxBlockPostings), and the G keys are deleted (one by one: see
// finishFold), by that batch or, for a fold of more than foldChunk
// blocks, by that batch and the next few (staged folds, below). pebble's
// cost is per key, and a batch of a few events under load would
// otherwise write a key per distinct term it holds; the fold writes a
// key per distinct term of hundreds of batches. A search reads the
// segments of its snapshot (at most maxSegments+foldBatches) as blocks
// newer than any S block it counts (segmentBlocks). See docs/storage.md,
// "Search".

// Fold thresholds: the segments are folded into S blocks by the batch
// that would take them past maxSegments segments or foldPostings
// postings; a batch holding bigFoldPostings postings or more folds at
// once (a bulk import gains nothing from a segment).
const (
	maxSegments     = 128
	foldPostings    = 1 << 16
	bigFoldPostings = foldPostings / 4
)

// Staged folds. A fold of more than foldChunk blocks is written by
// several batches, so that no batch holds the writer (and the OK of
// every event queued behind it) for the whole fold: a fold of the 128
// segments of notes in natural language writes about 5,000 blocks, 10 ms
// of the writer's time in one batch. Each batch of a staged fold writes
// foldState.per blocks: foldChunk, or more for a fold so large that it
// would otherwise take more than foldBatches batches.
const (
	foldChunk   = 256
	foldBatches = 32
)

// foldState is a staged fold under way: the postings of the segments it
// folds (no batch adds to them), its blocks in S key order, and its
// segments' keys. While it is under way, searchFoldKey holds the keys
// of its first and last segment, readers skip the S blocks whose oldest
// serial is at or above the first (the fold's, every one of them: its
// postings are all newer than any earlier fold's) and read its segments
// instead, and batches write their own postings as new segments. The
// batch that writes its last block deletes its segments and
// searchFoldKey. A restart or a failed commit starts it over from its
// first block (loadPending): a block is written again with the same key
// and value, as the segments are the same.
type foldState struct {
	postings []blockPosting // the fold's, copied out of w.pend
	blocks   []foldBlock
	next     int      // blocks[:next] are written, in this batch or committed ones
	per      int      // blocks a batch writes
	keys     []uint64 // its segments' keys (oldest serials), oldest first
	marked   bool     // searchFoldKey is written (a staged fold)
}

// maxFoldKeep is the largest fold buffer (postings) kept between folds:
// the most a fold of segments holds (the segments stay within
// foldPostings, and a batch that would take them past it brings fewer
// than bigFoldPostings of its own).
const maxFoldKeep = foldPostings + bigFoldPostings

// foldBlock is one S block of a fold: postings[from:to], newest first.
type foldBlock struct {
	term     string
	from, to int
}

func (f *foldState) active() bool { return len(f.keys) > 0 }

// freeze makes the blocks of pb the fold's, from the first, copying
// their postings newest first (pb's lists stay as they are): the caller
// resets pb, which goes on as the buffer of the segments that come after
// (one buffer for all of them keeps its terms and lists from fold to
// fold, as the single fold did; the copy costs less than a second
// buffer's misses).
//
// The postings are copied into one buffer sized for all of them at once
// and kept for the next fold, unless a fold larger than the writer's own
// (an import's, bigFoldPostings or more in one batch) grew it past
// maxFoldKeep. (Grown by appending, the buffer of a fold that the
// postings limit starts, the usual one under load, ended past
// foldPostings, so it was dropped and grown again at every fold, on
// fresh pages: 3.6 KB of the 5.5 KB the writer allocated an event in
// synced batches of 64, docs/BENCHMARKS.md, issue 19.)
func (f *foldState) freeze(pb *postingBuf) {
	clear(f.blocks)
	f.blocks, f.next = f.blocks[:0], 0
	n := 0
	for _, tp := range pb.used {
		n += len(tp.ps)
	}
	if cap(f.postings) > maxFoldKeep {
		f.postings = nil
	}
	f.postings = slices.Grow(f.postings[:0], n)
	sortTerms(pb.used)
	for _, tp := range pb.used {
		from := len(f.postings)
		f.postings = appendNewestFirst(f.postings, tp.ps)
		splitBlocks(f.postings[from:], func(blk []blockPosting) error {
			f.blocks = append(f.blocks, foldBlock{term: tp.term, from: from, to: from + len(blk)})
			from += len(blk)
			return nil
		})
	}
	f.per = max(foldChunk, (len(f.blocks)+foldBatches-1)/foldBatches)
}

// reset forgets the fold (complete, or to be read again).
func (f *foldState) reset() {
	clear(f.blocks)
	f.blocks, f.next, f.keys, f.marked = f.blocks[:0], 0, f.keys[:0], false
}

// foldStep writes the next blocks of the fold under way into the batch,
// and completes it once they are all written. It returns the number of
// blocks written.
func (w *writer) foldStep() (int, error) {
	if w.fold.next+w.fold.per >= len(w.fold.blocks) {
		return w.finishFold()
	}
	return w.writeFoldBlocks(w.fold.next + w.fold.per)
}

// finishFold writes the fold's blocks not written yet, deletes its
// segments and searchFoldKey, and forgets it. It returns the number of
// blocks written.
func (w *writer) finishFold() (int, error) {
	k, err := w.writeFoldBlocks(len(w.fold.blocks))
	if err != nil {
		return k, err
	}
	// Point deletions, not a range deletion: a range tombstone in the
	// memtable makes every later point read (the writer's duplicate
	// checks above all) build range-deletion iterators until it is
	// flushed.
	for _, key := range w.fold.keys {
		w.keyBuf = appendSegmentKey(w.keyBuf[:0], key)
		if err := w.b.Delete(w.keyBuf, nil); err != nil {
			return k, err
		}
	}
	if w.fold.marked {
		if err := w.b.Delete(searchFoldKey, nil); err != nil {
			return k, err
		}
	}
	w.fold.reset()
	return k, nil
}

// writeFoldBlocks writes the fold's blocks up to blocks[upto].
func (w *writer) writeFoldBlocks(upto int) (int, error) {
	k := 0
	for ; w.fold.next < upto; w.fold.next++ {
		fb := &w.fold.blocks[w.fold.next]
		ps := w.fold.postings[fb.from:fb.to]
		w.keyBuf = appendPostingKey(w.keyBuf[:0], fb.term, ps[len(ps)-1].serial)
		w.valBuf = appendBlock(w.valBuf[:0], ps)
		if err := w.b.Set(w.keyBuf, w.valBuf, nil); err != nil {
			return k, err
		}
		k++
	}
	return k, nil
}

// decodeFold decodes searchFoldKey's value: the keys of the first and
// last segment of the fold under way.
func decodeFold(v []byte) (first, last uint64, ok bool) {
	if len(v) != 16 {
		return 0, 0, false
	}
	first, last = binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])
	return first, last, first > 0 && first <= last
}

// foldFloor returns the oldest serial at or above which the snapshot's S
// blocks belong to a fold under way (0: none is).
func (q *query) foldFloor() (uint64, error) {
	v, ok, err := getValue(q.snap, searchFoldKey)
	if err != nil || !ok {
		return 0, err
	}
	first, _, good := decodeFold(v)
	if !good {
		return 0, fmt.Errorf("%w: search fold %x", errCorrupt, v)
	}
	return first, nil
}

// segmentKey is G ^minSerial: later segments sort first, as S blocks do.
func appendSegmentKey(dst []byte, minSerial uint64) []byte {
	return appendU64(append(dst, pfxSegment), ^minSerial)
}

// A segment value is
//
//	n(uvarint) offset(4)*n entries
//
// where entry i starts offset[i] bytes into entries and ends where entry
// i+1 starts (the last one at the end of the value), and is
//
//	len(1) term minSerial(8) block
//
// with block an S block's value (appendBlock) whose oldest serial is
// minSerial. Entries are in S key order: by term (length first), and the
// blocks of one term newest first. A reader finds a term by binary
// search over the offsets, without decoding the rest.
type segment struct {
	offs []byte // n big-endian uint32
	ents []byte
	n    int
}

// segmentWriter builds a segment value.
type segmentWriter struct {
	offs []uint32
	ents []byte
}

func (sw *segmentWriter) reset() { sw.offs, sw.ents = sw.offs[:0], sw.ents[:0] }

// add appends the entry of one block: ps newest first.
func (sw *segmentWriter) add(term string, ps []blockPosting) {
	sw.offs = append(sw.offs, uint32(len(sw.ents)))
	sw.ents = append(append(sw.ents, byte(len(term))), term...)
	sw.ents = appendU64(sw.ents, ps[len(ps)-1].serial)
	sw.ents = appendBlock(sw.ents, ps)
}

// appendValue appends the segment value.
func (sw *segmentWriter) appendValue(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(sw.offs)))
	for _, o := range sw.offs {
		dst = binary.BigEndian.AppendUint32(dst, o)
	}
	return append(dst, sw.ents...)
}

// parseSegment reads the header of a segment value (in place). It
// reports false when the header does not decode; entries are checked as
// they are read.
func parseSegment(v []byte) (segment, bool) {
	n, k := binary.Uvarint(v)
	if k <= 0 || n == 0 || n > uint64(len(v)-k)/4 {
		return segment{}, false
	}
	offs := v[k : k+4*int(n)]
	return segment{offs: offs, ents: v[k+4*int(n):], n: int(n)}, true
}

func (sg *segment) off(i int) int {
	if i == sg.n {
		return len(sg.ents)
	}
	return int(binary.BigEndian.Uint32(sg.offs[4*i:]))
}

// entry returns entry i: its term prefix (len(1) term), the oldest
// serial of its block, and the block.
func (sg *segment) entry(i int) (lterm []byte, minSerial uint64, block []byte, ok bool) {
	a, b := sg.off(i), sg.off(i+1)
	if a > b || b > len(sg.ents) || b-a < 1 {
		return nil, 0, nil, false
	}
	e := sg.ents[a:b]
	tl := int(e[0])
	if tl == 0 || len(e) < 1+tl+8+1 {
		return nil, 0, nil, false
	}
	return e[:1+tl], binary.BigEndian.Uint64(e[1+tl:]), e[1+tl+8:], true
}

// find returns the index of the first entry whose term prefix is at or
// after lterm (len(1) term), n if none; it reports false on an entry
// that does not decode.
func (sg *segment) find(lterm []byte) (int, bool) {
	lo, hi := 0, sg.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		t, _, _, ok := sg.entry(m)
		if !ok {
			return 0, false
		}
		if bytes.Compare(t, lterm) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, true
}

// vblock is a posting block read from a segment: its S key (the key it
// would have as an S block) and its value (a copy).
type vblock struct {
	key, val []byte
}

// segmentBlocks returns, for each term prefix (S len term), the blocks
// of that term in the segments of the query's snapshot, newest first.
// They are all newer than any S block of the snapshot that a reader
// counts: the batch that completes a fold deletes its segments, and
// later segments hold later serials (see foldState for the blocks of a
// fold under way).
func (q *query) segmentBlocks(prefixes [][]byte) ([][]vblock, error) {
	out := make([][]vblock, len(prefixes))
	if !q.s.segments {
		return out, nil
	}
	it, err := q.snap.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxSegment}, UpperBound: []byte{pfxSegment + 1}})
	if err != nil {
		return nil, err
	}
	// The keys and values are copied into one buffer (the iterator's
	// bytes do not outlive its position), sliced once it is complete.
	type span struct{ term, key, val, end int }
	var buf []byte
	var spans []span
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return nil, err
		}
		sg, ok := parseSegment(v)
		if !ok || len(it.Key()) != 9 {
			it.Close()
			return nil, fmt.Errorf("%w: posting segment %x", errCorrupt, it.Key())
		}
		for i, pfx := range prefixes {
			lterm := pfx[1:]
			j, ok := sg.find(lterm)
			for ; ok && j < sg.n; j++ {
				t, minSerial, blk, good := sg.entry(j)
				if !good {
					ok = false
					break
				}
				if !bytes.Equal(t, lterm) {
					break
				}
				sp := span{term: i, key: len(buf)}
				buf = appendU64(append(buf, pfx...), ^minSerial)
				sp.val = len(buf)
				buf = append(buf, blk...)
				sp.end = len(buf)
				spans = append(spans, sp)
			}
			if !ok {
				it.Close()
				return nil, fmt.Errorf("%w: posting segment %x", errCorrupt, it.Key())
			}
		}
	}
	for _, sp := range spans {
		out[sp.term] = append(out[sp.term], vblock{key: buf[sp.key:sp.val:sp.val], val: buf[sp.val:sp.end:sp.end]})
	}
	return out, closeIter(it)
}

// termIter reads the blocks of one term: first the blocks from segments
// (virt, newest first), then the S keys through the pebble iterator. It
// has the few iterator methods the search cursor uses.
type termIter struct {
	virt []vblock
	vi   int // index of the current block in virt; len(virt): on it
	it   *pebble.Iterator
}

func (t *termIter) First() bool {
	t.vi = 0
	if len(t.virt) > 0 {
		return true
	}
	return t.it.First()
}

func (t *termIter) Next() bool {
	if t.vi < len(t.virt) {
		t.vi++
		if t.vi < len(t.virt) {
			return true
		}
		return t.it.First()
	}
	return t.it.Next()
}

func (t *termIter) SeekGE(key []byte) bool {
	if n := len(t.virt); n > 0 && bytes.Compare(key, t.virt[n-1].key) <= 0 {
		i := 0
		for bytes.Compare(t.virt[i].key, key) < 0 {
			i++
		}
		t.vi = i
		return true
	}
	t.vi = len(t.virt)
	return t.it.SeekGE(key)
}

func (t *termIter) Key() []byte {
	if t.vi < len(t.virt) {
		return t.virt[t.vi].key
	}
	return t.it.Key()
}

func (t *termIter) ValueAndErr() ([]byte, error) {
	if t.vi < len(t.virt) {
		return t.virt[t.vi].val, nil
	}
	return t.it.ValueAndErr()
}

func (t *termIter) Error() error { return t.it.Error() }

func (t *termIter) Close() error { return t.it.Close() }

// loadPending reads the segments of the database into w.pend (the
// writer's copy of their postings, oldest first per term), pendSegs and
// pendPostings, or into w.fold for those of a staged fold under way
// (searchFoldKey), which starts over from its first block: at open, and
// after a failed commit (which may have changed w.pend and w.fold).
func (w *writer) loadPending() error {
	w.pend.reset()
	w.pendSegs, w.pendPostings = 0, 0
	w.pendKeys = w.pendKeys[:0]
	w.fold.reset()
	v, folding, err := getValue(w.s.db, searchFoldKey)
	if err != nil {
		return err
	}
	var foldFirst, foldLast uint64
	frozen := false // the fold's postings are moved out of w.pend
	if folding {
		var ok bool
		if foldFirst, foldLast, ok = decodeFold(v); !ok {
			return fmt.Errorf("%w: search fold %x (petrel compact --rebuild-search rebuilds the search index)", errCorrupt, v)
		}
	}
	it, err := w.s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxSegment}, UpperBound: []byte{pfxSegment + 1}})
	if err != nil {
		return err
	}
	var ps []blockPosting
	// Oldest segment first, and within one the entries backwards, so
	// that each term's postings come oldest first.
	for valid := it.Last(); valid; valid = it.Prev() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return err
		}
		sg, ok := parseSegment(v)
		bad := fmt.Errorf("%w: posting segment %x", errCorrupt, it.Key())
		if !ok || len(it.Key()) != 9 {
			it.Close()
			return bad
		}
		key := ^binary.BigEndian.Uint64(it.Key()[1:])
		inFold := folding && key <= foldLast
		if inFold && key < foldFirst {
			it.Close()
			return fmt.Errorf("%w: posting segment %x older than the fold under way (%d-%d)", errCorrupt, it.Key(), foldFirst, foldLast)
		}
		if folding && !inFold && !frozen {
			// The fold's segments come first (oldest first): w.pend
			// holds them all.
			w.fold.freeze(&w.pend)
			w.pend.reset()
			frozen = true
		}
		for i := sg.n - 1; i >= 0; i-- {
			lterm, minSerial, blk, ok := sg.entry(i)
			var r blockReader
			if !ok || !r.reset(minSerial, blk) {
				it.Close()
				return bad
			}
			ps = ps[:0]
			for {
				ok, err := r.next()
				if err != nil {
					it.Close()
					return bad
				}
				if !ok {
					break
				}
				ps = append(ps, blockPosting{serial: r.serial, p: r.p})
			}
			for j := len(ps) - 1; j >= 0; j-- {
				w.pend.add(lterm[1:], ps[j].serial, ps[j].p)
			}
			if !inFold {
				w.pendPostings += len(ps)
			}
		}
		if inFold {
			w.fold.keys = append(w.fold.keys, key)
			continue
		}
		w.pendSegs++
		w.pendKeys = append(w.pendKeys, key)
	}
	if err := closeIter(it); err != nil {
		return err
	}
	if folding {
		if !frozen {
			w.fold.freeze(&w.pend)
			w.pend.reset()
		}
		if len(w.fold.keys) == 0 || w.fold.keys[0] != foldFirst || w.fold.keys[len(w.fold.keys)-1] != foldLast {
			w.fold.reset()
			return fmt.Errorf("%w: search fold %d-%d does not match its segments (petrel compact --rebuild-search rebuilds the search index)", errCorrupt, foldFirst, foldLast)
		}
		w.fold.marked = true
	}
	return nil
}
