package pebble

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/search"
)

// countTable returns the number of keys of one table.
func countTable(t testing.TB, s *Store, pfx byte) int {
	t.Helper()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfx}, UpperBound: []byte{pfx + 1}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for it.First(); it.Valid(); it.Next() {
		n++
	}
	if err := closeIter(it); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSegmentFoldAtLimit saves maxSegments batches: each is a segment,
// no S block is written, and searches find everything through the
// segments; the next batch folds them all into S blocks (one per term,
// split at maxBlockPostings) and deletes the segments.
func TestSegmentFoldAtLimit(t *testing.T) {
	s := openTest(t, Options{NoSync: true, PurgeInterval: -1})
	defer s.Close()
	note := noteMaker(40)
	var all, five []*nostr.Event
	check := func(stage string) {
		t.Helper()
		sameSet(t, stage+": shared", searchIDs(t, s, nostr.Filter{Search: "shared"}), all...)
		sameSet(t, stage+": shared w5", searchIDs(t, s, nostr.Filter{Search: "shared w5"}), five...)
		sameSet(t, stage+": w5 odd", searchIDs(t, s, nostr.Filter{Search: "w5 odd"}), five[1:2]...)
		if got := searchIDs(t, s, nostr.Filter{Search: "shared", Limit: 3, HasLimit: true}); len(got) != 3 {
			t.Fatalf("%s: shared limit 3: %s", stage, short(got))
		}
	}
	for i := 0; i <= maxSegments; i++ {
		a, b := note(fmt.Sprintf("shared w%d even", i)), note(fmt.Sprintf("shared w%d odd", i))
		saveAll(t, s, a, b)
		all = append(all, a, b)
		if i == 5 {
			five = []*nostr.Event{a, b}
		}
		if i == 5 || i == maxSegments-1 {
			rep := report(t, s)
			if rep.segments != i+1 || rep.blocks != 0 || countTable(t, s, pfxSearch) != 0 {
				t.Fatalf("after %d batches: %+v", i+1, rep)
			}
			check(fmt.Sprintf("%d segments", i+1))
		}
	}
	rep := report(t, s)
	if rep.segments != 0 || countTable(t, s, pfxSegment) != 0 || rep.postings != len(all)*3 {
		t.Fatalf("after the fold: %+v", rep)
	}
	// One block per term: shared (split at the cap), even, odd, and
	// each w%d.
	if got, want := blocksOf(t, s, "shared"), []int{maxBlockPostings, len(all) - maxBlockPostings}; !slices.Equal(got, want) {
		t.Fatalf("blocks of shared %v, want %v", got, want)
	}
	if rep.blocks != 2+2+maxSegments+1 {
		t.Fatalf("after the fold: %d blocks", rep.blocks)
	}
	check("folded")
}

// notesWithPostings returns notes holding n postings in all (at most 100
// distinct terms each), every term used once.
func notesWithPostings(t testing.TB, note func(string) *nostr.Event, tag string, n int) []*nostr.Event {
	t.Helper()
	var evs []*nostr.Event
	var an search.Analyzer
	total := 0
	for k := 0; total < n; k++ {
		var words []string
		for j := 0; j < 100 && total < n; j++ {
			words = append(words, fmt.Sprintf("%s%dx%d", tag, k, j))
			total++
		}
		ev := note(strings.Join(words, " "))
		if doc := an.Analyze(ev); len(doc.Terms) != len(words) {
			t.Fatalf("%d terms, want %d", len(doc.Terms), len(words))
		}
		evs = append(evs, ev)
	}
	return evs
}

