package pebble

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// Benchmark fixtures: events over fixtureAuthors authors, built once per
// size into $PETREL_BENCH_DIR (default: the system temp dir) and reused by
// later runs (delete the directory to rebuild). Loading uses NoSync and
// batches of 4096, then compacts the whole key space, as a store that has
// been running a while would be.
const fixtureAuthors = 100

var benchSizes = []int{20_000, 100_000, 1_000_000}

var (
	fixturesMu sync.Mutex
	fixtures   = map[int]*Store{}
)

func fixture(b *testing.B, n int) *Store {
	b.Helper()
	return cachedFixture(b, n, "petrel-bench", func(s *Store) error {
		return storetest.LoadFixture(context.Background(), s, n, fixtureAuthors)
	})
}

// cachedFixture returns the store cached under key (the fixture's size;
// negative for the search fixture), opening its directory under
// $PETREL_BENCH_DIR, named after prefix, the layout versions and the size,
// and building it with fill first (unsynced, then compacted) if it is not
// complete.
func cachedFixture(b *testing.B, key int, prefix string, fill func(*Store) error) *Store {
	b.Helper()
	fixturesMu.Lock()
	defer fixturesMu.Unlock()
	if s := fixtures[key]; s != nil {
		return s
	}
	root := os.Getenv("PETREL_BENCH_DIR")
	if root == "" {
		root = os.TempDir()
	}
	name := strings.ReplaceAll(formatVersion+"-"+searchIndexVersion, "/", "-")
	dir := filepath.Join(root, fmt.Sprintf("%s-%s-%d", prefix, name, max(key, -key)))
	marker := filepath.Join(dir, "FIXTURE-COMPLETE")
	if _, err := os.Stat(marker); err != nil {
		os.RemoveAll(dir)
		start := time.Now()
		s, err := Open(Options{Path: dir, NoSync: true, Logger: quiet, PurgeInterval: -1, MaxBatch: 8192})
		if err != nil {
			b.Fatal(err)
		}
		if err := fill(s); err != nil {
			b.Fatal(err)
		}
		if err := s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true); err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(marker, nil, 0o644); err != nil {
			b.Fatal(err)
		}
		b.Logf("built fixture %s in %v", dir, time.Since(start).Round(time.Millisecond))
	}
	s, err := Open(Options{Path: dir, Logger: quiet, PurgeInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	fixtures[key] = s
	return s
}

func forSizes(b *testing.B, fn func(b *testing.B, s *Store)) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			s := fixture(b, n)
			fn(b, s)
		})
	}
}

// BenchmarkFeed: a home feed, 20 authors' notes, limit 500.
func BenchmarkFeed(b *testing.B) {
	f := []nostr.Filter{{Authors: storetest.FixtureAuthors(20), Kinds: []int{1}, Limit: 500, HasLimit: true}}
	forSizes(b, func(b *testing.B, s *Store) { storetest.BenchQuery(b, s, f, 500) })
}

// BenchmarkProfile: one author's profile (kind 0).
func BenchmarkProfile(b *testing.B) {
	f := []nostr.Filter{{Authors: []nostr.PubKey{storetest.FixtureAuthor(7)}, Kinds: []int{0}}}
	forSizes(b, func(b *testing.B, s *Store) { storetest.BenchQuery(b, s, f, 1) })
}

// BenchmarkFollows: a follow list of 500 authors, notes and reposts,
// limit 60. active=100: the fixture's 100 authors plus 400 with no events
// here (the recent-events scan finds the page); active=5: 5 of the
// fixture's authors plus 495 absent ones (the scan gives up and every
// author is sought: the worst case).
func BenchmarkFollows(b *testing.B) {
	for _, active := range []int{100, 5} {
		authors := storetest.FixtureAuthors(500)
		if active < fixtureAuthors {
			authors = append(authors[:active:active], storetest.FixtureAuthors(1000)[500:995]...)
		}
		f := []nostr.Filter{{Authors: authors, Kinds: []int{1, 6}, Limit: 60, HasLimit: true}}
		b.Run(fmt.Sprintf("active=%d", active), func(b *testing.B) {
			forSizes(b, func(b *testing.B, s *Store) { storetest.BenchQuery(b, s, f, 60) })
		})
	}
}

// BenchmarkMentions: notifications for one author (#p, several kinds).
func BenchmarkMentions(b *testing.B) {
	f := []nostr.Filter{{Tags: []nostr.TagFilter{{Name: 'p', Values: []string{storetest.FixtureAuthor(3).Hex()}}}, Kinds: []int{1, 6, 7}, Limit: 100, HasLimit: true}}
	forSizes(b, func(b *testing.B, s *Store) { storetest.BenchQuery(b, s, f, 100) })
}

// BenchmarkGlobal: the newest 100 notes.
func BenchmarkGlobal(b *testing.B) {
	f := []nostr.Filter{{Kinds: []int{1}, Limit: 100, HasLimit: true}}
	forSizes(b, func(b *testing.B, s *Store) { storetest.BenchQuery(b, s, f, 100) })
}

// BenchmarkCount: NIP-45 count of one author's notes (no bodies read).
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

// BenchmarkIngest: Save throughput at several batch sizes, synced or not,
// into a fresh store.
func BenchmarkIngest(b *testing.B) {
	for _, sync := range []bool{true, false} {
		for _, batch := range []int{1, 64, 1024} {
			b.Run(fmt.Sprintf("sync=%v/batch=%d", sync, batch), func(b *testing.B) {
				s := openTest(b, Options{NoSync: !sync, PurgeInterval: -1})
				defer s.Close()
				storetest.BenchIngest(b, s, batch)
			})
		}
	}
}

// BenchmarkSubmit: events/s through Submit from many goroutines, each
// waiting for its done before submitting the next (like many connections
// publishing): the writer's group commit turns them into batches.
func BenchmarkSubmit(b *testing.B) {
	for _, synced := range []bool{true, false} {
		for _, conc := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("sync=%v/publishers=%d", synced, conc), func(b *testing.B) {
				s := openTest(b, Options{NoSync: !synced, PurgeInterval: -1})
				defer s.Close()
				rng := rand.New(rand.NewPCG(uint64(conc), uint64(b.N)))
				evs := make([]*nostr.Event, b.N)
				for i := range evs {
					evs[i] = storetest.NewEvent(rng, storetest.FixtureAuthor(i%100), 1, int64(storetest.BaseTime+i),
						nostr.Tags{{"t", "bench"}}, "benchmark event content, about a hundred bytes long, like a short note")
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
								b.Errorf("outcome %v", r.Outcome)
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
}
