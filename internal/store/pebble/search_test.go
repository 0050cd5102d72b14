package pebble

import (
	"bytes"
	"context"
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

// TestConformanceNoSearch runs the suite on a store with search disabled.
func TestConformanceNoSearch(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return checked{openTest(t, Options{NoSync: true, DisableSearch: true}), t}
	})
}

// saveAll saves events and fails unless all are stored.
// testQuery opens a query on s; the caller closes it (before s).
func testQuery(t testing.TB, s *Store) *query {
	t.Helper()
	q, err := s.newQuery()
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func saveAll(t testing.TB, s *Store, evs ...*nostr.Event) {
	t.Helper()
	res, err := s.Save(context.Background(), evs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Outcome != store.Stored {
			t.Fatalf("event %d: %v %v", i, r.Outcome, r.Err)
		}
	}
}

// searchIDs runs a query and returns the ids, in order.
func searchIDs(t testing.TB, s *Store, filters ...nostr.Filter) []nostr.ID {
	t.Helper()
	it, err := s.Query(context.Background(), filters)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var ids []nostr.ID
	for it.Next() {
		ids = append(ids, it.Record().ID)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

func idsOf(evs ...*nostr.Event) []nostr.ID {
	out := make([]nostr.ID, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

func short(ids []nostr.ID) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(id.Hex()[:6] + " ")
	}
	return b.String()
}

// TestSearchRanking checks the BM25 order: more occurrences, rarer terms
// and shorter documents rank higher.
func TestSearchRanking(t *testing.T) {
	s := openTest(t, Options{NoSync: true})
	defer s.Close()
	rng := rand.New(rand.NewPCG(5, 5))
	ts := int64(storetest.BaseTime)
	ev := func(content string) *nostr.Event {
		ts++
		return storetest.NewEvent(rng, storetest.Key(1), 1, ts, nil, content)
	}
	// Filler: "common" is in every document, "rare" in two.
	var filler []*nostr.Event
	for i := 0; i < 50; i++ {
		filler = append(filler, ev(fmt.Sprintf("common filler%d padding%d", i, i)))
	}
	saveAll(t, s, filler...)
	f := func(query string, want ...*nostr.Event) {
		t.Helper()
		got := searchIDs(t, s, nostr.Filter{Search: query, Limit: len(want), HasLimit: true})
		if !slices.Equal(got, idsOf(want...)) {
			t.Fatalf("search %q: got %s, want %s", query, short(got), short(idsOf(want...)))
		}
	}
	// Twice beats once, at equal length, whatever the age.
	twice := ev("apple apple pear")
	once := ev("apple pear plum")
	saveAll(t, s, twice, once)
	f("apple", twice, once)
	f("pear", once, twice) // equal score: the newer first
	// Rarer terms weigh more: each document has both terms, one of them
	// twice; the one with the rare term twice wins.
	rareTwice := ev("rare rare common")
	commonTwice := ev("common common rare")
	saveAll(t, s, rareTwice, commonTwice)
	f("common rare", rareTwice, commonTwice)
	f("rare common", rareTwice, commonTwice)
	// Shorter documents beat longer ones.
	long := ev("melon one two three four five six seven")
	shorter := ev("melon one two")
	saveAll(t, s, shorter, long)
	f("melon", shorter, long)
	// A title counts double.
	titled := storetest.NewEvent(rng, storetest.Key(1), 30023, ts+1, nostr.Tags{{"d", "x"}, {"title", "quince"}}, "words words")
	plain := ev("quince words words")
	saveAll(t, s, titled, plain)
	f("quince", titled, plain)
}

// TestSearchBound checks that a search reads at most
// SearchPostingsPerTerm postings (or seeks) per term: a very common word
// scores only its newest postings, while a rare word in old documents is
// still found through a common one, since seeks skip ahead.
func TestSearchBound(t *testing.T) {
	s := openTest(t, Options{NoSync: true, SearchPostingsPerTerm: 10})
	defer s.Close()
	rng := rand.New(rand.NewPCG(6, 6))
	var evs []*nostr.Event
	for i := 0; i < 100; i++ {
		content := "common word"
		if i < 3 {
			content += " rare"
		}
		evs = append(evs, storetest.NewEvent(rng, storetest.Key(1), 1, int64(storetest.BaseTime+i), nil, content))
	}
	saveAll(t, s, evs...)
	q := testQuery(t, s)
	defer q.close()
	f := func(query string, wantMatched int, want []*nostr.Event) {
		t.Helper()
		ss, got := runSearch(t, q, query)
		terms := len(search.ParseQuery(query).Terms)
		if ss.matched != wantMatched || ss.steps > terms*10 {
			t.Fatalf("search %q: %d candidates in %d steps, want %d in at most %d", query, ss.matched, ss.steps, wantMatched, terms*10)
		}
		slices.SortFunc(got, func(a, b nostr.ID) int { return strings.Compare(a.Hex(), b.Hex()) })
		wantIDs := idsOf(want...)
		slices.SortFunc(wantIDs, func(a, b nostr.ID) int { return strings.Compare(a.Hex(), b.Hex()) })
		if !slices.Equal(got, wantIDs) {
			t.Fatalf("search %q: got %s, want %s", query, short(got), short(wantIDs))
		}
	}
	f("common", 10, evs[90:])
	f("common word", 10, evs[90:])
	f("rare", 3, evs[:3])
	f("common rare", 3, evs[:3])
	f("word rare common", 3, evs[:3])
}

// TestSearchOnOff checks dropping the index (DisableSearch), building it
// for the events stored meanwhile, and rebuilding it for another analyzer
// version.
func TestSearchOnOff(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 7))
	mk := func(content string) *nostr.Event {
		return storetest.NewEvent(rng, storetest.Key(rng.IntN(3)), 1, storetest.BaseTime+rng.Int64N(100), nil, content)
	}
	a, b := mk("alpha one"), mk("alpha two")
	check := func(s *Store, indexed bool, want ...*nostr.Event) {
		t.Helper()
		if s.SupportsSearch() != indexed {
			t.Fatalf("SupportsSearch = %v", s.SupportsSearch())
		}
		got := searchIDs(t, s, nostr.Filter{Search: "alpha"})
		slices.SortFunc(got, func(x, y nostr.ID) int { return strings.Compare(x.Hex(), y.Hex()) })
		wantIDs := idsOf(want...)
		slices.SortFunc(wantIDs, func(x, y nostr.ID) int { return strings.Compare(x.Hex(), y.Hex()) })
		if !slices.Equal(got, wantIDs) {
			t.Fatalf("search: got %s, want %s", short(got), short(wantIDs))
		}
		if err := checkIntegrity(s.db); err != nil {
			t.Fatal(err)
		}
		_, has, err := getValue(s.db, searchKey)
		if err != nil || has != indexed || s.anySearchKeys() != indexed {
			t.Fatalf("search key %v, S keys %v, want %v (%v)", has, s.anySearchKeys(), indexed, err)
		}
	}
	s := openTest(t, Options{Path: dir})
	saveAll(t, s, a)
	check(s, true, a)
	s.Close()

	s = openTest(t, Options{Path: dir, DisableSearch: true})
	check(s, false)
	saveAll(t, s, b)
	s.Close()

	s = openTest(t, Options{Path: dir})
	check(s, true, a, b)
	// Another analyzer version: the index is rebuilt.
	if err := s.db.Set(searchKey, []byte("petrel-search/0"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Set(appendPostingKey(nil, []byte("stale"), 99), appendPosting(nil, posting{freq: 1, docLen: 1}), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, Options{Path: dir})
	check(s, true, a, b)
	s.Close()
}

// TestSearchUpgrade opens a database in the previous format (no search
// index, maybe the remains of an interrupted build): the index is built
// and the format upgraded. A database of an unknown format is refused.
func TestSearchUpgrade(t *testing.T) {
	for _, disable := range []bool{false, true} {
		t.Run(fmt.Sprintf("disable=%v", disable), func(t *testing.T) {
			dir := t.TempDir()
			rng := rand.New(rand.NewPCG(8, 8))
			s := openTest(t, Options{Path: dir, NoSync: true})
			var evs []*nostr.Event
			for i := 0; i < 5000; i++ {
				evs = append(evs, storetest.NewEvent(rng, storetest.Key(i%10), []int{0, 1, 1, 7, 30023}[i%5], storetest.BaseTime+int64(i),
					nostr.Tags{{"d", "x"}}, fmt.Sprintf(`{"name":"n%d"} word%d shared`, i%50, i%100)))
			}
			if _, err := s.Save(context.Background(), evs); err != nil {
				t.Fatal(err)
			}
			want := searchIDs(t, s, nostr.Filter{Search: "shared"}, nostr.Filter{Search: "n7"})
			// Make it a format 1 database with half an index.
			b := s.db.NewBatch()
			b.DeleteRange([]byte{pfxSearch}, []byte("S\x05word5"), nil)
			b.Delete(searchKey, nil)
			c, _, _ := readCommit(s.db)
			b.Set(commitKey, appendU64(nil, c.pos), nil) // the position alone, no count or figures
			b.Set(formatKey, []byte(formatV1), nil)
			if err := b.Commit(pebble.Sync); err != nil {
				t.Fatal(err)
			}
			s.Close()

			s = openTest(t, Options{Path: dir, DisableSearch: disable})
			if v, _, _ := getValue(s.db, formatKey); string(v) != formatVersion {
				t.Fatalf("format after upgrade: %q", v)
			}
			if err := checkIntegrity(s.db); err != nil {
				t.Fatal(err)
			}
			got := searchIDs(t, s, nostr.Filter{Search: "shared"}, nostr.Filter{Search: "n7"})
			if disable {
				if len(got) != 0 {
					t.Fatalf("search without an index found %d", len(got))
				}
			} else if len(want) < 1000 || !slices.Equal(got, want) {
				t.Fatalf("after the build: %d results, before %d (or a different order)", len(got), len(want))
			}
			s.Close()
		})
	}
	dir := t.TempDir()
	s := openTest(t, Options{Path: dir})
	s.db.Set(formatKey, []byte("petrel-pebble/9"), pebble.Sync)
	s.Close()
	_, err := Open(Options{Path: dir, Logger: quiet})
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), formatVersion) || !strings.Contains(err.Error(), "petrel-pebble/9") {
		t.Fatalf("Open of an unknown format: %v", err)
	}
}

// TestSearchBlock checks the posting block encoding: round trips, and
// corrupt blocks that report errCorrupt (never panic).
func TestSearchBlock(t *testing.T) {
	read := func(minSerial uint64, v []byte) ([]blockPosting, error) {
		var r blockReader
		if !r.reset(minSerial, v) {
			return nil, errBadBlock
		}
		var out []blockPosting
		for {
			ok, err := r.next()
			if err != nil || !ok {
				return out, err
			}
			out = append(out, blockPosting{r.serial, r.p})
		}
	}
	f := func(ps ...blockPosting) {
		t.Helper()
		minSerial := ps[len(ps)-1].serial
		b := appendBlock(nil, ps)
		got, err := read(minSerial, b)
		if err != nil || !slices.Equal(got, ps) {
			t.Fatalf("%+v -> %x -> %+v %v", ps, b, got, err)
		}
		if n, ok := blockCount(b); !ok || n != len(ps) {
			t.Fatalf("count %d %v, want %d", n, ok, len(ps))
		}
		// A trailing byte, a truncation: corrupt. (The serials are
		// relative to the key's, so a block read under another key
		// decodes, shifted.)
		for _, v := range [][]byte{append(bytes.Clone(b), 0), b[:len(b)-1]} {
			if _, err := read(minSerial, v); !errors.Is(err, errCorrupt) {
				t.Fatalf("%+v: block %x decoded: %v", ps, v, err)
			}
		}
	}
	p := posting{freq: 1, kind: 1, docLen: 1}
	f(blockPosting{7, p})
	f(blockPosting{1 << 40, posting{freq: 255, kind: 65535, docLen: 1 << 40}}, blockPosting{3, posting{freq: 3, kind: 30023, docLen: 300}})
	var many []blockPosting
	for i := maxBlockPostings; i > 0; i-- {
		many = append(many, blockPosting{uint64(i * 3), posting{freq: uint8(i%200 + 1), kind: uint16(i), docLen: uint64(i * i)}})
	}
	f(many...)
	// Hand-made corruptions.
	bad := func(minSerial uint64, v ...byte) {
		t.Helper()
		if _, err := read(minSerial, v); !errors.Is(err, errCorrupt) {
			t.Fatalf("block %x (key serial %d) decoded: %v", v, minSerial, err)
		}
	}
	bad(5)                                           // empty
	bad(5, 0)                                        // count 0
	bad(5, 0xff, 0xff, 0xff, 0xff, 0xff)             // count larger than the value
	bad(5, 1, 0, 0, 0, 1, 1)                         // frequency 0
	bad(5, 2, 1, 1, 0, 1, 1, 0, 1, 0, 1, 1)          // second delta 0
	bad(5, 2, 1, 1, 0, 1, 1, 2, 1, 0, 1, 1)          // second delta past the oldest
	bad(5, 1, 1, 1, 0, 1, 1)                         // one posting, not at the oldest serial
	bad(^uint64(0), 2, 2, 1, 0, 1, 1, 1, 1, 0, 1, 1) // serial overflows
	bad(5, 1, 0, 1, 0, 1, 0x80)                      // truncated doc length
	if _, ok := decodeSearchStats(appendSearchStats(nil, search.Stats{Docs: 3, TotalLen: 9})); !ok {
		t.Fatal("stats")
	}
}
