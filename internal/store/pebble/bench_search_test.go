package pebble

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/bench"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// searchFixture returns a store holding n notes of storetest's search
// fixture (petrel bench's vocabulary), built once into $PETREL_BENCH_DIR
// like the other fixtures.
func searchFixture(b *testing.B, n int) *Store {
	b.Helper()
	return cachedFixture(b, -n, "petrel-bench-search", func(s *Store) error {
		return storetest.SearchFixtureEvents(n, 4096, func(evs []*nostr.Event) error {
			_, err := s.Save(context.Background(), evs)
			return err
		})
	})
}

// BenchmarkSearch: NIP-50 queries with limit 500 over 100,000 notes of
// petrel bench's vocabulary (each word is in about 12,000 of them), as
// `petrel bench search` sends them: one word; two words (about 1,500
// notes have both); one word restricted to 10 authors (post-filtered on
// the bodies); a hashtag.
func BenchmarkSearch(b *testing.B) {
	authors := make([]nostr.PubKey, 10)
	g := bench.NewGenerator(bench.GenConfig{Seed: 50, Authors: 100, Start: storetest.BaseTime})
	copy(authors, g.Authors())
	cases := []struct {
		name string
		f    nostr.Filter
		want int
	}{
		{"word", nostr.Filter{Search: bench.Vocabulary[37], Limit: 500, HasLimit: true}, 500},
		{"two-words", nostr.Filter{Search: bench.Vocabulary[37] + " " + bench.Vocabulary[74], Limit: 500, HasLimit: true}, 500},
		{"word+authors", nostr.Filter{Search: bench.Vocabulary[37], Authors: authors, Limit: 500, HasLimit: true}, 500},
		{"hashtag", nostr.Filter{Search: "photography", Kinds: []int{1}, Limit: 500, HasLimit: true}, 500},
	}
	for _, n := range []int{100_000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			s := searchFixture(b, n)
			for _, c := range cases {
				b.Run(c.name, func(b *testing.B) { storetest.BenchQuery(b, s, []nostr.Filter{c.f}, c.want) })
			}
		})
	}
}

// BenchmarkSearchIndexSize reports the share of the 100,000-note fixture
// taken by the search index (pebble's estimate of the S table's disk
// usage) next to the whole store.
func BenchmarkSearchIndexSize(b *testing.B) {
	s := searchFixture(b, 100_000)
	for i := 0; i < b.N; i++ {
		idx, err := s.db.EstimateDiskUsage([]byte{pfxSearch}, []byte{pfxSearch + 1})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(idx), "index-bytes")
		b.ReportMetric(float64(s.Stats().SizeBytes), "store-bytes")
	}
}

