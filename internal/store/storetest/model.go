package storetest

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/search"
	"github.com/petrel-relay/petrel/internal/store"
)

// Model is a naive in-memory implementation of the store.Store contract: a
// slice of events scanned in full by every query, plus the tombstones of
// deletions and requests to vanish. It exists to be obviously correct, so
// that backends can be compared with it; it is far too slow for anything
// else.
//
// All methods are safe for concurrent use (one mutex guards everything).
// Submit applies the event at once; done is called later, in order, from
// one callback goroutine (as a real store calls it from its writer), and
// Close waits for the callbacks queued before it.
type Model struct {
	// Now returns the current unix time in seconds; it decides which
	// events are expired in Query, Count and Items. Nil means time.Now.
	// Set it before first use.
	Now func() int64

	// NoSearch turns search off, like a store without a search index:
	// filters with Search then match nothing and SupportsSearch is
	// false. Set it before first use.
	NoSearch bool

	mu       sync.Mutex
	closed   bool
	events   []*nostr.Event
	deleted  map[deletedKey]struct{} // NIP-09 "e" tombstones: (id, deleter)
	addrDel  map[nostr.Address]int64 // NIP-09 "a" tombstones: address -> max created_at
	vanished map[nostr.PubKey]int64  // NIP-62 tombstones: author -> max created_at
	latest   map[nostr.Address]*nostr.Event
	seq      uint64 // commit position of the last call that stored events

	callbacks chan func()   // done callbacks, run in order by runCallbacks
	cbDone    chan struct{} // closed when runCallbacks returns
}

type deletedKey struct {
	id      nostr.ID
	deleter nostr.PubKey
}

var (
	_ store.Store    = (*Model)(nil)
	_ store.Searcher = (*Model)(nil)
)

// SupportsSearch implements store.Searcher.
func (m *Model) SupportsSearch() bool { return !m.NoSearch }

// NewModel returns an empty model.
func NewModel() *Model {
	m := &Model{
		deleted:   make(map[deletedKey]struct{}),
		addrDel:   make(map[nostr.Address]int64),
		vanished:  make(map[nostr.PubKey]int64),
		latest:    make(map[nostr.Address]*nostr.Event),
		callbacks: make(chan func(), 1024),
		cbDone:    make(chan struct{}),
	}
	go m.runCallbacks()
	return m
}

func (m *Model) runCallbacks() {
	defer close(m.cbDone)
	for f := range m.callbacks {
		f()
	}
}

func (m *Model) now() int64 {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now().Unix()
}

// Newer reports whether a wins over b for one replaceable address: a higher
// created_at, or the same created_at and a lower id.
func Newer(a, b *nostr.Event) bool { return store.Newer(a.CreatedAt, &a.ID, b.CreatedAt, &b.ID) }

// CheckEvent is store.CheckEvent.
func CheckEvent(ev *nostr.Event) error { return store.CheckEvent(ev) }

// Save implements store.Store.
func (m *Model) Save(ctx context.Context, events []*nostr.Event) ([]store.SaveResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, store.ErrClosed
	}
	res := make([]store.SaveResult, len(events))
	for i, ev := range events {
		res[i] = m.apply(ev)
	}
	m.commit(res)
	return res, nil
}

// commit gives the Stored results of one call (one commit) its position.
// m.mu must be held.
func (m *Model) commit(res []store.SaveResult) {
	stored := false
	for i := range res {
		if res[i].Outcome == store.Stored {
			res[i].Seq, stored = m.seq+1, true
		}
	}
	if stored {
		m.seq++
	}
}

// Submit implements store.Store.
func (m *Model) Submit(ctx context.Context, ev *nostr.Event, done func(store.SaveResult)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return store.ErrClosed
	}
	res := []store.SaveResult{m.apply(ev)}
	m.commit(res)
	r := res[0]
	m.callbacks <- func() { done(r) } // under mu: Close cannot close the channel meanwhile
	return nil
}