// TestSegmentFoldPostings checks the postings limits: a batch of
// bigFoldPostings-1 postings makes a segment, one of bigFoldPostings
// folds at once; segments holding foldPostings postings in all stay
// segments, one posting more folds them.
func TestSegmentFoldPostings(t *testing.T) {
	for _, n := range []int{bigFoldPostings - 1, bigFoldPostings} {
		s := openTest(t, Options{NoSync: true, PurgeInterval: -1})
		saveAll(t, s, notesWithPostings(t, noteMaker(41), "big", n)...)
		g, sk := countTable(t, s, pfxSegment), countTable(t, s, pfxSearch)
		if n < bigFoldPostings && (g != 1 || sk != 0) || n == bigFoldPostings && (g != 0 || sk != n) {
			t.Fatalf("a batch of %d postings: %d segments, %d S keys", n, g, sk)
		}
		report(t, s)
		s.Close()
	}

	s := openTest(t, Options{NoSync: true, PurgeInterval: -1})
	defer s.Close()
	note := noteMaker(46)
	per := bigFoldPostings - 1
	left := foldPostings
	var first []*nostr.Event
	for i := 0; left > 0; i++ {
		n := min(per, left)
		evs := notesWithPostings(t, note, fmt.Sprintf("p%dq", i), n)
		saveAll(t, s, evs...)
		if i == 0 {
			first = evs[:1]
		}
		left -= n
	}
	g := countTable(t, s, pfxSegment)
	if g < 2 || countTable(t, s, pfxSearch) != 0 {
		t.Fatalf("%d postings in segments: %d segments, %d S keys", foldPostings, g, countTable(t, s, pfxSearch))
	}
	// One posting more folds them: foldPostings+1 blocks (every term
	// once), more than foldChunk, so the fold is staged over
	// foldBatches batches of per blocks, the first being this one; its
	// posting is a segment of the fold.
	last := notesWithPostings(t, note, "last", 1)
	saveAll(t, s, last...)
	per = (foldPostings + 1 + foldBatches - 1) / foldBatches
	rep := report(t, s)
	if rep.segments != g+1 || rep.foldBlocks != per || rep.blocks != 0 {
		t.Fatalf("one posting more: %d segments before, now %+v", g, rep)
	}
	sameSet(t, "last", searchIDs(t, s, nostr.Filter{Search: "last0x0"}), last...)
	sameSet(t, "p0q", searchIDs(t, s, nostr.Filter{Search: "p0q0x0"}), first...)
	for i := 1; i < foldBatches; i++ {
		ev := note(fmt.Sprintf("during%d", i))
		saveAll(t, s, ev)
		rep := report(t, s)
		if i < foldBatches-1 && (rep.foldBlocks != (i+1)*per || rep.segments != g+1+i) {
			t.Fatalf("batch %d of the fold: %+v", i+1, rep)
		}
		sameSet(t, fmt.Sprintf("batch %d: during", i+1), searchIDs(t, s, nostr.Filter{Search: fmt.Sprintf("during%d", i)}), ev)
		sameSet(t, fmt.Sprintf("batch %d: last", i+1), searchIDs(t, s, nostr.Filter{Search: "last0x0"}), last...)
		sameSet(t, fmt.Sprintf("batch %d: p0q", i+1), searchIDs(t, s, nostr.Filter{Search: "p0q0x0"}), first...)
	}
	rep = report(t, s)
	if rep.foldBlocks != 0 || rep.segments != foldBatches-1 || countTable(t, s, pfxSearch) != foldPostings+1 {
		t.Fatalf("after the fold: %+v, %d S keys", rep, countTable(t, s, pfxSearch))
	}
	sameSet(t, "last folded", searchIDs(t, s, nostr.Filter{Search: "last0x0"}), last...)
	sameSet(t, "p0q folded", searchIDs(t, s, nostr.Filter{Search: "p0q0x0"}), first...)
}

