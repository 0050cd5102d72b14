package storetest

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

func testCountItems(t *testing.T, st store.Store) {
	h := newH(t, st)
	var evs []*nostr.Event
	for i := 0; i < 50; i++ {
		evs = append(evs, h.ev(i%4, []int{1, 2, 4}[i%3], BaseTime+int64(i%7)))
	}
	h.stored(evs...)
	ctx := context.Background()
	f := func(filters []nostr.Filter, want int) {
		t.Helper()
		if n := h.count(filters...); n != int64(want) {
			t.Fatalf("Count %s = %d, want %d", fmtFilters(filters), n, want)
		}
		items, err := st.Items(ctx, filters, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(items) != want {
			t.Fatalf("Items %s: %d items, want %d", fmtFilters(filters), len(items), want)
		}
		for i := 1; i < len(items); i++ {
			a, b := items[i-1], items[i]
			if a.CreatedAt > b.CreatedAt || (a.CreatedAt == b.CreatedAt && bytes.Compare(a.ID[:], b.ID[:]) >= 0) {
				t.Fatalf("Items not ascending at %d", i)
			}
		}
		if want > 0 {
			if _, err := st.Items(ctx, filters, want-1); !errors.Is(err, store.ErrTooMany) {
				t.Fatalf("Items(max=%d) with %d matches: err %v, want ErrTooMany", want-1, want, err)
			}
			if got, err := st.Items(ctx, filters, want); err != nil || len(got) != want {
				t.Fatalf("Items(max=%d) = %d, %v", want, len(got), err)
			}
		}
	}
	f(fs(nostr.Filter{}), 50)
	f(fs(nostr.Filter{Limit: 5, HasLimit: true}), 50)
	f(fs(nostr.Filter{Kinds: []int{1}}), 17)
	f(fs(nostr.Filter{Kinds: []int{1}}, nostr.Filter{Authors: []nostr.PubKey{Key(0)}}), 17+13-5)
	f(fs(nostr.Filter{Kinds: []int{1}}, nostr.Filter{Kinds: []int{1, 2}}), 34)
	f(fs(nostr.Filter{Authors: []nostr.PubKey{Key(1)}, Kinds: []int{2}}), 5)
	f(fs(nostr.Filter{Since: BaseTime + 6, HasSince: true}), 7)
	f(fs(nostr.Filter{IDs: []nostr.ID{evs[0].ID, evs[1].ID, {}}}), 2)
	f(fs(nostr.Filter{Present: nostr.PresentAuthors}), 0)
	f(nil, 0)
	// Items holds what Query returns.
	items, _ := st.Items(ctx, fs(nostr.Filter{}), 0)
	recs := h.query(nostr.Filter{})
	var a, b []nostr.ID
	for i := range recs {
		a = append(a, recs[i].ID)
		b = append(b, items[i].ID)
	}
	if !sameIDs(a, b...) {
		t.Fatal("Items and Query disagree")
	}
}

func testHasDelete(t *testing.T, st store.Store) {
	h := newH(t, st)
	ctx := context.Background()
	a := h.ev(1, 1, BaseTime)
	b := h.ev(1, 30023, BaseTime+1, nostr.Tag{"d", "x"}, nostr.Tag{"p", Key(9).Hex()})
	c := h.ev(2, 1, BaseTime+2)
	h.stored(a, b, c)
	if h.has(nostr.ID{1}) {
		t.Fatal("Has(unknown) = true")
	}
	n, err := st.Delete(ctx, []nostr.ID{a.ID, b.ID, {1}, a.ID})
	if err != nil || n != 2 {
		t.Fatalf("Delete = %d, %v; want 2", n, err)
	}
	if h.has(a.ID) || h.has(b.ID) || !h.has(c.ID) {
		t.Fatal("Has after Delete wrong")
	}
	h.expect(fs(nostr.Filter{}), c)
	h.expect(fs(nostr.Filter{Tags: []nostr.TagFilter{{Name: 'p', Values: []string{Key(9).Hex()}}}}))
	h.expect(fs(nostr.Filter{Authors: []nostr.PubKey{Key(1)}, Kinds: []int{30023}, Tags: []nostr.TagFilter{{Name: 'd', Values: []string{"x"}}}}))
	// Delete does not leave a tombstone, and frees the address.
	older := h.ev(1, 30023, BaseTime, nostr.Tag{"d", "x"})
	h.stored(a, older)
	h.stored(b)
	h.expect(fs(nostr.Filter{}), c, b, a)
	if n, err := st.Delete(ctx, nil); err != nil || n != 0 {
		t.Fatalf("Delete(nil) = %d, %v", n, err)
	}
	if s := st.Stats(); s.Backend == "" || s.SizeBytes < 0 {
		t.Fatalf("Stats = %+v", s)
	}
}

func testSaveBatch(t *testing.T, st store.Store) {
	h := newH(t, st)
	a := h.ev(1, 1, BaseTime)
	r1 := h.ev(1, 0, BaseTime)
	r2 := h.ev(1, 0, BaseTime+1)
	del := h.ev(1, 5, BaseTime+2, eTag(a))
	res := h.outcomes([]*nostr.Event{a, a, r1, r2, del, a, h.ev(1, 20000, BaseTime), r1},
		store.Stored, store.Duplicate, store.Stored, store.Stored, store.Stored, store.Deleted, store.Failed, store.Superseded)
	if !sameIDs(res[3].Removed, r1.ID) || !sameIDs(res[4].Removed, a.ID) {
		t.Fatalf("Removed: %v, %v", res[3].Removed, res[4].Removed)
	}
	h.expect(fs(nostr.Filter{}), del, r2)
	// A deletion before its target in one batch.
	b := h.ev(2, 1, BaseTime)
	h.outcomes([]*nostr.Event{h.ev(2, 5, BaseTime, eTag(b)), b}, store.Stored, store.Deleted)
	// A vanish and older events after it in one batch.
	h.outcomes([]*nostr.Event{h.ev(3, 1, BaseTime), h.ev(3, 62, BaseTime+5), h.ev(3, 1, BaseTime+1), h.ev(3, 1, BaseTime+6)},
		store.Stored, store.Stored, store.Deleted, store.Stored)
	if n := h.count(nostr.Filter{Authors: []nostr.PubKey{Key(3)}}); n != 2 {
		t.Fatalf("author 3 has %d events, want 2", n)
	}
	// A large batch.
	var big []*nostr.Event
	for i := 0; i < 3000; i++ {
		big = append(big, h.ev(4+i%5, 1, BaseTime+int64(i)))
	}
	h.stored(big...)
	if n := h.count(nostr.Filter{Authors: []nostr.PubKey{Key(4), Key(5), Key(6), Key(7), Key(8)}}); n != 3000 {
		t.Fatalf("count after big batch = %d", n)
	}
}

func testSubmit(t *testing.T, st store.Store) {
	h := newH(t, st)
	ctx := context.Background()
	type result struct {
		r     store.SaveResult
		calls int
	}
	var mu sync.Mutex
	results := make(map[nostr.ID]*result)
	var wg sync.WaitGroup
	submit := func(ev *nostr.Event) {
		t.Helper()
		mu.Lock()
		if results[ev.ID] == nil {
			results[ev.ID] = &result{}
		}
		mu.Unlock()
		wg.Add(1)
		err := st.Submit(ctx, ev, func(r store.SaveResult) {
			mu.Lock()
			results[ev.ID].r = r
			results[ev.ID].calls++
			mu.Unlock()
			wg.Done()
		})
		if err != nil {
			t.Fatalf("Submit: %v", err)
		}
	}
	a := h.ev(1, 1, BaseTime)
	submit(a)
	wg.Wait()
	// After done, the event is visible.
	h.expect(fs(nostr.Filter{}), a)
	// Submitted events are applied in order.
	r1 := h.ev(1, 0, BaseTime)
	r2 := h.ev(1, 0, BaseTime+1)
	eph := h.ev(1, 20000, BaseTime)
	for _, ev := range []*nostr.Event{r1, r2, eph} {
		submit(ev)
	}
	dup := *a
	wg.Add(1)
	var dupRes store.SaveResult
	if err := st.Submit(ctx, &dup, func(r store.SaveResult) { dupRes = r; wg.Done() }); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	f := func(ev *nostr.Event, want store.Outcome) {
		t.Helper()
		r := results[ev.ID]
		if r.calls != 1 {
			t.Fatalf("done called %d times", r.calls)
		}
		if r.r.Outcome != want {
			t.Fatalf("outcome %v (%v), want %v", r.r.Outcome, r.r.Err, want)
		}
	}
	f(a, store.Stored)
	f(r1, store.Stored)
	f(r2, store.Stored)
	f(eph, store.Failed)
	if !errors.Is(results[eph.ID].r.Err, store.ErrEphemeral) {
		t.Fatalf("ephemeral Err = %v", results[eph.ID].r.Err)
	}
	if !sameIDs(results[r2.ID].r.Removed, r1.ID) {
		t.Fatalf("Removed = %v", results[r2.ID].r.Removed)
	}
	if dupRes.Outcome != store.Duplicate {
		t.Fatalf("duplicate submit: %v", dupRes.Outcome)
	}
	// A cancelled context returns its error without calling done.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	called := false
	err := st.Submit(cctx, h.ev(1, 1, BaseTime), func(store.SaveResult) { called = true })
	if err == nil {
		// The queue had room: the event went in, and done will be called.
		t.Log("Submit with a cancelled context was accepted (queue had room)")
	} else if !errors.Is(err, context.Canceled) || called {
		t.Fatalf("Submit(cancelled) = %v, called %v", err, called)
	}
}

func testSubmitConcurrent(t *testing.T, st store.Store) {
	const goroutines, each = 8, 150
	ctx := context.Background()
	var calls [goroutines][each]atomic.Int32
	var stored atomic.Int32
	var wg, done sync.WaitGroup
	evs := make([][]*nostr.Event, goroutines)
	for g := 0; g < goroutines; g++ {
		rng := rand.New(rand.NewPCG(uint64(g), 7))
		for i := 0; i < each; i++ {
			evs[g] = append(evs[g], NewEvent(rng, Key(g), 1, BaseTime+int64(i), nil, "x"))
		}
	}
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 8))
			for i, ev := range evs[g] {
				done.Add(1)
				err := st.Submit(ctx, ev, func(r store.SaveResult) {
					calls[g][i].Add(1)
					if r.Outcome == store.Stored {
						stored.Add(1)
					}
					done.Done()
				})
				if err != nil {
					t.Errorf("Submit: %v", err)
					done.Done()
				}
				if i%50 == 0 { // mix in Saves
					if _, err := st.Save(ctx, []*nostr.Event{NewEvent(rng, Key(100+g), 1, BaseTime+int64(i), nil, "save")}); err != nil {
						t.Errorf("Save: %v", err)
					}
				}
			}
		}()
	}
	wg.Wait()
	done.Wait()
	for g := range calls {
		for i := range calls[g] {
			if n := calls[g][i].Load(); n != 1 {
				t.Fatalf("done for event %d/%d called %d times", g, i, n)
			}
		}
	}
	if stored.Load() != goroutines*each {
		t.Fatalf("%d stored, want %d", stored.Load(), goroutines*each)
	}
	h := newH(t, st)
	if n := h.count(nostr.Filter{Kinds: []int{1}, Tags: nil}); n < goroutines*each {
		t.Fatalf("count = %d, want >= %d", n, goroutines*each)
	}
}

