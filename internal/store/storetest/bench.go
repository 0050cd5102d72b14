package storetest

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/bench"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// FixtureAuthor returns the pubkey of author a of the benchmark fixture.
func FixtureAuthor(a int) nostr.PubKey { return Key(10_000_000 + a) }

// FixtureAuthors returns the first n fixture authors.
func FixtureAuthors(n int) []nostr.PubKey {
	out := make([]nostr.PubKey, n)
	for i := range out {
		out[i] = FixtureAuthor(i)
	}
	return out
}

// FixtureEvents generates the benchmark fixture: n events by authors
// authors, one per second from BaseTime, deterministic. About 70% are
// notes (kind 1, with p and t tags), 20% reactions (kind 7, e and p tags),
// 8% reposts (kind 6) and 2% profile updates (kind 0, replaceable: only
// each author's newest stays stored). The events are passed to fn in
// batches of up to batch events; the slices are reused between calls.
func FixtureEvents(n, authors, batch int, fn func([]*nostr.Event) error) error {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(authors)))
	words := []string{"nostr", "relay", "bitcoin", "zap", "pebble", "go", "fast", "note", "hello", "world", "gm", "petrel"}
	buf := make([]*nostr.Event, 0, batch)
	var prev []nostr.ID
	for i := 0; i < n; i++ {
		a := rng.IntN(authors)
		pk := FixtureAuthor(a)
		ts := int64(BaseTime + i)
		var kind int
		var tags nostr.Tags
		content := ""
		switch r := rng.IntN(100); {
		case r < 70 || len(prev) == 0:
			kind = 1
			for j := rng.IntN(3); j > 0; j-- {
				tags = append(tags, nostr.Tag{"p", FixtureAuthor(rng.IntN(authors)).Hex()})
			}
			if rng.IntN(4) == 0 {
				tags = append(tags, nostr.Tag{"t", words[rng.IntN(len(words))]})
			}
			for len(content) < 80+rng.IntN(200) {
				content += words[rng.IntN(len(words))] + " "
			}
		case r < 90:
			kind = 7
			content = "+"
			tags = nostr.Tags{{"e", prev[rng.IntN(len(prev))].Hex()}, {"p", FixtureAuthor(rng.IntN(authors)).Hex()}}
		case r < 98:
			kind = 6
			tags = nostr.Tags{{"e", prev[rng.IntN(len(prev))].Hex()}, {"p", FixtureAuthor(rng.IntN(authors)).Hex()}}
		default:
			kind = 0
			content = `{"name":"author ` + strconv.Itoa(a) + `","about":"benchmark fixture"}`
		}
		ev := NewEvent(rng, pk, kind, ts, tags, content)
		if kind == 1 {
			if len(prev) < 1000 {
				prev = append(prev, ev.ID)
			} else {
				prev[rng.IntN(len(prev))] = ev.ID
			}
		}
		buf = append(buf, ev)
		if len(buf) == batch || i == n-1 {
			if err := fn(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	return nil
}

// LoadFixture saves the fixture into st in batches of 4096.
func LoadFixture(ctx context.Context, st store.Store, n, authors int) error {
	return FixtureEvents(n, authors, 4096, func(evs []*nostr.Event) error {
		_, err := st.Save(ctx, evs)
		return err
	})
}

// BenchQuery runs the query b.N times, reading every record, and fails
// unless each run returns want records (want < 0: any number).
func BenchQuery(b *testing.B, st store.Store, filters []nostr.Filter, want int) {
	b.Helper()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		it, err := st.Query(ctx, filters)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for it.Next() {
			if len(it.Record().Raw) == 0 {
				b.Fatal("empty Raw")
			}
			n++
		}
		if err := it.Err(); err != nil {
			b.Fatal(err)
		}
		it.Close()
		if want >= 0 && n != want {
			b.Fatalf("query returned %d records, want %d", n, want)
		}
	}
	b.StopTimer()
	reportCPU(b, cpu0)
}

// cpuTime returns the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process CPU time per operation since cpu0
// ("cpu-ns/op"): on a shared machine it moves less with other people's load
// than the wall time does (background work of the store counts too).
func reportCPU(b *testing.B, cpu0 time.Duration) {
	if cpu0 > 0 && b.N > 0 {
		b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	}
}

// BenchIngest saves b.N fresh events in Save calls of batch events each
// and reports events/s.
func BenchIngest(b *testing.B, st store.Store, batch int) {
	b.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(batch), uint64(b.N)))
	evs := make([]*nostr.Event, 0, batch)
	// Build the events before timing.
	all := make([]*nostr.Event, b.N)
	for i := range all {
		tags := nostr.Tags{{"p", FixtureAuthor(rng.IntN(100)).Hex()}, {"t", "bench"}}
		all[i] = NewEvent(rng, FixtureAuthor(rng.IntN(100)), 1, int64(BaseTime+i), tags, "benchmark event content, about a hundred bytes long, like a short note on a relay")
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	cpu0 := cpuTime()
	for i := 0; i < len(all); i += batch {
		evs = append(evs[:0], all[i:min(i+batch, len(all))]...)
		res, err := st.Save(ctx, evs)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r.Outcome != store.Stored {
				b.Fatalf("outcome %v: %v", r.Outcome, r.Err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
	reportCPU(b, cpu0)
}

// SearchFixtureEvents generates n kind-1 notes with the content and tags
// of petrel bench's generator (internal/bench: 100 to 300 bytes of words
// from bench.Vocabulary, "p", "e" and a "t" tag from bench.Hashtags), by
// 100 authors, 100 per second from BaseTime, with random ids and
// signatures (stores do not verify them). Each vocabulary word is in
// about one note in eight, so a search for one has thousands of matches
// in 100,000 notes. Deterministic; the events are passed to fn in batches
// of up to batch events (the slice is reused between calls).
func SearchFixtureEvents(n, batch int, fn func([]*nostr.Event) error) error {
	return FixtureEventsText(n, batch, bench.TextVocabulary, fn)
}

// FixtureEventsText is SearchFixtureEvents with the content written as
// text says (bench.TextVocabulary, or bench.TextNatural: a long tail of
// rare words, as real notes have).
func FixtureEventsText(n, batch int, text string, fn func([]*nostr.Event) error) error {
	g := bench.NewGenerator(bench.GenConfig{Seed: 50, Authors: 100, Start: BaseTime, PerSecond: 100, Text: text})
	rng := rand.New(rand.NewPCG(50, uint64(n)))
	buf := make([]*nostr.Event, 0, batch)
	for i := 0; i < n; i++ {
		ev := g.Unsigned(i)
		ev.PubKey = g.Authors()[g.AuthorOf(i)]
		for j := 0; j < len(ev.ID); j += 8 {
			binary.LittleEndian.PutUint64(ev.ID[j:], rng.Uint64())
		}
		for j := 0; j < len(ev.Sig); j += 8 {
			binary.LittleEndian.PutUint64(ev.Sig[j:], rng.Uint64())
		}
		ev.Raw = nostr.Serialize(ev)
		buf = append(buf, ev)
		if len(buf) == batch || i == n-1 {
			if err := fn(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	return nil
}