// TestSegmentsReopen closes a store holding segments: the writer reads
// their postings again at Open, so the fold after the reopen writes them
// (integrity would find postings missing otherwise).
func TestSegmentsReopen(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, Options{Path: dir, NoSync: true, PurgeInterval: -1})
	note := noteMaker(42)
	var all []*nostr.Event
	for i := 0; i < 10; i++ {
		evs := []*nostr.Event{note(fmt.Sprintf("shared before%d", i)), note("shared")}
		saveAll(t, s, evs...)
		all = append(all, evs...)
	}
	s.Close()
	s = openTest(t, Options{Path: dir, NoSync: true, PurgeInterval: -1})
	defer s.Close()
	sameSet(t, "reopened", searchIDs(t, s, nostr.Filter{Search: "shared"}), all...)
	more := note("shared after")
	saveAll(t, s, more)
	all = append(all, more)
	if rep := report(t, s); rep.segments != 11 || rep.blocks != 0 {
		t.Fatalf("before the fold: %+v", rep)
	}
	if got := blocksOf(t, s, "shared"); !slices.Equal(got, []int{len(all)}) {
		t.Fatalf("blocks of shared after the fold: %v", got)
	}
	sameSet(t, "folded", searchIDs(t, s, nostr.Filter{Search: "shared"}), all...)
	sameSet(t, "one", searchIDs(t, s, nostr.Filter{Search: "before3"}), all[6])
	report(t, s)
}

// openFailing opens a store whose commits fail with errInjected while
// the returned flag is set.
func openFailing(t *testing.T) (*Store, *atomic.Bool) {
	armed := new(atomic.Bool)
	s := openTest(t, Options{NoSync: true, PurgeInterval: -1, CommitFault: func() error {
		if armed.Load() {
			return errInjected
		}
		return nil
	}})
	return s, armed
}

// TestSegmentsCommitFailure fails a batch that writes a segment and one
// that folds: the writer reads the segments again, and what comes after
// stores and folds as if the failed batches had never been.
func TestSegmentsCommitFailure(t *testing.T) {
	s, armed := openFailing(t)
	defer s.Close()
	ctx := context.Background()
	note := noteMaker(43)
	var all []*nostr.Event
	for i := 0; i < 3; i++ {
		ev := note(fmt.Sprintf("shared kept%d", i))
		saveAll(t, s, ev)
		all = append(all, ev)
	}
	armed.Store(true)
	lost := note("shared lost")
	if _, err := s.Save(ctx, []*nostr.Event{lost}); !errors.Is(err, errInjected) {
		t.Fatalf("save: %v", err)
	}
	if err := s.foldSegments(ctx); !errors.Is(err, errInjected) {
		t.Fatalf("fold: %v", err)
	}
	armed.Store(false)
	if rep := report(t, s); rep.segments != 3 {
		t.Fatalf("after the failures: %+v", rep)
	}
	ev := note("shared kept3")
	saveAll(t, s, ev)
	all = append(all, ev)
	sameSet(t, "segments", searchIDs(t, s, nostr.Filter{Search: "shared"}), all...)
	if got := blocksOf(t, s, "shared"); !slices.Equal(got, []int{4}) {
		t.Fatalf("blocks of shared: %v", got)
	}
	sameSet(t, "folded", searchIDs(t, s, nostr.Filter{Search: "shared"}), all...)
	sameSet(t, "lost", searchIDs(t, s, nostr.Filter{Search: "lost"}))
	report(t, s)
}

// TestSearchIndexV1 opens an index in the previous layout (blocks, no
// segments: searchIndexV1) holding a G key that an older build left
// behind (a duplicate of postings in its S blocks). Read-only, the G key
// is not read; a writable Open upgrades the index in place (no rebuild),
// dropping the G key.
func TestSearchIndexV1(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, Options{Path: dir, NoSync: true, PurgeInterval: -1})
	note := noteMaker(44)
	var all []*nostr.Event
	for i := 0; i < 20; i++ {
		all = append(all, note(fmt.Sprintf("shared w%d", i)))
	}
	saveFold(t, s, all...)
	want := searchIDs(t, s, nostr.Filter{Search: "shared"})
	// A stale segment: the postings of shared again.
	var sw segmentWriter
	ps := []blockPosting{{serial: 3, p: posting{freq: 1, kind: 1, docLen: 2}}, {serial: 2, p: posting{freq: 1, kind: 1, docLen: 2}}}
	sw.add("shared", ps)
	if err := s.db.Set(appendSegmentKey(nil, 2), sw.appendValue(nil), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	s = reopenUpgraded(t, s, dir, searchIndexV1, func(what string, s *Store) {
		if got := searchIDs(t, s, nostr.Filter{Search: "shared"}); !slices.Equal(got, want) {
			t.Fatalf("%s: %s, want %s", what, short(got), short(want))
		}
	})
	defer s.Close()
	if n := countTable(t, s, pfxSegment); n != 0 {
		t.Fatalf("%d G keys after the upgrade", n)
	}
	report(t, s)
}