func testIterator(t *testing.T, st store.Store) {
	h := newH(t, st)
	var evs []*nostr.Event
	for i := 0; i < 200; i++ {
		evs = append(evs, h.ev(i%5, 1, BaseTime+int64(i/3), nostr.Tag{"t", "x"}))
	}
	h.stored(evs...)
	slices.SortFunc(evs, CompareNewestFirst)
	for _, filters := range [][]nostr.Filter{
		fs(nostr.Filter{}),
		fs(nostr.Filter{Authors: []nostr.PubKey{Key(0), Key(1), Key(2), Key(3), Key(4)}}),
		fs(nostr.Filter{Tags: []nostr.TagFilter{{Name: 't', Values: []string{"x"}}}}, nostr.Filter{Kinds: []int{1}}),
	} {
		it, err := st.Query(context.Background(), filters)
		if err != nil {
			t.Fatal(err)
		}
		// Raw is checked before moving on, without copying it.
		i := 0
		for it.Next() {
			r := it.Record()
			checkRecord(t, r, evs[i])
			i++
		}
		if it.Err() != nil || i != len(evs) {
			t.Fatalf("iterated %d of %d, err %v", i, len(evs), it.Err())
		}
		if it.Next() {
			t.Fatal("Next after the end returned true")
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		if err := it.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
	// Closing before the end.
	it, err := st.Query(context.Background(), fs(nostr.Filter{}))
	if err != nil {
		t.Fatal(err)
	}
	it.Next()
	it.Close()
	if it.Next() {
		t.Fatal("Next after Close returned true")
	}
	// Many open iterators at once.
	var its []store.Iterator
	for i := 0; i < 50; i++ {
		it, err := st.Query(context.Background(), fs(nostr.Filter{Limit: 3, HasLimit: true}))
		if err != nil {
			t.Fatal(err)
		}
		its = append(its, it)
	}
	for _, it := range its {
		n := 0
		for it.Next() {
			n++
		}
		it.Close()
		if n != 3 {
			t.Fatalf("got %d, want 3", n)
		}
	}
}

func testIteratorSnapshot(t *testing.T, st store.Store) {
	h := newH(t, st)
	ctx := context.Background()
	for round := 0; round < 4; round++ {
		// Each round has its own authors, kind and tag value, so that the
		// writes of one round do not show in the next.
		kind := 1000 + round
		tv := "x" + strconv.Itoa(round)
		var authors []nostr.PubKey
		for a := 0; a < 4; a++ {
			authors = append(authors, Key(10*round+a))
		}
		var evs []*nostr.Event
		for i := 0; i < 100; i++ {
			evs = append(evs, h.ev(10*round+i%4, kind, BaseTime+int64(i), nostr.Tag{"t", tv}))
		}
		h.stored(evs...)
		slices.SortFunc(evs, CompareNewestFirst)
		fl := []nostr.Filter{
			{},
			{Authors: authors},
			{Tags: []nostr.TagFilter{{Name: 't', Values: []string{tv}}}},
			{Kinds: []int{kind}, Limit: 1000, HasLimit: true},
		}[round]
		it, err := st.Query(ctx, fs(fl))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 10 && it.Next(); i++ {
			checkRecord(t, it.Record(), evs[i])
		}
		// Writes while the iterator is parked: newer and older matching
		// events, deletions by id, a request to vanish, Delete, a purge.
		del := h.ev(10*round+2, 5, BaseTime+501)
		for _, ev := range evs {
			if ev.PubKey == authors[2] {
				del.Tags = append(del.Tags, eTag(ev))
			}
		}
		del.Raw = nostr.Serialize(del)
		h.stored(h.ev(10*round, kind, BaseTime+500, nostr.Tag{"t", tv}), h.ev(10*round+1, kind, BaseTime-1, nostr.Tag{"t", tv}), del)
		if _, err := st.Delete(ctx, []nostr.ID{evs[20].ID, evs[90].ID}); err != nil {
			t.Fatal(err)
		}
		h.stored(h.ev(10*round+3, 62, BaseTime+502))
		if _, err := st.PurgeExpired(ctx, BaseTime*2); err != nil {
			t.Fatal(err)
		}
		// The iterator resumes in another goroutine and still sees the
		// state it started with.
		var got []store.Record
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it.Next() {
				r := *it.Record()
				r.Raw = slices.Clone(r.Raw)
				got = append(got, r)
			}
		}()
		wg.Wait()
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
		it.Close()
		if len(got) != 90 {
			t.Fatalf("filter %s: resumed iterator returned %d more events, want 90", fmtFilters(fs(fl)), len(got))
		}
		for i := range got {
			checkRecord(t, &got[i], evs[10+i])
		}
	}
}

func testClosed(t *testing.T, st store.Store) {
	h := newH(t, st)
	ctx := context.Background()
	a := h.ev(1, 1, BaseTime)
	h.stored(a)
	open, err := st.Query(ctx, fs(nostr.Filter{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := st.Close(); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("second Close = %v, want ErrClosed", err)
	}
	if _, err := st.Save(ctx, []*nostr.Event{a}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Save after Close = %v", err)
	}
	if err := st.Submit(ctx, a, func(store.SaveResult) { t.Error("done called after Close") }); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Submit after Close = %v", err)
	}
	if _, err := st.Query(ctx, fs(nostr.Filter{})); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Query after Close = %v", err)
	}
	if _, err := st.Count(ctx, fs(nostr.Filter{})); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Count after Close = %v", err)
	}
	if _, err := st.Items(ctx, fs(nostr.Filter{}), 0); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Items after Close = %v", err)
	}
	if _, err := st.Has(ctx, a.ID); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Has after Close = %v", err)
	}
	if _, err := st.Delete(ctx, []nostr.ID{a.ID}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Delete after Close = %v", err)
	}
	if _, err := st.PurgeExpired(ctx, 0); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("PurgeExpired after Close = %v", err)
	}
	_ = st.Stats()
	// An iterator left open across Close ends (the model's snapshot may
	// still yield what it holds) and can be closed.
	for open.Next() {
	}
	open.Close()
}

