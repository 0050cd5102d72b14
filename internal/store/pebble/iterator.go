package pebble

import (
	"context"
	"sync"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

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
	c, _, err := q.commitState()
	if err != nil {
		q.close()
		return nil, err
	}
	it.snap = store.Snapshot{Low: c.pos + 1, High: c.pos + 1}
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