// reopenUpgraded records version as the layout of s's search index,
// closes s, and checks the index (check) through a read-only open and
// then through a writable one, which must have upgraded it in place to
// the current layout. It returns the writable store (the caller closes
// it).
func reopenUpgraded(t *testing.T, s *Store, dir, version string, check func(what string, s *Store)) *Store {
	t.Helper()
	if err := s.db.Set(searchKey, []byte(version), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	s.Close()
	ro := openTest(t, Options{Path: dir, ReadOnly: true})
	if !ro.SupportsSearch() {
		t.Fatalf("read-only open of a %s index: search off", version)
	}
	check("read-only", ro)
	ro.Close()
	s = openTest(t, Options{Path: dir, NoSync: true, PurgeInterval: -1})
	if v, _, _ := getValue(s.db, searchKey); string(v) != searchIndexVersion {
		s.Close()
		t.Fatalf("search key after the upgrade: %q", v)
	}
	check("upgraded", s)
	return s
}

// TestSegmentCorrupt checks that a segment that does not decode makes a
// search fail with errCorrupt (and never panics).
func TestSegmentCorrupt(t *testing.T) {
	s := openTest(t, Options{NoSync: true, PurgeInterval: -1})
	defer s.Close()
	note := noteMaker(45)
	var evs []*nostr.Event
	for i := 0; i < 10; i++ {
		evs = append(evs, note("apple pear"))
	}
	saveAll(t, s, evs...)
	key := appendSegmentKey(nil, 1)
	v, ok, err := getValue(s.db, key)
	if err != nil || !ok {
		t.Fatalf("segment: %v %v", ok, err)
	}
	for _, bad := range [][]byte{v[:len(v)-2], append(slices.Clone(v), 1), {0}, {1, 0, 0, 0, 9}, {2, 0, 0, 0, 5, 0, 0, 0, 1, 6, 'a'}} {
		if err := s.db.Set(key, bad, pebble.Sync); err != nil {
			t.Fatal(err)
		}
		for _, query := range []string{"apple", "pear apple"} {
			it, err := s.Query(context.Background(), []nostr.Filter{{Search: query}})
			if err != nil {
				t.Fatal(err)
			}
			for it.Next() {
			}
			if err := it.Err(); !errors.Is(err, errCorrupt) {
				t.Fatalf("%q over segment %x: %v", query, bad, err)
			}
			it.Close()
		}
	}
}

// FuzzSegment decodes arbitrary segment values the way a search does: it
// never panics, and a segment the writer built reads back exactly.
func FuzzSegment(f *testing.F) {
	var sw segmentWriter
	sw.add("ab", []blockPosting{{serial: 9, p: posting{freq: 2, kind: 1, docLen: 7}}, {serial: 4, p: posting{freq: 1, kind: 1, docLen: 3}}})
	sw.add("abc", []blockPosting{{serial: 5, p: posting{freq: 1, kind: 0, docLen: 300}}})
	f.Add(sw.appendValue(nil))
	f.Add([]byte{1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, v []byte) {
		sg, ok := parseSegment(v)
		if !ok {
			return
		}
		for _, term := range []string{"ab", "abc", "zz"} {
			lterm := append([]byte{byte(len(term))}, term...)
			i, ok := sg.find(lterm)
			for ; ok && i < sg.n; i++ {
				lt, minSerial, blk, good := sg.entry(i)
				if !good || string(lt) != string(lterm) {
					break
				}
				var r blockReader
				if r.reset(minSerial, blk) {
					for {
						if ok, err := r.next(); !ok || err != nil {
							break
						}
					}
				}
			}
		}
	})
}

// stageFold saves maxSegments+1 batches of one note each, every note
// holding "shared" and two words of its own: the last batch folds
// 2(maxSegments+1)+1 blocks, more than foldChunk, so the fold is staged
// over two batches, and is under way when stageFold returns (its first
// foldChunk blocks written, its segments still read).
func stageFold(t *testing.T, s *Store, note func(string) *nostr.Event) []*nostr.Event {
	t.Helper()
	var all []*nostr.Event
	for i := 0; i <= maxSegments; i++ {
		ev := note(fmt.Sprintf("shared u%d v%d", i, i))
		saveAll(t, s, ev)
		all = append(all, ev)
	}
	if rep := report(t, s); rep.foldBlocks != foldChunk || rep.blocks != 0 || rep.segments != maxSegments+1 {
		t.Fatalf("a staged fold under way: %+v", rep)
	}
	return all
}

// TestFoldChunkLimit: a fold of foldChunk blocks is written at once by
// the batch that starts it; one of foldChunk+1 blocks is staged.
func TestFoldChunkLimit(t *testing.T) {
	for _, blocks := range []int{foldChunk, foldChunk + 1} {
		t.Run(fmt.Sprint(blocks), func(t *testing.T) {
			s := openTest(t, Options{NoSync: true, PurgeInterval: -1})
			defer s.Close()
			note := noteMaker(54)
			// maxSegments+1 notes, each with a word of its own, the
			// first ones a second word: one block per distinct term.
			extra := blocks - (maxSegments + 1)
			var all []*nostr.Event
			for i := 0; i <= maxSegments; i++ {
				text := fmt.Sprintf("u%d", i)
				if i < extra {
					text += fmt.Sprintf(" v%d", i)
				}
				ev := note(text)
				saveAll(t, s, ev)
				all = append(all, ev)
			}
			rep := report(t, s)
			_, marked, _ := getValue(s.db, searchFoldKey)
			if blocks == foldChunk && (marked || rep.foldBlocks != 0 || rep.segments != 0 || rep.blocks != blocks) {
				t.Fatalf("a fold of %d blocks: %+v, marked %v", blocks, rep, marked)
			}
			if blocks > foldChunk && (!marked || rep.foldBlocks != foldChunk || rep.segments != maxSegments+1 || rep.blocks != 0) {
				t.Fatalf("a fold of %d blocks: %+v, marked %v", blocks, rep, marked)
			}
			sameSet(t, "u0", searchIDs(t, s, nostr.Filter{Search: "u0"}), all[0])
			sameSet(t, "v0", searchIDs(t, s, nostr.Filter{Search: "v0"}), all[0])
			sameSet(t, "u128", searchIDs(t, s, nostr.Filter{Search: fmt.Sprintf("u%d", maxSegments)}), all[maxSegments])
		})
	}
}

// TestFoldBatchesLimit: a staged fold takes at most foldBatches
// batches. At foldBatches*foldChunk blocks each batch writes foldChunk
// of them; one block more, and each writes one more.
func TestFoldBatchesLimit(t *testing.T) {
	for _, c := range []struct{ blocks, per int }{
		{foldBatches * foldChunk, foldChunk},
		{foldBatches*foldChunk + 1, foldChunk + 1},
	} {
		var pb postingBuf
		pb.reset()
		for i := 0; i < c.blocks; i++ {
			pb.add([]byte(fmt.Sprintf("t%d", i)), uint64(i+1), posting{freq: 1, kind: 1, docLen: 1})
		}
		var f foldState
		f.freeze(&pb)
		batches := (len(f.blocks) + f.per - 1) / f.per
		if len(f.blocks) != c.blocks || f.per != c.per || batches != foldBatches {
			t.Fatalf("a fold of %d terms: %d blocks, %d a batch (want %d), %d batches", c.blocks, len(f.blocks), f.per, c.per, batches)
		}
	}
}

// checkFolded searches for the notes of stageFold (and more, which hold
// "shared" too): each exactly once, whatever the state of the fold.
func checkFolded(t *testing.T, s *Store, stage string, all []*nostr.Event, more ...*nostr.Event) {
	t.Helper()
	sameSet(t, stage+": shared", searchIDs(t, s, nostr.Filter{Search: "shared"}), append(slices.Clone(all), more...)...)
	sameSet(t, stage+": u5", searchIDs(t, s, nostr.Filter{Search: "u5"}), all[5])
	sameSet(t, stage+": v128", searchIDs(t, s, nostr.Filter{Search: "v128"}), all[128])
	sameSet(t, stage+": shared u77", searchIDs(t, s, nostr.Filter{Search: "shared u77"}), all[77])
	if got := searchIDs(t, s, nostr.Filter{Search: "shared", Limit: 3, HasLimit: true}); len(got) != 3 {
		t.Fatalf("%s: shared limit 3: %s", stage, short(got))
	}
}

// TestStagedFold: a fold of more than foldChunk blocks is written over
// several batches; searches find every posting exactly once while it is
// under way (its blocks written so far are not read, its segments are),
// and the batch that writes its last blocks deletes its segments.
func TestStagedFold(t *testing.T) {
	s := openTest(t, Options{NoSync: true, PurgeInterval: -1})
	defer s.Close()
	note := noteMaker(47)
	all := stageFold(t, s, note)
	checkFolded(t, s, "under way", all)
	extra := note("shared extra")
	saveAll(t, s, extra)
	rep := report(t, s)
	if rep.foldBlocks != 0 || rep.segments != 1 || rep.blocks != 2*(maxSegments+1)+1 || countTable(t, s, pfxSearch) != rep.blocks {
		t.Fatalf("after the fold: %+v", rep)
	}
	if _, ok, _ := getValue(s.db, searchFoldKey); ok {
		t.Fatal("the fold's mark is still there")
	}
	checkFolded(t, s, "folded", all, extra)
	sameSet(t, "extra", searchIDs(t, s, nostr.Filter{Search: "extra"}), extra)
}

// TestStagedFoldReopen closes a store with a fold under way: a read-only
// open reads it as a writer would, and a writable one starts it over
// (its first blocks written again) and completes it.
func TestStagedFoldReopen(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, Options{Path: dir, NoSync: true, PurgeInterval: -1})
	note := noteMaker(48)
	all := stageFold(t, s, note)
	s.Close()

	ro := openTest(t, Options{Path: dir, ReadOnly: true})
	checkFolded(t, ro, "read-only", all)
	ro.Close()

	s = openTest(t, Options{Path: dir, NoSync: true, PurgeInterval: -1})
	defer s.Close()
	checkFolded(t, s, "reopened", all)
	a := note("shared again")
	saveAll(t, s, a)
	if rep := report(t, s); rep.foldBlocks != foldChunk || rep.segments != maxSegments+2 {
		t.Fatalf("first batch after the reopen: %+v", rep)
	}
	checkFolded(t, s, "started over", all, a)
	b := note("shared and again")
	saveAll(t, s, b)
	if rep := report(t, s); rep.foldBlocks != 0 || rep.segments != 2 || rep.blocks != 2*(maxSegments+1)+1 {
		t.Fatalf("second batch after the reopen: %+v", rep)
	}
	checkFolded(t, s, "folded", all, a, b)
}

