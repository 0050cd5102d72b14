package pebble

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/petrel-relay/petrel/internal/nostr"
)

// query is the read state shared by the streams of one Query, Count or
// Items call: a pebble snapshot, one iterator over it for index scans,
// and the time used for expiration.
type query struct {
	s       *Store
	srcs    []*source // every range source, to recycle their buffers
	slabs   [][]entry // shared initial buffers, recycled at close
	snap    *pebble.Snapshot
	it      *pebble.Iterator // index scans, created on first use (indexIter)
	bodyIt  *pebble.Iterator // body reads after the first bodyGets (see body)
	bodyGot int              // bodies read with Get
	docIt   *pebble.Iterator // search doc reads, created on first use
	cands   []*[]cand        // search candidate heaps, recycled at close
	now     int64
	keyBuf  []byte
	// commit is the snapshot's commit state (commitState), read once:
	// the iterator takes its position, search its figures.
	commit                 commitState
	commitFull, commitRead bool
}

// commitState returns the commit state of the query's snapshot (see
// readCommit), reading it on first use.
func (q *query) commitState() (c commitState, full bool, err error) {
	if !q.commitRead {
		if q.commit, q.commitFull, err = readCommit(q.snap); err != nil {
			return commitState{}, false, err
		}
		q.commitRead = true
	}
	return q.commit, q.commitFull, nil
}

func (s *Store) newQuery() (*query, error) {
	return &query{s: s, snap: s.db.NewSnapshot(), now: time.Now().Unix()}, nil
}

// indexIter returns the iterator of index scans, created at the first
// call: a lookup by id reads no index range, and a pebble iterator is a
// few KiB of state (fresh memory, hence page faults, in a short command).
func (q *query) indexIter() (*pebble.Iterator, error) {
	if q.it == nil {
		it, err := q.snap.NewIter(nil)
		if err != nil {
			return nil, err
		}
		q.it = it
	}
	return q.it, nil
}

func (q *query) close() error {
	if q.snap == nil {
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
	var err error
	for _, it := range []*pebble.Iterator{q.it, q.bodyIt, q.docIt} {
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

// bodyGets is how many bodies a query reads with Get before it opens
// an iterator for the rest.
const bodyGets = 1

// body reads the body with this serial and appends its raw JSON to
// dst[:0]; it returns the author too. The first body (bodyGets) is read
// with a Get, the rest through one iterator kept open for the query: a
// seek on an open iterator costs a fraction of a Get, which opens its
// sstable iterators anew every time, but opening the iterator positions
// it in every level at once, holding a block of each (with a cache that
// keeps no block, as req --store opens a store, each is fresh memory),
// where a Get reads one table after another and stops at the first that
// has the key. A lookup by one id reads its body with a Get.
func (q *query) body(serial uint64, dst []byte) (nostr.PubKey, []byte, bool, error) {
	if e := q.s.bodies.get(serial); e != nil {
		return e.pk, append(dst[:0], e.raw...), true, nil
	}
	if q.bodyIt == nil && q.bodyGot < bodyGets {
		q.bodyGot++
		q.keyBuf = appendBodyKey(q.keyBuf[:0], serial)
		v, closer, err := q.snap.Get(q.keyBuf)
		if errors.Is(err, pebble.ErrNotFound) {
			return nostr.PubKey{}, dst, false, fmt.Errorf("%w: no body for serial %d", errCorrupt, serial)
		}
		if err != nil {
			return nostr.PubKey{}, dst, false, err
		}
		pk, raw, ok := decodeBody(v)
		if ok {
			dst = append(dst[:0], raw...)
		}
		if cerr := closer.Close(); err == nil {
			err = cerr
		}
		if !ok {
			return pk, dst, false, fmt.Errorf("%w: body %d", errCorrupt, serial)
		}
		return pk, dst, true, err
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
