package cluster

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// feedStore makes the embedded pebble store a store.Feed, for these tests
// only: it remembers when each event was committed (the writer's done
// callback, which runs right after the commit) and with which commit
// position, and answers CommittedSince from that list, reading the bodies
// back from the store (so events removed since are left out). Two or three
// test relays share one instance, as nodes share one database.
//
// Tests on the PostgreSQL store itself (internal/store/postgres), whose
// CommittedSince is the store's own, are protect_test.go here (through
// internal/pgtest) and the multi-process ones in internal/e2e.
type feedStore struct {
	store.Store
	mu  sync.Mutex
	log []committed // in commit order

	failMu sync.Mutex
	fail   error // returned by CommittedSince while set
}

type committed struct {
	at  time.Time
	id  nostr.ID
	seq uint64
}

func newFeedStore(st store.Store) *feedStore { return &feedStore{Store: st} }

func (f *feedStore) note(id nostr.ID, seq uint64) {
	f.mu.Lock()
	f.log = append(f.log, committed{at: time.Now(), id: id, seq: seq})
	f.mu.Unlock()
}

// Submit wraps the done callback to record the commit.
func (f *feedStore) Submit(ctx context.Context, ev *nostr.Event, done func(store.SaveResult)) error {
	return f.Store.Submit(ctx, ev, func(res store.SaveResult) {
		if res.Outcome == store.Stored {
			f.note(ev.ID, res.Seq)
		}
		done(res)
	})
}

// Save records the commits of the events it stored.
func (f *feedStore) Save(ctx context.Context, evs []*nostr.Event) ([]store.SaveResult, error) {
	res, err := f.Store.Save(ctx, evs)
	for i, r := range res {
		if r.Outcome == store.Stored {
			f.note(evs[i].ID, r.Seq)
		}
	}
	return res, err
}

// setFail makes CommittedSince fail with err (nil: work again).
func (f *feedStore) setFail(err error) {
	f.failMu.Lock()
	f.fail = err
	f.failMu.Unlock()
}

// CommittedSince implements store.Feed.
func (f *feedStore) CommittedSince(ctx context.Context, since time.Time) (store.Iterator, error) {
	f.failMu.Lock()
	err := f.fail
	f.failMu.Unlock()
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	i := sort.Search(len(f.log), func(i int) bool { return !f.log[i].at.Before(since) })
	list := append([]committed(nil), f.log[i:]...)
	f.mu.Unlock()
	out := &feedIter{}
	if len(list) == 0 {
		return out, nil
	}
	ids := make([]nostr.ID, len(list))
	for i, c := range list {
		ids[i] = c.id
	}
	it, err := f.Store.Query(ctx, []nostr.Filter{{IDs: ids, Present: nostr.PresentIDs}})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	bodies := make(map[nostr.ID]store.Record, len(list))
	for it.Next() {
		r := *it.Record()
		r.Raw = append([]byte(nil), r.Raw...)
		bodies[r.ID] = r
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	for _, c := range list {
		if r, ok := bodies[c.id]; ok {
			r.Seq = c.seq
			out.recs = append(out.recs, r)
		}
	}
	return out, nil
}

// feedIter iterates over records read in advance.
type feedIter struct {
	recs []store.Record
	i    int
}

func (it *feedIter) Next() bool {
	if it.i >= len(it.recs) {
		return false
	}
	it.i++
	return true
}
func (it *feedIter) Record() *store.Record    { return &it.recs[it.i-1] }
func (it *feedIter) Err() error               { return nil }
func (it *feedIter) Close() error             { return nil }
func (it *feedIter) Snapshot() store.Snapshot { return store.Snapshot{} }