func testCloseFlushes(t *testing.T, st store.Store) {
	h := newH(t, st)
	ctx := context.Background()
	var n atomic.Int32
	const total = 2000
	for i := 0; i < total; i++ {
		err := st.Submit(ctx, h.ev(i%10, 1, BaseTime+int64(i)), func(r store.SaveResult) {
			if r.Outcome == store.Stored {
				n.Add(1)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if n.Load() != total {
		t.Fatalf("after Close, %d of %d submitted events reported stored", n.Load(), total)
	}
}

// lateCancel is a context that is live when first asked (a store's check
// before it takes a request) and cancelled right after: a cancellation
// that lands as the request is handed over.
type lateCancel struct {
	context.Context
	once sync.Once
	done chan struct{}
}

func newLateCancel() *lateCancel {
	return &lateCancel{Context: context.Background(), done: make(chan struct{})}
}

func (c *lateCancel) Done() <-chan struct{} { return c.done }

func (c *lateCancel) Err() error {
	select {
	case <-c.done:
		return context.Canceled
	default:
	}
	c.once.Do(func() { close(c.done) })
	return nil
}

// testCancelAfterHandOff: a Save or Delete cancelled as the store takes it
// says what it did (store.Store): results or a count whenever the store
// went ahead, ctx's error only when it did not. A store that reported the
// cancellation while its writer went on committing made an interrupted
// import, sync, migrate or delete count one batch short.
func testCancelAfterHandOff(t *testing.T, st store.Store) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(51, 1))
	for i := range 10 {
		ev := NewEvent(rng, Key(1), 1, BaseTime+int64(i), nil, "cancelled as handed over")
		res, err := st.Save(newLateCancel(), []*nostr.Event{ev})
		// A save waited for comes after it in the writer's order.
		if _, err := st.Save(ctx, []*nostr.Event{NewEvent(rng, Key(2), 1, BaseTime+int64(i), nil, "after")}); err != nil {
			t.Fatal(err)
		}
		has, herr := st.Has(ctx, ev.ID)
		if herr != nil {
			t.Fatal(herr)
		}
		switch {
		case err == nil && len(res) == 1 && res[0].Outcome == store.Stored && has:
		case errors.Is(err, context.Canceled) && !has:
		default:
			t.Fatalf("save %d: results %v, error %v; stored %v", i, res, err, has)
		}
		if !has {
			continue
		}
		n, err := st.Delete(newLateCancel(), []nostr.ID{ev.ID})
		if _, err := st.Save(ctx, []*nostr.Event{NewEvent(rng, Key(3), 1, BaseTime+int64(i), nil, "after")}); err != nil {
			t.Fatal(err)
		}
		if has, herr = st.Has(ctx, ev.ID); herr != nil {
			t.Fatal(herr)
		}
		switch {
		case err == nil && n == 1 && !has:
		case errors.Is(err, context.Canceled) && n == 0 && has:
		default:
			t.Fatalf("delete %d: %d, error %v; still stored %v", i, n, err, has)
		}
	}
}
