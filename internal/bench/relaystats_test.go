package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRelayCommits: the commit count is read from a petrel relay's
// /stats (the embedded store's commits, PostgreSQL's write
// transactions), not from another relay (no such field) or a /stats
// that is not there.
func TestRelayCommits(t *testing.T) {
	for _, c := range []struct {
		name, body string
		status     int
		want       int64
		ok         bool
	}{
		{"pebble", `{"store_backend":"pebble","store_commits":42}`, 200, 42, true},
		{"postgres", `{"store_backend":"postgres","store_commits":7}`, 200, 7, true},
		{"another relay", `{"store_backend":"pebble"}`, 200, 0, false},
		{"no /stats", `not found`, 404, 0, false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/stats" {
				t.Errorf("%s: asked for %s", c.name, r.URL.Path)
			}
			w.WriteHeader(c.status)
			w.Write([]byte(c.body))
		}))
		f, _ := readRelayStats(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http")+"/relay?x=1")
		srv.Close()
		if got, ok := f.commits, f.haveCommits; got != c.want || ok != c.ok {
			t.Errorf("%s: %d, %v; want %d, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// TestRelayOKHistogram: a ladder reads the relay's OK histogram from
// /stats, and bounds a step's relay-side p99 by the bucket that holds
// the step's 99th percentile: at 99% within a bucket, that bucket; one
// OK fewer, the next; past the last bound, "above"; nothing when no OK
// was recorded or the bounds differ.
func TestRelayOKHistogram(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"store_backend":"postgres","ok_latency":{"count":7,"bucket_bounds_seconds":[0.001,0.002],"bucket_counts":[3,5]}}`))
	}))
	f, ok := readRelayStats(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"))
	srv.Close()
	if !ok || f.haveCommits || !f.haveOK || f.okCount != 7 || len(f.okBounds) != 2 || f.okBuckets[1] != 5 {
		t.Fatalf("read %+v, %v", f, ok)
	}

	bounds := []float64{0.001, 0.002, 0.004}
	fig := func(count uint64, buckets ...uint64) relayFigures {
		return relayFigures{okBounds: bounds, okBuckets: buckets, okCount: count, haveOK: true}
	}
	before := fig(1000, 400, 900, 1000) // what earlier steps left
	for _, c := range []struct {
		name      string
		after     relayFigures
		ms        float64
		above, ok bool
	}{
		{"99 of 100 within 2 ms", fig(1100, 450, 999, 1100), 2, false, true},
		{"98 of 100 within 2 ms", fig(1100, 450, 998, 1100), 4, false, true},
		{"all within 1 ms", fig(1100, 500, 1000, 1100), 1, false, true},
		{"2 of 100 past 4 ms", fig(1100, 450, 990, 1098), 4, true, true},
		{"no OK", fig(1000, 400, 900, 1000), 0, false, false},
		{"other bounds", relayFigures{okBounds: []float64{0.001, 0.003, 0.004}, okBuckets: []uint64{450, 999, 1100}, okCount: 1100, haveOK: true}, 0, false, false},
		{"no histogram", relayFigures{}, 0, false, false},
	} {
		ms, above, ok := okP99Bound(before, c.after)
		if ms != c.ms || above != c.above || ok != c.ok {
			t.Errorf("%s: %v ms, above %v, ok %v; want %v, %v, %v", c.name, ms, above, ok, c.ms, c.above, c.ok)
		}
	}
}

// TestRelayStoreBackground: a ladder reads a petrel relay's store
// background figures from /stats (only with the embedded store) and
// gives a step the difference between two readings, with level 0's
// depth as of the second.
func TestRelayStoreBackground(t *testing.T) {
	read := func(body string) relayFigures {
		t.Helper()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(body)) }))
		defer srv.Close()
		f, ok := readRelayStats(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"))
		if !ok {
			t.Fatalf("/stats %s not read", body)
		}
		return f
	}
	before := read(`{"store_backend":"pebble","store_background":{"flushes":3,"compactions":10,"compaction_bytes":5000000,"l0_sublevels":2,"write_stalls":1,"write_stall_seconds":0.5}}`)
	after := read(`{"store_backend":"pebble","store_background":{"flushes":5,"compactions":17,"compaction_bytes":47000000,"l0_sublevels":6,"write_stalls":2,"write_stall_seconds":0.5416}}`)
	got := stepStore(before, after)
	want := StepStore{Flushes: 2, Compactions: 7, CompactionMB: 42, WriteStalls: 1, L0Sublevels: 6}
	if got == nil {
		t.Fatal("no step figures from two readings")
	}
	if ms := got.WriteStallMs; ms < 41.5 || ms > 41.7 {
		t.Fatalf("stall time %v ms, want 41.6", ms)
	}
	got.WriteStallMs = 0
	if *got != want {
		t.Fatalf("step figures %+v, want %+v", *got, want)
	}
	pg := read(`{"store_backend":"postgres"}`)
	if pg.haveBG || stepStore(before, pg) != nil || stepStore(pg, after) != nil {
		t.Fatalf("figures for a relay without the embedded store: %+v", pg)
	}
}
