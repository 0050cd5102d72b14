package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// Benchmark fixtures: storetest's fixture events over fixtureAuthors
// authors, loaded once per size into the schema petrel_bench_<size>_v<schema
// version> of the test database and kept for later runs (drop the
// schema to rebuild it), then VACUUM ANALYZEd, as a store that has been
// running a while would be. The sizes mirror the pebble store's.
const fixtureAuthors = 100

var benchSizes = []int{100_000, 1_000_000}

var (
	fixturesMu sync.Mutex
	fixtures   = map[int]*Store{}
)

func fixture(b testing.TB, n int) *Store {
	b.Helper()
	needDB(b)
	fixturesMu.Lock()
	defer fixturesMu.Unlock()
	if s := fixtures[n]; s != nil {
		return s
	}
	ctx := context.Background()
	schema := fmt.Sprintf("petrel_bench_%d_v%d", n, SchemaVersion())
	s, err := Open(ctx, Options{URL: testURL(), Schema: schema, Logger: quiet, PurgeInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	var complete bool
	if err := s.pool.QueryRow(ctx, "SELECT to_regclass('bench_fixture_complete') IS NOT NULL").Scan(&complete); err != nil {
		b.Fatal(err)
	}
	if !complete {
		// An incomplete fixture (an interrupted build): start over.
		if _, err := s.pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			b.Fatal(err)
		}
		s.Close()
		start := time.Now()
		if s, err = Open(ctx, Options{URL: testURL(), Schema: schema, Logger: quiet, PurgeInterval: -1}); err != nil {
			b.Fatal(err)
		}
		if err := storetest.LoadFixture(ctx, s, n, fixtureAuthors); err != nil {
			b.Fatal(err)
		}
		for _, sql := range []string{"VACUUM ANALYZE events", "VACUUM ANALYZE tags", "CREATE TABLE bench_fixture_complete ()"} {
			if _, err := s.pool.Exec(ctx, sql); err != nil {
				b.Fatal(err)
			}
		}
		b.Logf("built fixture %s in %v", schema, time.Since(start).Round(time.Millisecond))
	}
	fixtures[n] = s
	return s
}

func forSizes(b *testing.B, fn func(b *testing.B, s *Store)) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			fn(b, fixture(b, n))
		})
	}
}

// The query shapes of the benchmarks (and of docs/storage.md's EXPLAIN).
var (
	feedFilter    = nostr.Filter{Authors: storetest.FixtureAuthors(20), Kinds: []int{1}, Limit: 500, HasLimit: true}
	profileFilter = nostr.Filter{Authors: []nostr.PubKey{storetest.FixtureAuthor(7)}, Kinds: []int{0}}
	mentionFilter = nostr.Filter{Tags: []nostr.TagFilter{{Name: 'p', Values: []string{storetest.FixtureAuthor(3).Hex()}}}, Kinds: []int{1, 6, 7}, Limit: 100, HasLimit: true}
	hashtagFilter = nostr.Filter{Tags: []nostr.TagFilter{{Name: 't', Values: []string{"nostr"}}}, Limit: 100, HasLimit: true}
	globalFilter  = nostr.Filter{Kinds: []int{1}, Limit: 100, HasLimit: true}
	recentFilter  = nostr.Filter{Limit: 100, HasLimit: true, Until: storetest.BaseTime + 50_000, HasUntil: true}
	authorFilter  = nostr.Filter{Authors: []nostr.PubKey{storetest.FixtureAuthor(9)}, Limit: 100, HasLimit: true}
)

// followsFilter is a follow list of 500 authors, notes and reposts,
// limit 60: active of them are fixture authors, the others have no
// events.
func followsFilter(active int) nostr.Filter {
	authors := storetest.FixtureAuthors(500)
	if active < fixtureAuthors {
		authors = append(authors[:active:active], storetest.FixtureAuthors(1000)[500:1000-active]...)
	}
	return nostr.Filter{Authors: authors, Kinds: []int{1, 6}, Limit: 60, HasLimit: true}
}

// BenchmarkFeed: a home feed, 20 authors' notes, limit 500.
func BenchmarkFeed(b *testing.B) {
	forSizes(b, func(b *testing.B, s *Store) { storetest.BenchQuery(b, s, []nostr.Filter{feedFilter}, 500) })
}