// apply saves one event. m.mu must be held.
func (m *Model) apply(ev *nostr.Event) store.SaveResult {
	if err := CheckEvent(ev); err != nil {
		return store.SaveResult{Outcome: store.Failed, Err: err}
	}
	if m.find(ev.ID) >= 0 {
		return store.SaveResult{Outcome: store.Duplicate}
	}
	if ev.Kind != nostr.KindDeletion && ev.Kind != nostr.KindRequestToVanish {
		if _, ok := m.deleted[deletedKey{ev.ID, ev.PubKey}]; ok {
			return store.SaveResult{Outcome: store.Deleted}
		}
	}
	if ts, ok := m.vanished[ev.PubKey]; ok && ev.CreatedAt <= ts {
		return store.SaveResult{Outcome: store.Deleted}
	}
	if ev.Kind == nostr.KindGiftWrap {
		for pk, ts := range m.vanished {
			if ev.CreatedAt <= ts && addressedTo(ev, pk) {
				return store.SaveResult{Outcome: store.Deleted}
			}
		}
	}
	if len(ev.Raw) == 0 {
		c := *ev
		c.Raw = nostr.Serialize(ev)
		ev = &c
	}
	var removed []nostr.ID
	addr, isAddr := ev.Address()
	if isAddr {
		if ts, ok := m.addrDel[addr]; ok && ev.CreatedAt <= ts {
			return store.SaveResult{Outcome: store.Deleted}
		}
		if cur := m.latest[addr]; cur != nil {
			if !Newer(ev, cur) {
				return store.SaveResult{Outcome: store.Superseded}
			}
			m.remove(m.find(cur.ID))
			removed = append(removed, cur.ID)
		}
		m.latest[addr] = ev
	}
	m.events = append(m.events, ev)

	switch ev.Kind {
	case nostr.KindDeletion:
		ids, addrs := ev.DeletionTargets()
		for _, id := range ids {
			m.deleted[deletedKey{id, ev.PubKey}] = struct{}{}
			if i := m.find(id); i >= 0 {
				t := m.events[i]
				if t.PubKey == ev.PubKey && t.Kind != nostr.KindDeletion && t.Kind != nostr.KindRequestToVanish {
					m.remove(i)
					removed = append(removed, id)
				}
			}
		}
		for _, a := range addrs {
			if a.PubKey != ev.PubKey || !(nostr.IsReplaceable(a.Kind) || nostr.IsAddressable(a.Kind)) {
				continue
			}
			if ts, ok := m.addrDel[a]; !ok || ev.CreatedAt > ts {
				m.addrDel[a] = ev.CreatedAt
			}
			if cur := m.latest[a]; cur != nil && cur.CreatedAt <= ev.CreatedAt {
				m.remove(m.find(cur.ID))
				removed = append(removed, cur.ID)
			}
		}
	case nostr.KindRequestToVanish:
		if ts, ok := m.vanished[ev.PubKey]; !ok || ev.CreatedAt > ts {
			m.vanished[ev.PubKey] = ev.CreatedAt
		}
		for i := 0; i < len(m.events); {
			t := m.events[i]
			mine := t.PubKey == ev.PubKey && t.ID != ev.ID
			wrap := t.Kind == nostr.KindGiftWrap && addressedTo(t, ev.PubKey)
			if (mine || wrap) && t.CreatedAt <= ev.CreatedAt {
				removed = append(removed, t.ID)
				m.remove(i)
				continue
			}
			i++
		}
	}
	return store.SaveResult{Outcome: store.Stored, Removed: removed}
}

// addressedTo reports whether ev has a "p" tag naming pk (lowercase hex).
func addressedTo(ev *nostr.Event, pk nostr.PubKey) bool {
	h := pk.Hex()
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == "p" && t[1] == h {
			return true
		}
	}
	return false
}

// find returns the index of the stored event with this id, or -1.
// m.mu must be held.
func (m *Model) find(id nostr.ID) int {
	for i, ev := range m.events {
		if ev.ID == id {
			return i
		}
	}
	return -1
}

// remove removes the event at index i (keeping the order of the others).
// m.mu must be held.
func (m *Model) remove(i int) {
	ev := m.events[i]
	if addr, ok := ev.Address(); ok && m.latest[addr] == ev {
		delete(m.latest, addr)
	}
	m.events = slices.Delete(m.events, i, i+1)
}

// CompareNewestFirst orders events as Query returns them: created_at
// descending, then id ascending.
func CompareNewestFirst(a, b *nostr.Event) int {
	if a.CreatedAt != b.CreatedAt {
		if a.CreatedAt > b.CreatedAt {
			return -1
		}
		return 1
	}
	return bytes.Compare(a.ID[:], b.ID[:])
}

// Active reports whether a filter can contribute to a Query: it is not
// Empty, and does not have a limit of zero or less. Count and Items ignore
// the limit part. (A filter with Search needs a store that supports
// search, too.)
func Active(f *nostr.Filter, forQuery bool) bool {
	if f.Empty() {
		return false
	}
	if forQuery && f.HasLimit && f.Limit <= 0 {
		return false
	}
	return true
}

// SearchScore is the model's relevance of an event for a search: the sum
// of the frequencies of the query's terms in the event (search.Analyze),
// or 0 when the event lacks one of them (it does not match). Real stores
// rank by BM25; the suite compares the model with them on the sets of
// matches, not their order.
func SearchScore(ev *nostr.Event, q *search.Query) int {
	d := search.Analyze(ev)
	if !d.Matches(q) {
		return 0
	}
	s := 0
	for _, t := range q.Terms {
		s += d.Freq(t)
	}
	return s
}