// TestStagedFoldCommitFailure fails a batch while a fold is under way:
// the writer reads the fold again and starts it over.
func TestStagedFoldCommitFailure(t *testing.T) {
	s, armed := openFailing(t)
	defer s.Close()
	note := noteMaker(49)
	all := stageFold(t, s, note)
	armed.Store(true)
	if _, err := s.Save(context.Background(), []*nostr.Event{note("shared lost")}); !errors.Is(err, errInjected) {
		t.Fatalf("save: %v", err)
	}
	armed.Store(false)
	if rep := report(t, s); rep.foldBlocks != foldChunk || rep.segments != maxSegments+1 {
		t.Fatalf("after the failure: %+v", rep)
	}
	a, b := note("shared kept"), note("shared kept too")
	saveAll(t, s, a)
	saveAll(t, s, b)
	if rep := report(t, s); rep.foldBlocks != 0 || rep.segments != 2 {
		t.Fatalf("after two more batches: %+v", rep)
	}
	checkFolded(t, s, "folded", all, a, b)
	sameSet(t, "lost", searchIDs(t, s, nostr.Filter{Search: "lost"}))
}

// TestStagedFoldAtOnce: a forced fold (compaction) and a batch of
// bigFoldPostings postings complete a fold under way in their batch,
// with everything else.
func TestStagedFoldAtOnce(t *testing.T) {
	for _, how := range []string{"forced", "big batch"} {
		t.Run(how, func(t *testing.T) {
			s := openTest(t, Options{NoSync: true, PurgeInterval: -1})
			defer s.Close()
			note := noteMaker(50)
			all := stageFold(t, s, note)
			wantBlocks := 2*(maxSegments+1) + 1
			if how == "forced" {
				if err := s.foldSegments(context.Background()); err != nil {
					t.Fatal(err)
				}
			} else {
				saveAll(t, s, notesWithPostings(t, note, "big", bigFoldPostings)...)
				wantBlocks += bigFoldPostings
			}
			if rep := report(t, s); rep.foldBlocks != 0 || rep.segments != 0 || rep.blocks != wantBlocks {
				t.Fatalf("%s: %+v, want %d blocks", how, rep, wantBlocks)
			}
			if _, ok, _ := getValue(s.db, searchFoldKey); ok {
				t.Fatal("the fold's mark is still there")
			}
			checkFolded(t, s, how, all)
		})
	}
}

