package postgres

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// TestCommittedSince: events come back by the time the store accepted
// them (not created_at), oldest commit first, with their positions;
// removed events do not; paging past feedPage loses nothing.
func TestCommittedSince(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 5))
	var first []*nostr.Event
	for i := 0; i < 10; i++ {
		first = append(first, storetest.NewEvent(rng, storetest.Key(1), 1, storetest.BaseTime+int64(100-i), nil, "early"))
	}
	if _, err := s.Save(ctx, first); err != nil {
		t.Fatal(err)
	}
	var dbNow time.Time
	if err := s.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	var later []*nostr.Event
	seqs := map[nostr.ID]uint64{}
	for b := 0; b < 3; b++ {
		var evs []*nostr.Event
		for i := 0; i < feedPage/2+7; i++ {
			evs = append(evs, storetest.NewEvent(rng, storetest.Key(2+b), 1, storetest.BaseTime-int64(i), nil, "late"))
		}
		res, err := s.Save(ctx, evs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Outcome != store.Stored {
				t.Fatalf("outcome %v", r.Outcome)
			}
			seqs[evs[i].ID] = r.Seq
		}
		later = append(later, evs...)
	}
	gone := later[3]
	if n, err := s.Delete(ctx, []nostr.ID{gone.ID}); err != nil || n != 1 {
		t.Fatalf("Delete = %d, %v", n, err)
	}
	it, err := s.CommittedSince(ctx, dbNow)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var got []store.Record
	var lastSeq uint64
	for it.Next() {
		r := *it.Record()
		if r.Seq < lastSeq {
			t.Fatalf("record %d: position %d after %d: not oldest commit first", len(got), r.Seq, lastSeq)
		}
		lastSeq = r.Seq
		got = append(got, r)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(later)-1 {
		t.Fatalf("CommittedSince returned %d events, want %d", len(got), len(later)-1)
	}
	want := map[nostr.ID]*nostr.Event{}
	for _, ev := range later {
		if ev != gone {
			want[ev.ID] = ev
		}
	}
	for _, r := range got {
		ev, ok := want[r.ID]
		if !ok {
			t.Fatalf("unexpected or repeated event %s", r.ID.Hex()[:8])
		}
		delete(want, r.ID)
		if r.Seq == 0 || r.Seq != seqs[r.ID] || string(r.Raw) != string(ev.Raw) || r.CreatedAt != ev.CreatedAt || r.PubKey != ev.PubKey {
			t.Fatalf("record %s: seq %d (want %d) or fields differ", r.ID.Hex()[:8], r.Seq, seqs[r.ID])
		}
	}
	// Nothing since a moment in the future.
	it2, err := s.CommittedSince(ctx, dbNow.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if it2.Next() {
		t.Fatal("CommittedSince(future) returned an event")
	}
	it2.Close()
}

// TestLongAddress: a d tag longer than maxInline is stored hashed, and
// its versions still replace each other; at maxInline it is stored as is.
func TestLongAddress(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(6, 6))
	f := func(d string) {
		t.Helper()
		v1 := storetest.NewEvent(rng, storetest.Key(1), 30023, storetest.BaseTime, nostr.Tags{{"d", d}}, "v1")
		v2 := storetest.NewEvent(rng, storetest.Key(1), 30023, storetest.BaseTime+1, nostr.Tags{{"d", d}}, "v2")
		other := storetest.NewEvent(rng, storetest.Key(1), 30023, storetest.BaseTime+2, nostr.Tags{{"d", d + "!"}}, "other")
		res, err := s.Save(ctx, []*nostr.Event{v1, v2, other, v1})
		if err != nil {
			t.Fatal(err)
		}
		want := []store.Outcome{store.Stored, store.Stored, store.Stored, store.Superseded}
		for i := range res {
			if res[i].Outcome != want[i] {
				t.Fatalf("len(d)=%d: event %d: %v, want %v", len(d), i, res[i].Outcome, want[i])
			}
		}
		del := storetest.NewEvent(rng, storetest.Key(1), 5, storetest.BaseTime+5, nostr.Tags{{"a", storetest.ATag(30023, storetest.Key(1), d)}}, "")
		res, err = s.Save(ctx, []*nostr.Event{del})
		if err != nil || len(res[0].Removed) != 1 || res[0].Removed[0] != v2.ID {
			t.Fatalf("len(d)=%d: deletion by address: %+v, %v", len(d), res, err)
		}
	}
	f(strings.Repeat("d", maxInline))
	f(strings.Repeat("e", maxInline+1))
	f(strings.Repeat("long d ", 1000))
}

