package pebble

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/search"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// blocksOf folds the posting segments into S blocks, then returns the
// number of postings in each block of term's posting list, newest block
// first.
func blocksOf(t testing.TB, s *Store, term string) []int {
	t.Helper()
	fold(t, s)
	prefix := appendSearchPrefix(nil, term)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []int
	for it.First(); it.Valid(); it.Next() {
		n, ok := blockCount(it.Value())
		if !ok {
			t.Fatalf("block %x = %x", it.Key(), it.Value())
		}
		out = append(out, n)
	}
	return out
}

// fold makes the writer fold the posting segments into S blocks.
func fold(t testing.TB, s *Store) {
	t.Helper()
	if err := s.foldSegments(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// saveFold saves evs in one commit and folds its segment: the S blocks
// of a commit, as if it had folded at once.
func saveFold(t testing.TB, s *Store, evs ...*nostr.Event) {
	t.Helper()
	saveAll(t, s, evs...)
	fold(t, s)
}

// sortedIDs returns ids sorted, for set comparisons.
func sortedIDs(ids []nostr.ID) []nostr.ID {
	out := slices.Clone(ids)
	slices.SortFunc(out, func(a, b nostr.ID) int { return strings.Compare(a.Hex(), b.Hex()) })
	return out
}

// sameSet fails unless got and want hold the same ids.
func sameSet(t testing.TB, what string, got []nostr.ID, want ...*nostr.Event) {
	t.Helper()
	if g, w := sortedIDs(got), sortedIDs(idsOf(want...)); !slices.Equal(g, w) {
		t.Fatalf("%s: got %d: %s, want %d: %s", what, len(g), short(g), len(w), short(w))
	}
}

func report(t testing.TB, s *Store) integrityReport {
	t.Helper()
	rep, err := integrity(s.db)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// noteMaker returns a maker of kind-1 notes by one author, each one
// second newer than the last.
func noteMaker(seed uint64) func(content string) *nostr.Event {
	rng := rand.New(rand.NewPCG(seed, seed))
	ts := int64(storetest.BaseTime)
	return func(content string) *nostr.Event {
		ts++
		return storetest.NewEvent(rng, storetest.Key(1), 1, ts, nil, content)
	}
}

// TestSearchBlockPerCommit checks that the postings of a term from all
// the events of one commit land in one block, and that each commit
// writes its own.
func TestSearchBlockPerCommit(t *testing.T) {
	s := openTest(t, Options{NoSync: true})
	defer s.Close()
	note := noteMaker(20)
	var all []*nostr.Event
	for round := 0; round < 2; round++ {
		var evs []*nostr.Event
		for i := 0; i < 100; i++ {
			evs = append(evs, note(fmt.Sprintf("shared uniq%dr%d", i, round)))
		}
		saveAll(t, s, evs...)
		all = append(all, evs...)
		want := []int{100}
		if round == 1 {
			want = []int{100, 100}
		}
		if got := blocksOf(t, s, "shared"); !slices.Equal(got, want) {
			t.Fatalf("round %d: blocks of shared %v, want %v", round, got, want)
		}
		// One key per distinct term of the commit: shared and the
		// 100 unique words.
		if rep := report(t, s); rep.blocks != 101*(round+1) || rep.postings != 200*(round+1) || rep.dead != 0 {
			t.Fatalf("round %d: %+v", round, rep)
		}
	}
	sameSet(t, "search shared", searchIDs(t, s, nostr.Filter{Search: "shared"}), all...)
	sameSet(t, "search one word", searchIDs(t, s, nostr.Filter{Search: "uniq7r0"}), all[7])
}

// TestSearchBlockCap checks the split of a term's postings into blocks of
// maxBlockPostings: at the cap one block, one more makes two; searches
// find the oldest and the newest document either way, alone and with a
// rarer term.
func TestSearchBlockCap(t *testing.T) {
	for _, n := range []int{maxBlockPostings, maxBlockPostings + 1, 2*maxBlockPostings + 3} {
		t.Run(fmt.Sprintf("events=%d", n), func(t *testing.T) {
			s := openTest(t, Options{NoSync: true})
			defer s.Close()
			note := noteMaker(21)
			var evs []*nostr.Event
			for i := 0; i < n; i++ {
				content := fmt.Sprintf("capword w%d", i)
				switch i {
				case 0:
					content += " oldest edge"
				case n - 1:
					content += " newest edge"
				}
				evs = append(evs, note(content))
			}
			saveAll(t, s, evs...)
			var want []int
			for left := n; left > 0; left -= maxBlockPostings {
				want = append(want, min(left, maxBlockPostings))
			}
			if got := blocksOf(t, s, "capword"); !slices.Equal(got, want) {
				t.Fatalf("blocks %v, want %v", got, want)
			}
			report(t, s)
			sameSet(t, "capword", searchIDs(t, s, nostr.Filter{Search: "capword"}), evs...)
			sameSet(t, "edge", searchIDs(t, s, nostr.Filter{Search: "edge"}), evs[0], evs[n-1])
			sameSet(t, "capword edge", searchIDs(t, s, nostr.Filter{Search: "capword edge"}), evs[0], evs[n-1])
			sameSet(t, "edge capword", searchIDs(t, s, nostr.Filter{Search: "edge capword"}), evs[0], evs[n-1])
			sameSet(t, "oldest", searchIDs(t, s, nostr.Filter{Search: "capword oldest"}), evs[0])
			sameSet(t, "newest", searchIDs(t, s, nostr.Filter{Search: "newest capword"}), evs[n-1])
			// With a limit of 1 and equal scores the newest comes first
			// (the newest event is longer: lower score).
			if got := searchIDs(t, s, nostr.Filter{Search: "capword", Limit: 1, HasLimit: true}); !slices.Equal(got, idsOf(evs[n-2])) {
				t.Fatalf("capword limit 1: %s", short(got))
			}
		})
	}
}

// TestSearchSeekBlocks runs AND queries of a rare and a common term over
// several commits (several blocks each): the common term's cursor seeks
// across blocks and within them, and every document with both is found.
// Within one block a seek reads no pebble at all.
func TestSearchSeekBlocks(t *testing.T) {
	s := openTest(t, Options{NoSync: true})
	defer s.Close()
	note := noteMaker(22)
	var rare, all []*nostr.Event
	for round := 0; round < 6; round++ {
		var evs []*nostr.Event
		for i := 0; i < 300; i++ {
			content := fmt.Sprintf("common filler%d", i%50)
			if (round*300+i)%37 == 5 {
				content += " rare"
			}
			ev := note(content)
			if strings.Contains(content, "rare") {
				rare = append(rare, ev)
			}
			evs = append(evs, ev)
		}
		saveFold(t, s, evs...)
		all = append(all, evs...)
	}
	if got := blocksOf(t, s, "common"); len(got) != 12 {
		t.Fatalf("blocks of common: %v", got)
	}
	q := testQuery(t, s)
	defer q.close()
	var rare7 []*nostr.Event
	for i, ev := range all {
		if i%300%50 == 7 && slices.Contains(rare, ev) {
			rare7 = append(rare7, ev)
		}
	}
	f := func(query string, want []*nostr.Event) {
		t.Helper()
		ss, got := runSearch(t, q, query)
		sameSet(t, query, got, want...)
		if ss.matched != len(want) {
			t.Fatalf("%q: %d candidates, want %d", query, ss.matched, len(want))
		}
		t.Logf("%q: %d steps, %d pebble seeks", query, ss.steps, ss.seeks)
	}
	f("common rare", rare)
	f("rare common", rare)
	f("rare", rare)
	f("filler7 common rare", rare7)
	f("common", all)
	if len(rare7) == 0 || len(rare) < 40 {
		t.Fatalf("%d rare, %d rare7", len(rare), len(rare7))
	}

	// Many small commits (one block of common each), the rare term far
	// apart: the common cursor seeks over many blocks with pebble.
	s3 := openTest(t, Options{NoSync: true})
	defer s3.Close()
	var far []*nostr.Event
	for round := 0; round < 60; round++ {
		var evs []*nostr.Event
		for i := 0; i < 20; i++ {
			content := "common"
			if i == 3 && round%30 == 0 || i == 19 && round == 59 {
				content += " rare"
			}
			ev := note(content)
			if strings.Contains(content, "rare") {
				far = append(far, ev)
			}
			evs = append(evs, ev)
		}
		saveFold(t, s3, evs...)
	}
	q3 := testQuery(t, s3)
	defer q3.close()
	for _, query := range []string{"common rare", "rare common"} {
		ss, got := runSearch(t, q3, query)
		sameSet(t, query, got, far...)
		if ss.seeks == 0 || ss.steps > 30 {
			t.Fatalf("%q: %d pebble seeks, %d steps", query, ss.seeks, ss.steps)
		}
		t.Logf("%q: %d steps, %d pebble seeks", query, ss.steps, ss.seeks)
	}

	// One commit: every posting of each term in one block, so no seek
	// leaves it.
	s2 := openTest(t, Options{NoSync: true})
	defer s2.Close()
	var one, both []*nostr.Event
	for i := 0; i < 200; i++ {
		content := "alpha"
		if i%10 == 3 {
			content += " beta"
		}
		ev := note(content)
		one = append(one, ev)
		if i%10 == 3 {
			both = append(both, ev)
		}
	}
	saveAll(t, s2, one...)
	q2 := testQuery(t, s2)
	defer q2.close()
	for _, query := range []string{"alpha beta", "beta alpha"} {
		ss, got := runSearch(t, q2, query)
		sameSet(t, query, got, both...)
		if ss.seeks != 0 {
			t.Fatalf("%q: %d pebble seeks within one block", query, ss.seeks)
		}
	}
}

// TestSearchReplace stores a replaceable (kind 0) and an addressable
// (kind 30023) event and replaces it, in the same batch and in another
// one: the replaced version is never found. In the same batch its
// postings never reach a block; in another batch they stay in theirs,
// skipped by the search.
func TestSearchReplace(t *testing.T) {
	for _, kind := range []int{0, 30023} {
		for _, sameBatch := range []bool{true, false} {
			t.Run(fmt.Sprintf("kind=%d/same=%v", kind, sameBatch), func(t *testing.T) {
				s := openTest(t, Options{NoSync: true})
				defer s.Close()
				rng := rand.New(rand.NewPCG(23, uint64(kind)))
				mk := func(ts int64, words string) *nostr.Event {
					content := words
					if kind == 0 {
						content = fmt.Sprintf(`{"name":"x","about":%q}`, words)
					}
					return storetest.NewEvent(rng, storetest.Key(3), kind, storetest.BaseTime+ts, nostr.Tags{{"d", "slug"}}, content)
				}
				v1, v2 := mk(1, "oldword shared"), mk(2, "newword shared")
				other := noteMaker(24)("shared other")
				ctx := context.Background()
				var res []store.SaveResult
				var err error
				if sameBatch {
					res, err = s.Save(ctx, []*nostr.Event{v1, other, v2})
				} else {
					saveAll(t, s, v1, other)
					res, err = s.Save(ctx, []*nostr.Event{v2})
				}
				if err != nil {
					t.Fatal(err)
				}
				last := res[len(res)-1]
				if last.Outcome != store.Stored || !slices.Equal(last.Removed, idsOf(v1)) {
					t.Fatalf("replacement: %+v", last)
				}
				check := func() {
					t.Helper()
					sameSet(t, "oldword", searchIDs(t, s, nostr.Filter{Search: "oldword"}))
					sameSet(t, "newword", searchIDs(t, s, nostr.Filter{Search: "newword"}), v2)
					sameSet(t, "shared", searchIDs(t, s, nostr.Filter{Search: "shared"}), v2, other)
					sameSet(t, "shared oldword", searchIDs(t, s, nostr.Filter{Search: "shared oldword"}))
					if got := searchIDs(t, s, nostr.Filter{Search: "shared", Limit: 1, HasLimit: true}); len(got) != 1 {
						t.Fatalf("shared limit 1: %s", short(got))
					}
					if n, err := s.Count(ctx, []nostr.Filter{{Search: "shared"}}); err != nil || n != 2 {
						t.Fatalf("count shared: %d %v", n, err)
					}
				}
				check()
				rep := report(t, s)
				if sameBatch {
					if rep.dead != 0 || blocksOf(t, s, "oldword") != nil {
						t.Fatalf("same batch: %+v, blocks of oldword %v", rep, blocksOf(t, s, "oldword"))
					}
				} else if rep.dead == 0 || !slices.Equal(blocksOf(t, s, "oldword"), []int{1}) {
					t.Fatalf("another batch: %+v, blocks of oldword %v", rep, blocksOf(t, s, "oldword"))
				}
				// A rebuild clears what the removal left.
				path := s.opts.Path
				s.Close()
				s = openTest(t, Options{Path: path, DisableSearch: true})
				s.Close()
				s = openTest(t, Options{Path: path, NoSync: true})
				check()
				if rep := report(t, s); rep.dead != 0 {
					t.Fatalf("after a rebuild: %+v", rep)
				}
			})
		}
	}
}

// TestSearchRemoved removes events in later batches (NIP-09 deletion,
// Store.Delete, NIP-62 vanish, NIP-40 purge): their postings stay, and a
// search skips them without error and still finds the others, older and
// newer. The removal of the newest events does not let their serials be
// allocated again after a reopen (the old postings would count for the
// new events).
func TestSearchRemoved(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, Options{Path: dir, NoSync: true, PurgeInterval: -1})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(25, 25))
	ts := int64(storetest.BaseTime)
	mk := func(key int, kind int, tags nostr.Tags, content string) *nostr.Event {
		ts++
		return storetest.NewEvent(rng, storetest.Key(key), kind, ts, tags, content)
	}
	var evs []*nostr.Event
	for i := 0; i < 10; i++ {
		var tags nostr.Tags
		if i == 7 {
			tags = nostr.Tags{{"expiration", fmt.Sprint(storetest.BaseTime + 1000)}}
		}
		key := 1
		if i == 8 {
			key = 2 // vanishes
		}
		evs = append(evs, mk(key, 1, tags, fmt.Sprintf("apple word%d", i)))
	}
	saveAll(t, s, evs...)
	saveAll(t, s, mk(1, 5, nostr.Tags{{"e", evs[3].ID.Hex()}}, ""))
	if n, err := s.Delete(ctx, []nostr.ID{evs[5].ID}); err != nil || n != 1 {
		t.Fatalf("Delete: %d %v", n, err)
	}
	saveAll(t, s, mk(2, 62, nil, ""))
	if n, err := s.PurgeExpired(ctx, storetest.BaseTime+2000); err != nil || n != 1 {
		t.Fatalf("PurgeExpired: %d %v", n, err)
	}
	later := []*nostr.Event{mk(1, 1, nil, "apple later1"), mk(1, 1, nil, "apple later2")}
	saveAll(t, s, later...)
	alive := []*nostr.Event{evs[0], evs[1], evs[2], evs[4], evs[6], evs[9], later[0], later[1]}
	check := func(s *Store) {
		t.Helper()
		sameSet(t, "apple", searchIDs(t, s, nostr.Filter{Search: "apple"}), alive...)
		for _, i := range []int{3, 5, 7, 8} {
			sameSet(t, "removed", searchIDs(t, s, nostr.Filter{Search: fmt.Sprintf("word%d", i)}))
			sameSet(t, "removed and", searchIDs(t, s, nostr.Filter{Search: fmt.Sprintf("apple word%d", i)}))
		}
		// Equal scores: newest first, the removed ones skipped.
		got := searchIDs(t, s, nostr.Filter{Search: "apple", Limit: 5, HasLimit: true})
		if want := idsOf(later[1], later[0], evs[9], evs[6], evs[4]); !slices.Equal(got, want) {
			t.Fatalf("apple limit 5: %s, want %s", short(got), short(want))
		}
		if n, err := s.Count(ctx, []nostr.Filter{{Search: "apple"}}); err != nil || n != int64(len(alive)) {
			t.Fatalf("count: %d %v", n, err)
		}
	}
	check(s)
	if rep := report(t, s); rep.dead != 4*2 {
		t.Fatalf("dead postings: %+v, want 8", rep)
	}
	// Remove the newest events, reopen, store new ones: they get new
	// serials, so the removed events' postings do not count for them.
	if n, err := s.Delete(ctx, idsOf(later...)); err != nil || n != 2 {
		t.Fatalf("Delete: %d %v", n, err)
	}
	alive = alive[:len(alive)-2]
	s.Close()
	s = openTest(t, Options{Path: dir, NoSync: true, PurgeInterval: -1})
	defer s.Close()
	check2 := func() {
		t.Helper()
		sameSet(t, "apple", searchIDs(t, s, nostr.Filter{Search: "apple"}), alive...)
		sameSet(t, "later1", searchIDs(t, s, nostr.Filter{Search: "later1"}))
	}
	check2()
	fresh := []*nostr.Event{mk(1, 1, nil, "banana one"), mk(1, 1, nil, "banana two")}
	saveAll(t, s, fresh...)
	check2()
	sameSet(t, "banana", searchIDs(t, s, nostr.Filter{Search: "banana"}), fresh...)
	report(t, s)
}

// TestSearchOldLayout opens a database whose index has the previous
// layout (one S key per term and event, the search key holding
// search.Version): Open rebuilds the index, and searches find what they
// found before.
func TestSearchOldLayout(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, Options{Path: dir, NoSync: true})
	rng := rand.New(rand.NewPCG(26, 26))
	for round := 0; round < 4; round++ {
		var evs []*nostr.Event
		for i := 0; i < 300; i++ {
			evs = append(evs, storetest.NewEvent(rng, storetest.Key(i%5), 1, storetest.BaseTime+int64(round*300+i), nil,
				fmt.Sprintf("word%d shared w%d", i%40, round)))
		}
		saveAll(t, s, evs...)
	}
	queries := []nostr.Filter{{Search: "shared"}, {Search: "word7"}, {Search: "word7 w2"}, {Search: "w3 shared", Limit: 10, HasLimit: true}}
	var want [][]nostr.ID
	for _, f := range queries {
		want = append(want, searchIDs(t, s, f))
	}
	// Rewrite the index in the old layout.
	b := s.db.NewBatch()
	b.DeleteRange([]byte{pfxSearch}, []byte{pfxSearch + 1}, nil)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxBody}, UpperBound: []byte{pfxBody + 1}})
	if err != nil {
		t.Fatal(err)
	}
	var an search.Analyzer
	old := 0
	for it.First(); it.Valid(); it.Next() {
		serial := ^binary.BigEndian.Uint64(it.Key()[1:])
		_, raw, _ := decodeBody(it.Value())
		ev, err := nostr.ParseEvent(raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		doc := an.Analyze(ev)
		p := posting{kind: uint16(ev.Kind), docLen: uint64(doc.Len)}
		for _, term := range doc.Terms {
			p.freq = uint8(term.Freq)
			b.Set(appendPostingKey(nil, term.Text, serial), appendPosting(nil, p), nil)
			old++
		}
	}
	it.Close()
	b.Set(searchKey, []byte(search.Version), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = openTest(t, Options{Path: dir})
	defer s.Close()
	if v, _, _ := getValue(s.db, searchKey); string(v) != searchIndexVersion {
		t.Fatalf("search key after the rebuild: %q", v)
	}
	rep := report(t, s)
	if rep.postings != old || rep.blocks >= old/10 {
		t.Fatalf("after the rebuild: %+v; %d postings in the old layout", rep, old)
	}
	for i, f := range queries {
		if got := searchIDs(t, s, f); len(got) == 0 || !slices.Equal(got, want[i]) {
			t.Fatalf("%+v: %d results, before %d (or another order)", f, len(got), len(want[i]))
		}
	}
}

// TestSearchCorruptBlock checks that a posting block that does not
// decode makes the search fail with errCorrupt.
func TestSearchCorruptBlock(t *testing.T) {
	s := openTest(t, Options{NoSync: true})
	defer s.Close()
	note := noteMaker(27)
	var evs []*nostr.Event
	for i := 0; i < 10; i++ {
		evs = append(evs, note("apple pear"))
	}
	saveFold(t, s, evs...)
	key := appendPostingKey(nil, "apple", 1)
	v, ok, err := getValue(s.db, key)
	if err != nil || !ok {
		t.Fatalf("block of apple: %v %v", ok, err)
	}
	for _, bad := range [][]byte{v[:len(v)-2], append(v, 1), {0}, {2, 1, 1, 0, 1, 1}} {
		if err := s.db.Set(key, bad, pebble.Sync); err != nil {
			t.Fatal(err)
		}
		for _, query := range []string{"apple", "pear apple", "apple pear"} {
			it, err := s.Query(context.Background(), []nostr.Filter{{Search: query}})
			if err != nil {
				t.Fatal(err)
			}
			for it.Next() {
			}
			if err := it.Err(); !errors.Is(err, errCorrupt) {
				t.Fatalf("%q over block %x: %v", query, bad, err)
			}
			it.Close()
		}
	}
}

// TestSearchBlockKeys logs the keys (pebble operations) and bytes the
// writer's batches hold per event, for the benchmark's notes
// (storetest.SearchFixtureEvents), at the batch sizes of
// BenchmarkIngestSearch and smaller, with search on and off: the figures
// docs/storage.md quotes. Counted, not timed.
func TestSearchBlockKeys(t *testing.T) {
	for _, search := range []bool{true, false} {
		for _, batch := range []int{1024, 64, 8, 1} {
			s := openTest(t, Options{NoSync: true, PurgeInterval: -1, DisableSearch: !search})
			count := 8192
			if batch == 1 {
				count = 1024
			}
			if err := storetest.SearchFixtureEvents(count, batch, func(evs []*nostr.Event) error {
				saveAll(t, s, evs...)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			rep := report(t, s)
			if rep.blocks > rep.postings {
				t.Fatalf("%+v", rep)
			}
			t.Logf("search %v, batch %d: %.2f keys per event, %.0f bytes per event (S keys now %d, segments %d, postings %d)",
				search, batch, float64(s.writeOps.Load())/float64(count), float64(s.writeBytes.Load())/float64(count),
				rep.blocks, rep.segments, rep.postings)
			s.Close()
		}
	}
}

// TestRebuildSearchClearsDeadPostings replaces a profile in a later batch
// (its postings stay behind, dead) and reopens with RebuildSearch: the
// rebuilt index has no dead postings and still finds the current profile.
func TestRebuildSearchClearsDeadPostings(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 7))
	s := openTest(t, Options{Path: dir, NoSync: true})
	old := storetest.NewEvent(rng, storetest.Key(1), 0, storetest.BaseTime, nil, `{"name":"alice","about":"quince grower"}`)
	cur := storetest.NewEvent(rng, storetest.Key(1), 0, storetest.BaseTime+1, nil, `{"name":"alice","about":"plum grower"}`)
	for _, ev := range []*nostr.Event{old, cur} { // two batches
		if _, err := s.Save(ctx, []*nostr.Event{ev}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := integrity(s.db)
	if err != nil {
		t.Fatal(err)
	}
	if rep.dead == 0 {
		t.Fatal("the test's premise: replacing in a later batch leaves dead postings")
	}
	if n := s.Stats().SearchDeadPostings; n != int64(rep.dead) {
		t.Fatalf("Stats counts %d dead postings, the index holds %d", n, rep.dead)
	}
	deadBefore := rep.dead
	s.Close()
	for _, rebuild := range []bool{false, true} {
		s = openTest(t, Options{Path: dir, NoSync: true, RebuildSearch: rebuild})
		rep, err = integrity(s.db)
		if err != nil {
			t.Fatal(err)
		}
		if dead := rep.dead > 0; dead == rebuild {
			t.Fatalf("RebuildSearch %v: %d dead postings", rebuild, rep.dead)
		}
		if n := s.Stats().SearchDeadPostings; n != int64(rep.dead) || (!rebuild && rep.dead != deadBefore) {
			t.Fatalf("RebuildSearch %v: Stats counts %d dead postings, the index holds %d (%d before the reopen)", rebuild, n, rep.dead, deadBefore)
		}
		got := searchIDs(t, s, nostr.Filter{Search: "grower"})
		if len(got) != 1 || got[0] != cur.ID {
			t.Fatalf("RebuildSearch %v: search found %v, want the current profile only", rebuild, got)
		}
		s.Close()
	}
}

// runSearch runs a search stream to its end and returns it (for its
// figures) and the ids it matched, in order.
func runSearch(t *testing.T, q *query, text string) (*searchStream, []nostr.ID) {
	t.Helper()
	fl := nostr.Filter{Search: text}
	ss := q.newSearch(&fl, true, true)
	var got []nostr.ID
	for {
		ok, err := ss.next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return ss, got
		}
		got = append(got, ss.cur.id)
	}
}

// TestDeadPostingsCount: a replacement in the same batch leaves nothing
// behind (the pending postings are dropped); in a later batch it leaves
// the old version's postings, counted once per removal.
func TestDeadPostingsCount(t *testing.T) {
	s := openTest(t, Options{NoSync: true})
	defer s.Close()
	rng := rand.New(rand.NewPCG(8, 8))
	ctx := context.Background()
	p := func(ts int64, about string) *nostr.Event {
		return storetest.NewEvent(rng, storetest.Key(2), 0, storetest.BaseTime+ts, nil, `{"name":"bo","about":"`+about+`"}`)
	}
	if _, err := s.Save(ctx, []*nostr.Event{p(0, "apple pear"), p(1, "apple plum")}); err != nil {
		t.Fatal(err)
	}
	if n := s.Stats().SearchDeadPostings; n != 0 {
		t.Fatalf("replaced in the same batch: %d dead postings, want 0", n)
	}
	for i := int64(2); i < 5; i++ {
		if _, err := s.Save(ctx, []*nostr.Event{p(i, "apple fig")}); err != nil {
			t.Fatal(err)
		}
		rep, err := integrity(s.db)
		if err != nil {
			t.Fatal(err)
		}
		if n := s.Stats().SearchDeadPostings; n != int64(rep.dead) || n == 0 {
			t.Fatalf("after replacement %d: Stats counts %d, the index holds %d", i, n, rep.dead)
		}
	}
}

// TestPostingBufBatches: the writer's one buffer holds the postings of
// earlier batches and the current one's; batchBlocks gives the current
// batch's alone (its segment), drop removes only the current batch's,
// and a fold (freeze) takes them all, newest first, leaving the lists as
// they are.
func TestPostingBufBatches(t *testing.T) {
	var pb postingBuf
	pb.reset()
	p := posting{kind: 1, freq: 1, docLen: 3}
	for s := uint64(1); s <= 300; s++ { // batch 1: "big" past a block's 256
		pb.add([]byte("big"), s, p)
	}
	pb.add([]byte("old"), 300, p)
	pb.newBatch()
	pb.add([]byte("big"), 301, p)
	pb.add([]byte("big"), 302, p)
	pb.add([]byte("new"), 302, p)
	if pb.bn != 3 {
		t.Fatalf("batch %d postings, want 3", pb.bn)
	}
	if pb.drop([]byte("big"), 5) || pb.drop([]byte("old"), 300) {
		t.Fatal("dropped a posting of an earlier batch")
	}
	if !pb.drop([]byte("big"), 301) || pb.drop([]byte("big"), 301) {
		t.Fatal("the current batch's posting is not dropped exactly once")
	}
	type blk struct {
		term    string
		serials []uint64
	}
	batch := func() (out []blk) {
		pb.batchBlocks(func(term string, b []blockPosting) {
			var ss []uint64
			for _, bp := range b {
				ss = append(ss, bp.serial)
			}
			out = append(out, blk{term, ss})
		})
		return out
	}
	got := batch()
	want := []blk{{"big", []uint64{302}}, {"new", []uint64{302}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("batch blocks %v, want %v", got, want)
	}

	var f foldState
	f.freeze(&pb)
	var terms []string
	var sizes []int
	for _, fb := range f.blocks {
		ps := f.postings[fb.from:fb.to]
		for i := 1; i < len(ps); i++ {
			if ps[i].serial >= ps[i-1].serial {
				t.Fatalf("block of %q not newest first: %d then %d", fb.term, ps[i-1].serial, ps[i].serial)
			}
		}
		terms, sizes = append(terms, fb.term), append(sizes, len(ps))
	}
	// "big": 300 + 302 = 301 postings, the newest 256 first (302,
	// 300..46), then 45..1.
	if !slices.Equal(terms, []string{"big", "big", "new", "old"}) || !slices.Equal(sizes, []int{256, 45, 1, 1}) {
		t.Fatalf("fold blocks %v of %v", terms, sizes)
	}
	if first := f.postings[f.blocks[0].from]; first.serial != 302 {
		t.Fatalf("the first fold block starts at %d, want 302", first.serial)
	}
	if last := f.postings[f.blocks[1].to-1]; last.serial != 1 {
		t.Fatalf("the second fold block ends at %d, want 1", last.serial)
	}
	// The lists are left oldest first: the batch's blocks are the same.
	if again := batch(); fmt.Sprint(again) != fmt.Sprint(want) {
		t.Fatalf("after the fold, batch blocks %v, want %v", again, want)
	}
	pb.reset()
	if pb.bn != 0 || len(pb.used) != 0 || pb.drop([]byte("big"), 302) {
		t.Fatal("reset left postings behind")
	}
}