// TestSearchFoldKeyCorrupt: a fold mark that does not decode, or names
// no segments, fails Open with errCorrupt; rebuilding the index (petrel
// compact --rebuild-search) opens it again with nothing lost.
func TestSearchFoldKeyCorrupt(t *testing.T) {
	for name, v := range map[string][]byte{
		"short":       {1, 2, 3},
		"zero":        make([]byte, 16),
		"no segments": appendU64(appendU64(nil, 1000), 2000),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := openTest(t, Options{Path: dir, NoSync: true, PurgeInterval: -1})
			note := noteMaker(51)
			one, two := note("shared one"), note("shared two")
			saveAll(t, s, one)
			saveAll(t, s, two)
			if err := s.db.Set(searchFoldKey, v, pebble.Sync); err != nil {
				t.Fatal(err)
			}
			s.Close()
			_, err := Open(Options{Path: dir, Logger: quiet})
			if !errors.Is(err, errCorrupt) {
				t.Fatalf("open: %v, want errCorrupt", err)
			}
			s = openTest(t, Options{Path: dir, NoSync: true, PurgeInterval: -1, RebuildSearch: true})
			defer s.Close()
			sameSet(t, "rebuilt", searchIDs(t, s, nostr.Filter{Search: "shared"}), one, two)
			report(t, s)
		})
	}
}