// TestSearchCandidates: a search ranks at most Options.SearchCandidates
// matches, the newest: at the bound every match is returned, past it
// only the newest SearchCandidates.
func TestSearchCandidates(t *testing.T) {
	const bound = 5
	s := openTest(t, Options{SearchCandidates: bound})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(8, 8))
	var evs []*nostr.Event
	for i := 0; i <= bound; i++ {
		evs = append(evs, storetest.NewEvent(rng, storetest.Key(1), 1, storetest.BaseTime+int64(i), nil, "kumquat "+strconv.Itoa(i)+strings.Repeat(" kumquat", i%3)))
	}
	count := func(filter nostr.Filter) map[nostr.ID]bool {
		it, err := s.Query(ctx, []nostr.Filter{filter})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		got := map[nostr.ID]bool{}
		for it.Next() {
			got[it.Record().ID] = true
		}
		return got
	}
	if _, err := s.Save(ctx, evs[:bound]); err != nil {
		t.Fatal(err)
	}
	if got := count(nostr.Filter{Search: "kumquat"}); len(got) != bound {
		t.Fatalf("%d matches at the bound: got %d", bound, len(got))
	}
	if _, err := s.Save(ctx, evs[bound:]); err != nil {
		t.Fatal(err)
	}
	got := count(nostr.Filter{Search: "kumquat"})
	if len(got) != bound || got[evs[0].ID] {
		t.Fatalf("%d matches past the bound of %d: got %d, oldest included %v", bound+1, bound, len(got), got[evs[0].ID])
	}
	// Count is not bounded.
	if n, err := s.Count(ctx, []nostr.Filter{{Search: "kumquat"}}); err != nil || n != bound+1 {
		t.Fatalf("Count = %d, %v", n, err)
	}
}

// TestMeta: named blobs are saved, replaced, and shared by the nodes of
// a schema; a missing one is ErrNotFound.
func TestMeta(t *testing.T) {
	a := openTest(t, Options{})
	b := openTest(t, Options{Schema: a.opts.Schema})
	ctx := context.Background()
	if _, err := a.LoadMeta(ctx, "policy/x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("LoadMeta(missing) = %v, want ErrNotFound", err)
	}
	for _, v := range []string{"one", "two", ""} {
		if err := a.SaveMeta(ctx, "policy/x", []byte(v)); err != nil {
			t.Fatal(err)
		}
		got, err := b.LoadMeta(ctx, "policy/x")
		if err != nil || string(got) != v {
			t.Fatalf("LoadMeta on the other node = %q, %v; want %q", got, err, v)
		}
	}
	a.Close()
	if err := a.SaveMeta(ctx, "x", nil); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("SaveMeta after Close = %v", err)
	}
}

// TestUpdateMeta: UpdateMeta is one atomic step across the nodes of a
// schema: counters incremented at once through two nodes, by several
// goroutines each, lose no increment. The first call finds nothing; a
// failing f saves nothing (not even the row it would have made) and its
// error comes back as it is.
func TestUpdateMeta(t *testing.T) {
	a := openTest(t, Options{})
	b := openTest(t, Options{Schema: a.opts.Schema})
	ctx := context.Background()
	errNo := errors.New("no")
	err := a.UpdateMeta(ctx, "policy/x", func(old []byte, found bool) ([]byte, error) {
		if found || old != nil {
			t.Errorf("missing blob: found %v, old %q", found, old)
		}
		return nil, errNo
	})
	if err != errNo {
		t.Fatalf("UpdateMeta with a failing f = %v, want its error", err)
	}
	if _, err := b.LoadMeta(ctx, "policy/x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after a failed UpdateMeta, LoadMeta = %v, want ErrNotFound", err)
	}
	const goroutines, each = 4, 15
	var wg sync.WaitGroup
	for i := range 2 * goroutines {
		st := []*Store{a, b}[i%2]
		wg.Go(func() {
			for range each {
				err := st.UpdateMeta(ctx, "policy/x", func(old []byte, found bool) ([]byte, error) {
					n := 0
					if found {
						n, _ = strconv.Atoi(string(old))
					}
					return []byte(strconv.Itoa(n + 1)), nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	got, err := a.LoadMeta(ctx, "policy/x")
	if want := strconv.Itoa(2 * goroutines * each); err != nil || string(got) != want {
		t.Fatalf("counter = %q, %v; want %s", got, err, want)
	}
	b.Close()
	if err := b.UpdateMeta(ctx, "x", nil); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("UpdateMeta after Close = %v", err)
	}
}
