package pebble

import (
	"cmp"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// postingBuf collects postings per term, so that they are written as one
// posting block per term (a few per term past maxBlockPostings) instead of
// one key per term per event: pebble's cost is per key. The writer's
// buffer (writer.pend) holds the postings of every segment not yet folded
// and those of the batch being built, which it tracks apart (newBatch,
// batchBlocks, drop): one map lookup a posting, where a buffer of the
// batch's own and a copy into the segments' at the end took two. The
// index rebuild uses one a batch (reset, add, flush). Adding a posting
// allocates only for a term new to the buffer or a list that outgrows its
// capacity. Not safe for concurrent use.
type postingBuf struct {
	terms map[string]*termPostings
	used  []*termPostings // the terms with postings since the last reset
	gen   uint64          // a term's list is stale unless its gen is this
	keep  int             // the longest list kept across a reset (0: maxBufPostings)
	// The current batch (newBatch): the terms it added to, its
	// generation and the number of its postings.
	batch []*termPostings
	bgen  uint64
	bn    int
	rev   []blockPosting // batchBlocks' buffer
	key   []byte
	val   []byte
}

// termPostings is the postings of one term since the buffer's last reset,
// in the order added; ps[from:] are the current batch's if bgen is the
// buffer's.
type termPostings struct {
	term string
	gen  uint64
	ps   []blockPosting
	bgen uint64
	from int
}

// Bounds on what the buffer keeps between batches: a buffer that has seen
// more terms is dropped at the next reset (real text has a long tail of
// terms seen once), and so is a list that grew larger (a big import).
const (
	maxBufTerms    = 1 << 16
	maxBufPostings = 4 * maxBlockPostings
)

// reset empties the buffer, and starts a new batch.
func (pb *postingBuf) reset() {
	if pb.terms == nil || len(pb.terms) > maxBufTerms {
		pb.terms = make(map[string]*termPostings)
	} else {
		for _, tp := range pb.used {
			if cap(tp.ps) > max(pb.keep, maxBufPostings) {
				tp.ps = nil
			}
		}
	}
	clear(pb.used)
	pb.used = pb.used[:0]
	pb.gen++
	pb.newBatch()
}

// newBatch starts a new batch: the postings added from now on are its
// own (batchBlocks, drop), and those of earlier batches stay.
func (pb *postingBuf) newBatch() {
	clear(pb.batch)
	pb.batch = pb.batch[:0]
	pb.bgen++
	pb.bn = 0
}

// add adds the posting of the document serial to term's list.
func (pb *postingBuf) add(term []byte, serial uint64, p posting) {
	tp := pb.terms[string(term)]
	if tp == nil {
		tp = &termPostings{term: string(term)}
		pb.terms[tp.term] = tp
	}
	pb.addTo(tp, serial, p)
}

func (pb *postingBuf) addTo(tp *termPostings, serial uint64, p posting) {
	if tp.gen != pb.gen {
		tp.gen = pb.gen
		tp.ps = tp.ps[:0]
		pb.used = append(pb.used, tp)
	}
	if tp.bgen != pb.bgen {
		tp.bgen = pb.bgen
		tp.from = len(tp.ps)
		pb.batch = append(pb.batch, tp)
	}
	tp.ps = append(tp.ps, blockPosting{serial: serial, p: p})
	pb.bn++
}

// drop removes the posting of the document serial from term's list, if
// the current batch added it; the lists must be oldest first (the
// writer's order). It reports whether it was there.
func (pb *postingBuf) drop(term []byte, serial uint64) bool {
	tp := pb.terms[string(term)]
	if tp == nil || tp.gen != pb.gen || tp.bgen != pb.bgen {
		return false
	}
	i, ok := slices.BinarySearchFunc(tp.ps[tp.from:], serial, func(bp blockPosting, s uint64) int { return cmp.Compare(bp.serial, s) })
	if ok {
		tp.ps = slices.Delete(tp.ps, tp.from+i, tp.from+i+1)
		pb.bn--
	}
	return ok
}

// sortTerms sorts terms in S key order: by length, then bytes (a memtable
// takes ordered inserts a little faster).
func sortTerms(terms []*termPostings) {
	slices.SortFunc(terms, func(x, y *termPostings) int {
		if len(x.term) != len(y.term) {
			return len(x.term) - len(y.term)
		}
		return strings.Compare(x.term, y.term)
	})
}

// splitBlocks calls fn with ps, a term's postings newest first, in
// blocks of at most maxBlockPostings, the newest first; it stops at fn's
// first error.
func splitBlocks(ps []blockPosting, fn func(blk []blockPosting) error) error {
	for len(ps) > 0 {
		blk := ps[:min(len(ps), maxBlockPostings)]
		ps = ps[len(blk):]
		if err := fn(blk); err != nil {
			return err
		}
	}
	return nil
}

// appendNewestFirst appends ps, a term's postings oldest first (the
// writer's order), to dst newest first (a block's order).
func appendNewestFirst(dst, ps []blockPosting) []blockPosting {
	n := len(dst)
	dst = append(dst, ps...)
	slices.Reverse(dst[n:])
	return dst
}

// batchBlocks calls fn with every block of the current batch's postings
// in S key order (sortTerms, splitBlocks), leaving the lists as they
// are; blk is valid only during the call.
func (pb *postingBuf) batchBlocks(fn func(term string, blk []blockPosting)) {
	sortTerms(pb.batch)
	for _, tp := range pb.batch {
		pb.rev = appendNewestFirst(pb.rev[:0], tp.ps[tp.from:])
		splitBlocks(pb.rev, func(blk []blockPosting) error {
			fn(tp.term, blk)
			return nil
		})
	}
}

// flush writes the blocks of every term into b, in S key order, each
// keyed by its oldest serial. The postings must have been added newest
// first (an index rebuild's order).
func (pb *postingBuf) flush(b *pebble.Batch) error {
	sortTerms(pb.used)
	for _, tp := range pb.used {
		err := splitBlocks(tp.ps, func(blk []blockPosting) error {
			pb.key = appendPostingKey(pb.key[:0], tp.term, blk[len(blk)-1].serial)
			pb.val = appendBlock(pb.val[:0], blk)
			return b.Set(pb.key, pb.val, nil)
		})
		if err != nil {
			return err
		}
	}
	return nil
}