// TestSearchIndexV2: an index of the previous layout (blocks2: folds in
// one batch) is read as it is read-only, and upgraded in place by a
// writable Open: its segments are kept, nothing is rebuilt.
func TestSearchIndexV2(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, Options{Path: dir, NoSync: true, PurgeInterval: -1})
	note := noteMaker(52)
	var all []*nostr.Event
	for i := 0; i < 5; i++ {
		ev := note(fmt.Sprintf("shared w%d", i))
		saveAll(t, s, ev)
		all = append(all, ev)
	}
	s = reopenUpgraded(t, s, dir, searchIndexV2, func(what string, s *Store) {
		sameSet(t, what, searchIDs(t, s, nostr.Filter{Search: "shared"}), all...)
	})
	defer s.Close()
	if rep := report(t, s); rep.segments != 5 || rep.blocks != 0 {
		t.Fatalf("upgraded: %+v", rep)
	}
}

// TestStagedFoldConcurrentSearch searches while a writer stores notes
// one batch each, with words of their own, so that folds are staged and
// segments come and go under the searches: every search must find each
// stored note exactly once, and at least every note whose Save had
// returned before it started.
func TestStagedFoldConcurrentSearch(t *testing.T) {
	s := openTest(t, Options{NoSync: true, PurgeInterval: -1})
	defer s.Close()
	note := noteMaker(53)
	const total = 3 * (maxSegments + 1)
	var stored atomic.Int64
	done := make(chan error, 1)
	go func() {
		for i := 0; i < total; i++ {
			if _, err := s.Save(context.Background(), []*nostr.Event{note(fmt.Sprintf("shared x%d y%d z%d", i, i, i))}); err != nil {
				done <- err
				return
			}
			stored.Add(1)
		}
		done <- nil
	}()
	searches := 0
	for finished := false; !finished; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
		default:
		}
		before := stored.Load()
		ids := searchIDs(t, s, nostr.Filter{Search: "shared"})
		seen := make(map[nostr.ID]bool, len(ids))
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("search %d: %s found twice", searches, id)
			}
			seen[id] = true
		}
		if int64(len(ids)) < before || int64(len(ids)) > stored.Load()+1 {
			t.Fatalf("search %d: %d notes, %d stored before it began", searches, len(ids), before)
		}
		searches++
	}
	if rep := report(t, s); rep.postings != 4*total {
		t.Fatalf("%+v, want %d postings", rep, 4*total)
	}
	if got := searchIDs(t, s, nostr.Filter{Search: "shared"}); len(got) != total {
		t.Fatalf("at the end: %d notes, want %d", len(got), total)
	}
	t.Logf("%d searches", searches)
}

