package pebble

import (
	"cmp"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// postingBuf collects the postings of one write batch per term, so that
// the batch writes one posting block per term (a few per term when it has
// more than maxBlockPostings) instead of one key per term per event:
// pebble's cost is per key. It is reused from batch to batch; adding a
// posting allocates only for a term new to the buffer or a list that
// outgrows its capacity. Not safe for concurrent use.
type postingBuf struct {
	terms map[string]*termPostings
	used  []*termPostings // the terms of the current batch
	gen   uint64          // the current batch; a term's list is stale unless its gen is this
	n     int             // postings in the current batch
	keep  int             // the longest list kept between batches (0: maxBufPostings)
	key   []byte
	val   []byte
}

// termPostings is the current batch's postings of one term, in the order
// added.
type termPostings struct {
	term string
	gen  uint64
	ps   []blockPosting
}

// Bounds on what the buffer keeps between batches: a buffer that has seen
// more terms is dropped at the next reset (real text has a long tail of
// terms seen once), and so is a list that grew larger (a big import).
const (
	maxBufTerms    = 1 << 16
	maxBufPostings = 4 * maxBlockPostings
)

// reset empties the buffer for a new batch.
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
	pb.n = 0
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

// addString is add with the term as a string.
func (pb *postingBuf) addString(term string, serial uint64, p posting) {
	tp := pb.terms[term]
	if tp == nil {
		tp = &termPostings{term: term}
		pb.terms[term] = tp
	}
	pb.addTo(tp, serial, p)
}

func (pb *postingBuf) addTo(tp *termPostings, serial uint64, p posting) {
	if tp.gen != pb.gen {
		tp.gen = pb.gen
		tp.ps = tp.ps[:0]
		pb.used = append(pb.used, tp)
	}
	tp.ps = append(tp.ps, blockPosting{serial: serial, p: p})
	pb.n++
}

// drop removes the posting of the document serial from term's list, if
// there; the lists must be oldest first (the writer's order). It reports
// whether it was there.
func (pb *postingBuf) drop(term []byte, serial uint64) bool {
	tp := pb.terms[string(term)]
	if tp == nil || tp.gen != pb.gen {
		return false
	}
	i, ok := slices.BinarySearchFunc(tp.ps, serial, func(bp blockPosting, s uint64) int { return cmp.Compare(bp.serial, s) })
	if ok {
		tp.ps = slices.Delete(tp.ps, i, i+1)
		pb.n--
	}
	return ok
}

// blocks calls fn with every block of the buffer, in S key order: the
// terms by length then bytes, each term's postings newest first in
// blocks of at most maxBlockPostings. newestFirst says the order the
// postings were added in (the writer adds oldest first, a rebuild newest
// first); the lists are reversed in place, so the buffer must be reset
// before the next batch.
func (pb *postingBuf) blocks(newestFirst bool, fn func(term string, blk []blockPosting) error) error {
	// Terms in key order (length first, as in the key): a memtable takes
	// ordered inserts a little faster.
	slices.SortFunc(pb.used, func(x, y *termPostings) int {
		if len(x.term) != len(y.term) {
			return len(x.term) - len(y.term)
		}
		return strings.Compare(x.term, y.term)
	})
	for _, tp := range pb.used {
		ps := tp.ps
		if !newestFirst {
			slices.Reverse(ps)
		}
		for len(ps) > 0 {
			blk := ps[:min(len(ps), maxBlockPostings)]
			ps = ps[len(blk):]
			if err := fn(tp.term, blk); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush writes the blocks of every term into b (see blocks), each
// keyed by its oldest serial. It returns the number of blocks written.
func (pb *postingBuf) flush(b *pebble.Batch, newestFirst bool) (int, error) {
	n := 0
	err := pb.blocks(newestFirst, func(term string, blk []blockPosting) error {
		pb.key = appendPostingKey(pb.key[:0], term, blk[len(blk)-1].serial)
		pb.val = appendBlock(pb.val[:0], blk)
		n++
		return b.Set(pb.key, pb.val, nil)
	})
	return n, err
}
