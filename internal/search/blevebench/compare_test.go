package blevebench

import (
	"context"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/standard"
	"github.com/blevesearch/bleve/v2/mapping"
	bsearch "github.com/blevesearch/bleve/v2/search/query"
	"github.com/petrel-relay/petrel/internal/bench"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store/pebble"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// Env is the variable that enables the comparison.
const Env = "PETREL_BLEVE_BENCH"

const (
	corpus = 100_000
	batch  = 1024
	limit  = 500
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// doc is what bleve indexes of a note: the same text petrel indexes
// (content and hashtags) and the kind, for filters.
type doc struct {
	Text string  `json:"text"`
	Kind float64 `json:"kind"`
}

func bleveMapping() *mapping.IndexMappingImpl {
	text := mapping.NewTextFieldMapping()
	text.Analyzer = standard.Name // unicode words, lowercase, English stopwords
	text.Store, text.IncludeTermVectors, text.IncludeInAll, text.DocValues = false, false, false, false
	kind := mapping.NewNumericFieldMapping()
	kind.Store, kind.IncludeInAll, kind.DocValues = false, false, false
	dm := mapping.NewDocumentStaticMapping()
	dm.AddFieldMappingsAt("text", text)
	dm.AddFieldMappingsAt("kind", kind)
	im := mapping.NewIndexMapping()
	im.DefaultMapping = dm
	im.ScoringModel = "bm25"
	return im
}

func events(t testing.TB) [][]*nostr.Event {
	var out [][]*nostr.Event
	err := storetest.SearchFixtureEvents(corpus, batch, func(evs []*nostr.Event) error {
		out = append(out, slices.Clone(evs))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func dirSize(t testing.TB, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// loadPebble saves the corpus into a fresh store and returns it with the
// time it took.
func loadPebble(t *testing.T, batches [][]*nostr.Event, disableSearch bool) (*pebble.Store, time.Duration) {
	s, err := pebble.Open(pebble.Options{Path: t.TempDir(), NoSync: true, Logger: quiet, PurgeInterval: -1, DisableSearch: disableSearch, MaxBatch: 8192})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, evs := range batches {
		if _, err := s.Save(context.Background(), evs); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	if err := s.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, took
}

func loadBleve(t *testing.T, batches [][]*nostr.Event) (bleve.Index, string, time.Duration) {
	dir := filepath.Join(t.TempDir(), "bleve")
	idx, err := bleve.New(dir, bleveMapping())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, evs := range batches {
		b := idx.NewBatch()
		for _, ev := range evs {
			text := ev.Content
			for _, tag := range ev.Tags {
				if len(tag) >= 2 && tag[0] == "t" {
					text += " " + tag[1]
				}
			}
			if err := b.Index(ev.ID.Hex(), doc{Text: text, Kind: float64(ev.Kind)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := idx.Batch(b); err != nil {
			t.Fatal(err)
		}
	}
	return idx, dir, time.Since(start)
}

// words are the vocabulary words both engines find at least limit times
// (bleve's English stop list is longer than petrel's: "about", "after"...).
var words []string

func word(i int) string { return words[i%len(words)] }

// TestCompare builds the corpus with petrel's index on and off and with
// bleve, and logs the figures.
func TestCompare(t *testing.T) {
	if os.Getenv(Env) == "" {
		t.Skip("set " + Env + "=1 to compare with bleve")
	}
	ctx := context.Background()
	batches := events(t)
	off, tOff := loadPebble(t, batches, true)
	defer off.Close()
	on, tOn := loadPebble(t, batches, false)
	defer on.Close()
	idx, bdir, tBleve := loadBleve(t, batches)
	per := func(d time.Duration) string { return (d / corpus).String() }
	t.Logf("index time per event: pebble without search %s, with search %s (index cost %s); bleve %s (on top of the store's own write)",
		per(tOff), per(tOn), per(tOn-tOff), per(tBleve))

	sOff, sOn := off.Stats().SizeBytes, on.Stats().SizeBytes
	t.Logf("disk: pebble store without search %d bytes, with search %d; the index (the difference) %d bytes = %.0f B/event",
		sOff, sOn, sOn-sOff, float64(sOn-sOff)/corpus)

	// Query latency: the word of iteration i, limit 500, best first.
	for i := 0; i < len(bench.Vocabulary) && len(words) < 64; i++ {
		w := bench.Vocabulary[(i*37)%len(bench.Vocabulary)]
		q := bleve.NewMatchQuery(w)
		q.SetField("text")
		res, err := idx.Search(bleve.NewSearchRequestOptions(q, limit, 0, false))
		if err != nil {
			t.Fatal(err)
		}
		n, err := on.Count(ctx, []nostr.Filter{{Search: w}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Hits) == limit && n >= limit {
			words = append(words, w)
		}
	}
	if len(words) == 0 {
		t.Fatal("no word has enough matches")
	}
	var nOurs, nBleve int
	ours := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			it, err := on.Query(ctx, []nostr.Filter{{Search: word(i), Limit: limit, HasLimit: true}})
			if err != nil {
				b.Fatal(err)
			}
			nOurs = 0
			for it.Next() {
				nOurs++
			}
			it.Close()
		}
	})
	bleveSearch := func(i int) []string {
		q := bleve.NewMatchQuery(word(i))
		q.SetField("text")
		q.SetOperator(bsearch.MatchQueryOperatorAnd)
		req := bleve.NewSearchRequestOptions(q, limit, 0, false)
		res, err := idx.Search(req)
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]string, len(res.Hits))
		for j, h := range res.Hits {
			ids[j] = h.ID
		}
		return ids
	}
	bl := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			nBleve = len(bleveSearch(i))
		}
	})
	// bleve finds ids: a relay then reads the 500 events from its store.
	blFetch := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			hits := bleveSearch(i)
			ids := make([]nostr.ID, len(hits))
			for j, h := range hits {
				id, err := nostr.ParseID(h)
				if err != nil {
					b.Fatal(err)
				}
				ids[j] = id
			}
			it, err := off.Query(ctx, []nostr.Filter{{IDs: ids}})
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for it.Next() {
				n++
			}
			it.Close()
			if n != len(ids) {
				b.Fatalf("fetched %d of %d", n, len(ids))
			}
		}
	})
	// No index at all: read every note and keep those with the word.
	naive := testing.Benchmark(func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			w := word(i)
			it, err := off.Query(ctx, []nostr.Filter{{Kinds: []int{1}}})
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for it.Next() {
				if strings.Contains(strings.ToLower(string(it.Record().Raw)), w) {
					n++
				}
			}
			it.Close()
		}
	})
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("disk: bleve index %d bytes = %.0f B/event", dirSize(t, bdir), float64(dirSize(t, bdir))/corpus)
	ms := func(r testing.BenchmarkResult) string {
		return strconv.FormatFloat(float64(r.NsPerOp())/1e6, 'f', 2, 64) + " ms (" + strconv.Itoa(r.N) + " runs, " + strconv.FormatInt(r.AllocedBytesPerOp(), 10) + " B/op)"
	}
	t.Logf("search, limit %d (returned %d / %d): pebble index %s; bleve ids only %s; bleve + reading the events %s; naive scan of all notes %s",
		limit, nOurs, nBleve, ms(ours), ms(bl), ms(blFetch), ms(naive))
}