// BenchmarkIngestSearch: Save throughput with and without the search
// index, for notes of petrel bench's vocabulary (about 30 distinct words
// each): the difference is the indexing cost per event. Unsynced batches
// of 1024 show the CPU cost; synced batches of 64 and 8 a relay's group
// commits (8 connections under load commit a few events at a time).
// keys/event and bytes/event are what the writer's batches held (pebble
// operations and batch bytes), counted, not timed.
func BenchmarkIngestSearch(b *testing.B) {
	for _, cfg := range []struct {
		sync  bool
		batch int
	}{{false, 1024}, {true, 64}, {true, 8}} {
		for _, on := range []bool{false, true} {
			b.Run(fmt.Sprintf("sync=%v/batch=%d/search=%v", cfg.sync, cfg.batch, on), func(b *testing.B) {
				s := openTest(b, Options{NoSync: !cfg.sync, PurgeInterval: -1, DisableSearch: !on})
				defer s.Close()
				all := fixtureNotes(b, b.N, bench.TextVocabulary)
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				for i := 0; i < len(all); i += cfg.batch {
					res, err := s.Save(ctx, all[i:min(i+cfg.batch, len(all))])
					if err != nil {
						b.Fatal(err)
					}
					for _, r := range res {
						if r.Outcome != store.Stored {
							b.Fatalf("outcome %v", r.Outcome)
						}
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
				b.ReportMetric(float64(s.writeOps.Load())/float64(b.N), "keys/event")
				b.ReportMetric(float64(s.writeBytes.Load())/float64(b.N), "bytes/event")
			})
		}
	}
}

// fixtureNotes returns n notes of storetest's fixture, their content
// written as text says (bench.TextVocabulary or bench.TextNatural).
func fixtureNotes(b testing.TB, n int, text string) []*nostr.Event {
	b.Helper()
	all := make([]*nostr.Event, 0, n)
	if err := storetest.FixtureEventsText(n, 4096, text, func(evs []*nostr.Event) error {
		all = append(all, evs...)
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	return all
}

// BenchmarkFoldNaturalText: what a fold costs the writer with text whose
// vocabulary is natural (petrel bench --text natural: Zipf-distributed
// words, s = 1.1 over 200,000) rather than its 248 evenly: b.N notes in
// batches of 4 (moderate load), unsynced, so that the figures are the
// writer's CPU and not the disk. batch-ms-p99 and batch-ms-max are how
// long the writer took over a batch (everything queued behind it waits
// that long); fold-batches counts the batches that wrote blocks of a
// fold (a staged fold writes foldChunk blocks a batch), fold-batch-keys
// is their median keys, fold-ms-p50 and fold-ms-max how long they took;
// keys/event as in BenchmarkIngestSearch. Run it with -benchtime 60000x
// or more: a fold comes every 128 batches. (A bound on a fold's distinct
// terms was tried with it: docs/BENCHMARKS.md, issue 19, ninth sitting.)
//
// The two maxima are the disk after all: unsynced, the batch that fills
// a memtable waits in pebble's fdatasync of the whole write-ahead log it
// closes, longer as pebble's memtables grow to their full size (9, 14,
// 30, 51 ms at the 1,293rd, 2,589th, 5,193rd and 10,449th batch of a
// run in a runtime trace), whether or not that batch folds. A relay's
// commits are synced, so its log holds little unsynced at a switch;
// read fold-ms-p50 and batch-ms-p99 for the writer's CPU.
func BenchmarkFoldNaturalText(b *testing.B) {
	var all, folds []time.Duration
	var keys []uint32
	opts := Options{NoSync: true, PurgeInterval: -1}
	opts.onBatch = func(k uint32, d time.Duration, folded int) {
		all = append(all, d)
		if folded > 0 {
			folds, keys = append(folds, d), append(keys, k)
		}
	}
	s := openTest(b, opts)
	defer s.Close()
	notes := fixtureNotes(b, b.N, bench.TextNatural)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < len(notes); i += 4 {
		if _, err := s.Save(ctx, notes[i:min(i+4, len(notes))]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(s.writeOps.Load())/float64(b.N), "keys/event")
	slices.Sort(all)
	b.ReportMetric(float64(all[len(all)*99/100])/1e6, "batch-ms-p99")
	b.ReportMetric(float64(all[len(all)-1])/1e6, "batch-ms-max")
	if len(folds) == 0 {
		return
	}
	slices.Sort(folds)
	slices.Sort(keys)
	b.ReportMetric(float64(len(folds)), "fold-batches")
	b.ReportMetric(float64(keys[len(keys)/2]), "fold-batch-keys")
	b.ReportMetric(float64(folds[len(folds)/2])/1e6, "fold-ms-p50")
	b.ReportMetric(float64(folds[len(folds)-1])/1e6, "fold-ms-max")
}

// BenchmarkSearchSegments: the cost of reading posting segments. 20,000
// notes of the search fixture, the last 1,016 of them saved in 127
// batches of 8 (127 segments, as many as the writer keeps), queried as
// BenchmarkSearch does; then the same store after folding the segments
// into S blocks. The difference is what a search pays for the segments.
func BenchmarkSearchSegments(b *testing.B) {
	s := openTest(b, Options{NoSync: true, PurgeInterval: -1})
	defer s.Close()
	const n, tail, batch = 20_000, 1016, 8
	var all []*nostr.Event
	if err := storetest.SearchFixtureEvents(n, 4096, func(evs []*nostr.Event) error {
		all = append(all, evs...)
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < len(all); {
		size := batch
		if i < n-tail {
			size = min(4096, n-tail-i)
		}
		if _, err := s.Save(ctx, all[i:i+size]); err != nil {
			b.Fatal(err)
		}
		i += size
	}
	cases := []struct {
		name string
		f    nostr.Filter
	}{
		{"word", nostr.Filter{Search: bench.Vocabulary[37], Limit: 500, HasLimit: true}},
		{"two-words", nostr.Filter{Search: bench.Vocabulary[37] + " " + bench.Vocabulary[74], Limit: 500, HasLimit: true}},
		{"hashtag", nostr.Filter{Search: "photography", Kinds: []int{1}, Limit: 500, HasLimit: true}},
	}
	for _, folded := range []bool{false, true} {
		if folded {
			if err := s.foldSegments(ctx); err != nil {
				b.Fatal(err)
			}
		}
		segs := countTable(b, s, pfxSegment)
		for _, c := range cases {
			b.Run(fmt.Sprintf("segments=%d/%s", segs, c.name), func(b *testing.B) {
				storetest.BenchQuery(b, s, []nostr.Filter{c.f}, -1)
			})
		}
	}
}