// TestFoldBufferKept: freeze sizes the fold's posting buffer once for
// all its postings, and the next fold reuses it if it holds at most
// maxFoldKeep postings (the largest fold of segments); a larger one (an
// import's) is dropped at the next fold. The blocks are the terms'
// postings newest first either way.
func TestFoldBufferKept(t *testing.T) {
	for _, n := range []int{maxFoldKeep, maxFoldKeep + 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var pb postingBuf
			fill := func(n int) {
				pb.reset()
				for i := range n {
					pb.add(fmt.Appendf(nil, "t%d", i%1000), uint64(i+1), posting{freq: 1, kind: 1, docLen: uint64(i%7 + 1)})
				}
			}
			var f foldState
			fill(n)
			f.freeze(&pb)
			if len(f.postings) != n || cap(f.postings) > n+n/16 {
				t.Fatalf("%d postings: len %d cap %d", n, len(f.postings), cap(f.postings))
			}
			first := &f.postings[0]
			f.reset()
			fill(1000)
			f.freeze(&pb)
			kept := &f.postings[:1][0] == first
			if n <= maxFoldKeep && !kept || n > maxFoldKeep && kept {
				t.Fatalf("a fold of %d postings: buffer kept %v", n, kept)
			}
			if len(f.blocks) != 1000 || len(f.postings) != 1000 {
				t.Fatalf("the next fold: %d blocks, %d postings", len(f.blocks), len(f.postings))
			}
			for _, b := range f.blocks {
				ps := f.postings[b.from:b.to]
				if len(ps) != 1 || fmt.Sprintf("t%d", ps[0].serial-1) != b.term {
					t.Fatalf("block %q holds %+v", b.term, ps)
				}
			}
		})
	}
}
