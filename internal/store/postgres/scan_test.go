package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// TestScan: Scan returns what Query returns for the same filters without
// their limits, in the same order (newest first, without duplicates),
// hides expired events, and ends on fn's error or a closed store.
func TestScan(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	defer s.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	var evs []*nostr.Event
	for i := range 300 {
		tags := nostr.Tags{{"t", fmt.Sprintf("topic%d", i%4)}}
		if i%7 == 0 {
			tags = append(tags, nostr.Tag{"expiration", "1000"}) // expired long ago
		}
		// Few distinct created_at values: many ties, ordered by id.
		evs = append(evs, storetest.NewEvent(rng, storetest.Key(i%5), []int{1, 7, 30023}[i%3], storetest.BaseTime+int64(i%40), tags, []string{"apple note", "banana note", "cherry note", "date note"}[i%4]))
	}
	if _, err := s.Save(ctx, evs); err != nil {
		t.Fatal(err)
	}
	scan := func(filters []nostr.Filter) []nostr.ID {
		t.Helper()
		var ids []nostr.ID
		err := s.Scan(ctx, filters, func(r *store.Record) error {
			ids = append(ids, r.ID)
			return nil
		})
		if err != nil {
			t.Fatalf("Scan: %v", err)
		}
		return ids
	}
	f := func(js string) {
		t.Helper()
		var filters []nostr.Filter
		for _, part := range strings.Split(js, "|") {
			flt, err := nostr.ParseFilter([]byte(part), nil)
			if err != nil {
				t.Fatal(err)
			}
			filters = append(filters, flt)
		}
		got := scan(filters)
		n, err := s.Count(ctx, filters)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(got)) != n {
			t.Fatalf("%s: Scan gave %d events, Count %d", js, len(got), n)
		}
		unlimited := slices.Clone(filters)
		for i := range unlimited {
			unlimited[i].HasLimit, unlimited[i].Limit = false, 0
		}
		it, err := s.Query(ctx, unlimited)
		if err != nil {
			t.Fatal(err)
		}
		var want []nostr.ID
		for it.Next() {
			want = append(want, it.Record().ID)
		}
		it.Close()
		if !slices.Equal(got, want) {
			t.Fatalf("%s: Scan gave %d events, Query %d (or another order)", js, len(got), len(want))
		}
	}
	f(`{}`)
	f(`{"limit":3}`) // limits are ignored
	f(`{"kinds":[7]}`)
	f(`{"authors":["` + storetest.Key(1).Hex() + `"],"kinds":[1,30023]}`)
	f(`{"#t":["topic2"],"since":1700000010,"until":1700000030}`)
	f(`{"kinds":[1]}|{"#t":["topic1"]}|{"authors":["` + storetest.Key(3).Hex() + `"]}`)
	f(`{"ids":["` + evs[1].ID.Hex() + `","` + evs[7].ID.Hex() + `"]}`) // evs[7] is expired
	f(`{"authors":[]}`)

	// A search filter matches every event with all its terms, newest
	// first (not ranked), as Count counts them.
	got := scan([]nostr.Filter{{Search: "banana"}})
	n, err := s.Count(ctx, []nostr.Filter{{Search: "banana"}})
	if err != nil || int64(len(got)) != n || n == 0 {
		t.Fatalf("search: Scan gave %d events, Count %d (%v)", len(got), n, err)
	}

	stop := errors.New("stop")
	calls := 0
	if err := s.Scan(ctx, []nostr.Filter{{}}, func(*store.Record) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("fn's error: %v after %d calls", err, calls)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Scan(cctx, []nostr.Filter{{}}, func(*store.Record) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if st := s.Stats(); st.Errors != 0 {
		t.Fatalf("errors counted: %d (fn's error and the caller's cancellation are not database errors)", st.Errors)
	}
	s.Close()
	if err := s.Scan(ctx, []nostr.Filter{{}}, func(*store.Record) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}

// TestScanSnapshot: fn may call the store while Scan runs (here it saves
// an event), and the scan reads one snapshot: the event saved from fn is
// not in it.
func TestScanSnapshot(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	defer s.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	var evs []*nostr.Event
	for i := range 5000 {
		evs = append(evs, storetest.NewEvent(rng, storetest.Key(i%50), 1, storetest.BaseTime+int64(i), nil, strings.Repeat("x", 200)))
	}
	if _, err := s.Save(ctx, evs); err != nil {
		t.Fatal(err)
	}
	late := storetest.NewEvent(rng, storetest.Key(1), 1, storetest.BaseTime-1, nil, "late")
	n := 0
	err := s.Scan(ctx, []nostr.Filter{{}}, func(r *store.Record) error {
		if n == 0 {
			if _, err := s.Save(ctx, []*nostr.Event{late}); err != nil {
				return err
			}
		}
		if r.ID == late.ID {
			return errors.New("the scan saw an event saved after it began")
		}
		n++
		return nil
	})
	if err != nil || n != len(evs) {
		t.Fatalf("scan: %d events, %v", n, err)
	}
}

func TestExplainOps(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	defer s.Close()
	f := func(op ExplainOp, js string, want ...string) {
		t.Helper()
		var filters []nostr.Filter
		for _, part := range strings.Split(js, "|") {
			flt, err := nostr.ParseFilter([]byte(part), nil)
			if err != nil {
				t.Fatal(err)
			}
			filters = append(filters, flt)
		}
		out, err := s.Explain(ctx, filters, op)
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		all := strings.Join(out, "\n---\n")
		for _, w := range want {
			if !strings.Contains(all, w) {
				t.Fatalf("%s: explain\n%s\nlacks %q", js, all, w)
			}
		}
		if op == ExplainQuery && len(out) != len(filters) {
			t.Fatalf("%s: %d plans for %d filters", js, len(out), len(filters))
		}
		if op != ExplainQuery && len(out) != 1 {
			t.Fatalf("%s: %d plans, want one statement", js, len(out))
		}
	}
	pk := storetest.Key(1).Hex()
	f(ExplainQuery, `{"kinds":[1],"limit":5}`, "plan kinds", "SQL: SELECT", "events_kind", "Limit")
	f(ExplainQuery, `{"authors":["`+pk+`"],"kinds":[0]}|{"#p":["`+pk+`"]}`, "plan authors+kinds", "plan tags", "tags_key")
	f(ExplainQuery, `{"search":"bitcoin","limit":10}`, "plan search", "BM25")
	f(ExplainQuery, `{"kinds":[1],"limit":0}|{"ids":["`+pk+`"]}`, "matches nothing", "plan ids")
	f(ExplainCount, `{"kinds":[1]}|{"#t":["x"]}`, "count of the union", "SELECT count(*)", "Aggregate")
	f(ExplainScan, `{}`, "newest first, streamed", "ORDER BY e.created_at DESC", "events")
	f(ExplainScan, `{"authors":[]}`, "matches nothing")
	s.Close()
	if _, err := s.Explain(ctx, []nostr.Filter{{}}, ExplainQuery); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}