// matches returns the stored, unexpired events matching any of filters:
// first the matches of the filters with Search, in filter order, each
// filter's best first (SearchScore, then newest first); then the other
// filters' matches newest first. Each event appears once. With forQuery
// each filter contributes at most its limit. m.mu must be held.
func (m *Model) matches(filters []nostr.Filter, forQuery bool) []*nostr.Event {
	now := m.now()
	seen := make(map[nostr.ID]bool)
	var out, rest []*nostr.Event
	order := make([]int, 0, len(filters))
	for pass := 0; pass < 2; pass++ {
		for i := range filters {
			if (filters[i].Search != "") == (pass == 0) {
				order = append(order, i)
			}
		}
	}
	for _, i := range order {
		f := &filters[i]
		if !Active(f, forQuery) || (f.Search != "" && m.NoSearch) {
			continue
		}
		var got []*nostr.Event
		var q search.Query
		score := make(map[*nostr.Event]int)
		if f.Search != "" {
			q = search.ParseQuery(f.Search)
		}
		for _, ev := range m.events {
			if !f.Matches(ev) || ev.IsExpired(now) {
				continue
			}
			if f.Search != "" {
				s := SearchScore(ev, &q)
				if s == 0 {
					continue
				}
				score[ev] = s
			}
			got = append(got, ev)
		}
		if f.Search != "" {
			slices.SortFunc(got, func(a, b *nostr.Event) int {
				if score[a] != score[b] {
					return score[b] - score[a]
				}
				return CompareNewestFirst(a, b)
			})
		} else {
			slices.SortFunc(got, CompareNewestFirst)
		}
		if forQuery && f.HasLimit && len(got) > f.Limit {
			got = got[:f.Limit]
		}
		for _, ev := range got {
			if seen[ev.ID] {
				continue
			}
			seen[ev.ID] = true
			if f.Search != "" {
				out = append(out, ev)
			} else {
				rest = append(rest, ev)
			}
		}
	}
	slices.SortFunc(rest, CompareNewestFirst)
	return append(out, rest...)
}

// Query implements store.Store. The returned iterator holds copies of the
// matching events' Raw, taken under the lock, so it sees a snapshot.
func (m *Model) Query(ctx context.Context, filters []nostr.Filter) (store.Iterator, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, store.ErrClosed
	}
	evs := m.matches(filters, true)
	recs := make([]store.Record, len(evs))
	for i, ev := range evs {
		recs[i] = store.Record{ID: ev.ID, PubKey: ev.PubKey, CreatedAt: ev.CreatedAt, Kind: ev.Kind,
			Raw: slices.Clone(ev.Raw)}
	}
	return &sliceIter{recs: recs, i: -1, snap: store.Snapshot{Low: m.seq + 1, High: m.seq + 1}}, nil
}

// Count implements store.Store.
func (m *Model) Count(ctx context.Context, filters []nostr.Filter) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, store.ErrClosed
	}
	return int64(len(m.matches(filters, false))), nil
}

// Items implements store.Store.
func (m *Model) Items(ctx context.Context, filters []nostr.Filter, max int) ([]store.Item, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, store.ErrClosed
	}
	evs := m.matches(filters, false)
	if max > 0 && len(evs) > max {
		return nil, store.ErrTooMany
	}
	items := make([]store.Item, len(evs))
	for i, ev := range evs {
		items[i] = store.Item{CreatedAt: ev.CreatedAt, ID: ev.ID}
	}
	slices.SortFunc(items, store.CompareItems)
	return items, nil
}

// Has implements store.Store.
func (m *Model) Has(ctx context.Context, id nostr.ID) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false, store.ErrClosed
	}
	return m.find(id) >= 0, nil
}

// Delete implements store.Store.
func (m *Model) Delete(ctx context.Context, ids []nostr.ID) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, store.ErrClosed
	}
	n := 0
	for _, id := range ids {
		if i := m.find(id); i >= 0 {
			m.remove(i)
			n++
		}
	}
	return n, nil
}

// PurgeExpired implements store.Store.
func (m *Model) PurgeExpired(ctx context.Context, now int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, store.ErrClosed
	}
	n := 0
	for i := 0; i < len(m.events); {
		if m.events[i].IsExpired(now) {
			m.remove(i)
			n++
			continue
		}
		i++
	}
	return n, nil
}

// Stats implements store.Store.
func (m *Model) Stats() store.Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for _, ev := range m.events {
		n += int64(len(ev.Raw))
	}
	return store.Stats{SizeBytes: n, Backend: "model"}
}

// Close implements store.Store.
func (m *Model) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return store.ErrClosed
	}
	m.closed = true
	close(m.callbacks)
	m.mu.Unlock()
	<-m.cbDone
	return nil
}

// Len returns the number of stored events, expired ones included.
func (m *Model) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.events)
}

// sliceIter iterates over records held in memory.
type sliceIter struct {
	recs   []store.Record
	i      int
	closed bool
	snap   store.Snapshot
}

func (it *sliceIter) Next() bool {
	if it.closed || it.i+1 >= len(it.recs) {
		it.i = len(it.recs)
		return false
	}
	it.i++
	return true
}

func (it *sliceIter) Record() *store.Record { return &it.recs[it.i] }
func (it *sliceIter) Err() error            { return nil }
func (it *sliceIter) Close() error          { it.closed = true; return nil }

func (it *sliceIter) Snapshot() store.Snapshot { return it.snap }