// BenchmarkProfile: one author's profile (kind 0).
func BenchmarkProfile(b *testing.B) {
	forSizes(b, func(b *testing.B, s *Store) { storetest.BenchQuery(b, s, []nostr.Filter{profileFilter}, 1) })
}

// BenchmarkFollows: a follow list of 500 authors (see followsFilter).
func BenchmarkFollows(b *testing.B) {
	for _, active := range []int{100, 5} {
		f := []nostr.Filter{followsFilter(active)}
		b.Run(fmt.Sprintf("active=%d", active), func(b *testing.B) {
			forSizes(b, func(b *testing.B, s *Store) { storetest.BenchQuery(b, s, f, 60) })
		})
	}
}

// BenchmarkMentions: notifications for one author (#p, several kinds).
func BenchmarkMentions(b *testing.B) {
	forSizes(b, func(b *testing.B, s *Store) { storetest.BenchQuery(b, s, []nostr.Filter{mentionFilter}, 100) })
}

// BenchmarkHashtag: a #t feed, limit 100.
func BenchmarkHashtag(b *testing.B) {
	forSizes(b, func(b *testing.B, s *Store) { storetest.BenchQuery(b, s, []nostr.Filter{hashtagFilter}, 100) })
}

// BenchmarkGlobal: the newest 100 notes.
func BenchmarkGlobal(b *testing.B) {
	forSizes(b, func(b *testing.B, s *Store) { storetest.BenchQuery(b, s, []nostr.Filter{globalFilter}, 100) })
}

// BenchmarkUntil: 100 events before a point deep in the history
// (created_at index, time range).
func BenchmarkUntil(b *testing.B) {
	forSizes(b, func(b *testing.B, s *Store) { storetest.BenchQuery(b, s, []nostr.Filter{recentFilter}, 100) })
}

// BenchmarkCount: NIP-45 count of one author's notes.
func BenchmarkCount(b *testing.B) {
	f := []nostr.Filter{{Authors: []nostr.PubKey{storetest.FixtureAuthor(5)}, Kinds: []int{1}}}
	forSizes(b, func(b *testing.B, s *Store) {
		want := int64(-1)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			n, err := s.Count(context.Background(), f)
			if err != nil {
				b.Fatal(err)
			}
			if want >= 0 && n != want {
				b.Fatalf("count %d then %d", want, n)
			}
			want = n
		}
		b.ReportMetric(float64(want), "events")
	})
}

// BenchmarkSearch: one word of the fixture's notes, limit 100.
func BenchmarkSearch(b *testing.B) {
	f := []nostr.Filter{{Search: "bitcoin", Kinds: []int{1}, Limit: 100, HasLimit: true}}
	forSizes(b, func(b *testing.B, s *Store) { storetest.BenchQuery(b, s, f, 100) })
}

// BenchmarkIngest: Save throughput at several batch sizes into a fresh
// schema.
func BenchmarkIngest(b *testing.B) {
	for _, batch := range []int{1, 64, 512} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s := openTest(b, Options{PurgeInterval: -1})
			defer s.Close()
			storetest.BenchIngest(b, s, batch)
		})
	}
}

// BenchmarkSubmit: events/s through Submit from many goroutines, each
// waiting for its done before submitting the next (like many connections
// publishing): the writer turns them into batches.
func BenchmarkSubmit(b *testing.B) {
	for _, conc := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("publishers=%d", conc), func(b *testing.B) {
			s := openTest(b, Options{PurgeInterval: -1})
			defer s.Close()
			rng := rand.New(rand.NewPCG(uint64(conc), uint64(b.N)))
			evs := make([]*nostr.Event, b.N)
			for i := range evs {
				evs[i] = storetest.NewEvent(rng, storetest.FixtureAuthor(i%100), 1, int64(storetest.BaseTime+i),
					nostr.Tags{{"t", "bench"}, {"p", storetest.FixtureAuthor(i % 7).Hex()}}, "benchmark event content, about a hundred bytes long, like a short note")
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for g := 0; g < conc; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					done := make(chan store.SaveResult, 1)
					for {
						i := next.Add(1) - 1
						if i >= int64(len(evs)) {
							return
						}
						if err := s.Submit(context.Background(), evs[i], func(r store.SaveResult) { done <- r }); err != nil {
							b.Error(err)
							return
						}
						if r := <-done; r.Outcome != store.Stored {
							b.Errorf("outcome %v: %v", r.Outcome, r.Err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
		})
	}
}
