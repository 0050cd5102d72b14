package pebble

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/search"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// toFormatV2 rewrites the closed store in dir into formatV2's layout, as
// a build of that format left it: commitKey holds the position alone,
// eventCountKey the value count returns (given the state; nil: no key),
// searchStatsKey the figures (when there is an index).
func toFormatV2(t *testing.T, dir string, count func(commitState) []byte) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, full, err := readCommit(db)
	if err != nil || !full {
		t.Fatalf("commit state %+v full %v: %v", c, full, err)
	}
	_, indexed, err := getValue(db, searchKey)
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	defer b.Close()
	b.Set(formatKey, []byte(formatV2), nil)
	b.Set(commitKey, appendU64(nil, c.pos), nil)
	if v := count(c); v != nil {
		b.Set(eventCountKey, v, nil)
	}
	if indexed {
		b.Set(searchStatsKey, appendSearchStats(nil, c.search), nil)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

// currentCount is formatV2's count key as a build of that format kept it.
func currentCount(c commitState) []byte { return appendU64(appendU64(nil, c.events), c.pos) }

// formatView is what a reader sees: the ids of a plain query and of a
// search (its order is the BM25 ranking, which reads the collection
// figures), and the commit position.
type formatView struct {
	all, search []nostr.ID
	pos         uint64
	figures     search.Stats
}

func viewOf(t *testing.T, s *Store) formatView {
	t.Helper()
	it, err := s.Query(context.Background(), []nostr.Filter{{Kinds: []int{1}}})
	if err != nil {
		t.Fatal(err)
	}
	var v formatView
	for it.Next() {
		v.all = append(v.all, it.Record().ID)
	}
	v.pos = it.Snapshot().High - 1
	it.Close()
	if !s.opts.DisableSearch {
		v.search = searchIDs(t, s, nostr.Filter{Search: "word7 rare"})
		q, err := s.newQuery()
		if err != nil {
			t.Fatal(err)
		}
		defer q.close()
		if v.figures, err = q.searchStats(); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

// formatFixture stores events with text in dir, some removed again, and
// returns the view of the closed store.
func formatFixture(t *testing.T, dir string) formatView {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(31, 31))
	s := openTest(t, Options{Path: dir})
	var evs []*nostr.Event
	for i := 0; i < 300; i++ {
		text := fmt.Sprintf("word%d shared %s", i%20, []string{"", "rare", "common words here"}[i%3])
		evs = append(evs, storetest.NewEvent(rng, storetest.Key(i%7), 1, storetest.BaseTime+int64(i), nil, text))
	}
	for i := 0; i < len(evs); i += 50 {
		if _, err := s.Save(ctx, evs[i:i+50]); err != nil {
			t.Fatal(err)
		}
	}
	// A deletion request: stored, and two events removed (the count and
	// the figures go down).
	del := storetest.NewEvent(rng, evs[0].PubKey, 5, storetest.BaseTime+1000, nostr.Tags{{"e", evs[0].ID.Hex()}, {"e", evs[7].ID.Hex()}}, "")
	if res, err := s.Save(ctx, []*nostr.Event{del}); err != nil || res[0].Outcome != store.Stored {
		t.Fatal(res, err)
	}
	v := viewOf(t, s)
	if len(v.all) != 298 || len(v.search) == 0 || len(v.search) == 298 || v.pos == 0 || v.figures.Docs != 298 {
		t.Fatalf("fixture: %d events, %d search matches, position %d, figures %+v", len(v.all), len(v.search), v.pos, v.figures)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestFormatV2ReadOnly: a read-only open reads a formatV2 store as it is
// (commands such as req --store must not need a writable upgrade): the
// same events, the same search ranking, the same commit position, and
// the database untouched.
func TestFormatV2ReadOnly(t *testing.T) {
	dir := t.TempDir()
	want := formatFixture(t, dir)
	toFormatV2(t, dir, currentCount)
	ro := openTest(t, Options{Path: dir, ReadOnly: true})
	got := viewOf(t, ro)
	if !slices.Equal(got.all, want.all) || !slices.Equal(got.search, want.search) || got.pos != want.pos || got.figures != want.figures {
		t.Fatalf("read-only formatV2: %d events, search %v, position %d, figures %+v; want %d, %v, %d, %+v",
			len(got.all), got.search, got.pos, got.figures, len(want.all), want.search, want.pos, want.figures)
	}
	if v, _, _ := getValue(ro.db, formatKey); string(v) != formatV2 {
		t.Fatalf("a read-only open changed the format to %q", v)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	// The same view from the current layout read-only, for comparison
	// (the reader takes the figures from the commit state there).
	s := openTest(t, Options{Path: dir})
	s.Close()
	ro = openTest(t, Options{Path: dir, ReadOnly: true})
	defer ro.Close()
	if got := viewOf(t, ro); !slices.Equal(got.all, want.all) || !slices.Equal(got.search, want.search) || got.pos != want.pos || got.figures != want.figures {
		t.Fatalf("read-only after the upgrade: %d events, search %v, position %d, figures %+v", len(got.all), got.search, got.pos, got.figures)
	}
}

// TestFormatV2Upgrade: a writable open moves a formatV2 store's commit
// state into one key (the count and the figures the older keys held,
// which are then gone), with search on or off; reads see the same as
// before, the store goes on storing, and a reopen reads the new layout.
func TestFormatV2Upgrade(t *testing.T) {
	for _, disable := range []bool{false, true} {
		t.Run(fmt.Sprintf("DisableSearch=%v", disable), func(t *testing.T) {
			dir := t.TempDir()
			want := formatFixture(t, dir)
			toFormatV2(t, dir, currentCount)
			s := openTest(t, Options{Path: dir, DisableSearch: disable})
			if v, _, _ := getValue(s.db, formatKey); string(v) != formatVersion {
				t.Fatalf("format after the upgrade: %q", v)
			}
			for _, k := range [][]byte{eventCountKey, searchStatsKey} {
				if _, found, _ := getValue(s.db, k); found {
					t.Fatalf("%q left after the upgrade", k)
				}
			}
			c, full, err := readCommit(s.db)
			if err != nil || !full || c.pos != want.pos || c.events != 299 {
				t.Fatalf("commit state %+v (full %v, %v), want position %d, 299 events", c, full, err, want.pos)
			}
			if disable != (c.search == (search.Stats{})) {
				t.Fatalf("search figures %+v with DisableSearch %v", c.search, disable)
			}
			if got := viewOf(t, s); !slices.Equal(got.all, want.all) || got.pos != want.pos ||
				!disable && (!slices.Equal(got.search, want.search) || got.figures != want.figures) {
				t.Fatalf("after the upgrade: %d events, search %v, position %d", len(got.all), got.search, got.pos)
			}
			if err := checkIntegrity(s.db); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(5, 5))
			ev := storetest.NewEvent(rng, storetest.Key(1), 1, storetest.BaseTime+2000, nil, "shared later")
			res, err := s.Save(context.Background(), []*nostr.Event{ev})
			if err != nil || res[0].Outcome != store.Stored || res[0].Seq != want.pos+1 {
				t.Fatalf("save after the upgrade: %+v, %v (want position %d)", res, err, want.pos+1)
			}
			if got := s.Stats().Events; got != 300 {
				t.Fatalf("Events = %d, want 300", got)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// Search back on after a store that ran without it: the index
			// is built and its figures are the commit state's.
			s = openTest(t, Options{Path: dir})
			defer s.Close()
			if err := checkIntegrity(s.db); err != nil {
				t.Fatal(err)
			}
			if got := searchIDs(t, s, nostr.Filter{Search: "shared later"}); len(got) == 0 || got[0] != ev.ID {
				t.Fatalf("search after reopening: %v, want %v first", got, ev.ID)
			}
		})
	}
}

// TestFormatV2UpgradeNeedsFigures: a formatV2 store that has a search
// index but not its figures is refused as corrupt rather than upgraded
// with zero figures (every BM25 score would be off until a rebuild).
func TestFormatV2UpgradeNeedsFigures(t *testing.T) {
	dir := t.TempDir()
	formatFixture(t, dir)
	toFormatV2(t, dir, currentCount)
	openCorrupt(t, dir, func(db *pebble.DB) error { return db.Delete(searchStatsKey, pebble.Sync) })
}

// openCorrupt changes the closed store in dir with edit and checks that
// a writable Open then refuses it as corrupt.
func openCorrupt(t *testing.T, dir string, edit func(*pebble.DB) error) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := edit(db); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(Options{Path: dir, Logger: quiet}); !errors.Is(err, errCorrupt) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Open = %v, want errCorrupt", err)
	}
}

// TestFormatV3NeedsFullState: a current-format store whose commit key
// holds the position alone (formatV2's layout under formatV3's name) is
// refused as corrupt by a writable open instead of written on with a
// zero count and zero figures.
func TestFormatV3NeedsFullState(t *testing.T) {
	dir := t.TempDir()
	formatFixture(t, dir)
	openCorrupt(t, dir, func(db *pebble.DB) error {
		c, full, err := readCommit(db)
		if err != nil || !full {
			t.Fatalf("fixture's commit state %+v full %v: %v", c, full, err)
		}
		return db.Set(commitKey, appendU64(nil, c.pos), pebble.Sync)
	})
}
