package server

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/store"
)

// TestDashboardFirstLoadSize: the page, its script and style and a full
// 15 minutes of samples of a busy relay (every counter moving every
// second) come to less than 150 KB transferred, as a browser gets them
// (gzipped).
func TestDashboardFirstLoadSize(t *testing.T) {
	gz := func(b []byte) int {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		zw.Write(b)
		zw.Close()
		return buf.Len()
	}
	bounds := make([]float64, 16)
	for i := range bounds {
		bounds[i] = 0.0001 * float64(int(1)<<i)
	}
	st := Stats{Snapshot: relay.Snapshot{
		EventsRejected: map[string]int64{},
		OKLatency:      relay.LatencySummary{Bounds: bounds, Cumulative: make([]uint64, 16)},
		QueryLatency:   relay.LatencySummary{Bounds: bounds, Cumulative: make([]uint64, 16)},
		// The embedded store's background work (the default store).
		StoreBackground: &store.Background{},
	}}
	sr := newSeries(&st)
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Unix(1_700_000_000, 0)
	for i := range seriesLen {
		s := &st.Snapshot
		s.UptimeSeconds = float64(3600 + i)
		s.EventsAccepted += 2000 + rng.Int64N(1000)
		s.EventsEphemeral += rng.Int64N(100)
		s.Deliveries += 50_000 + rng.Int64N(20_000)
		s.StoredSent += 10_000 + rng.Int64N(5000)
		s.ConnectionsActive = 20_000 + rng.Int64N(500)
		s.SubscriptionsActive = 150_000 + rng.Int64N(5000)
		s.VerifyQueueDepth, s.VerifyQueueCapacity = rng.Int64N(512), 512
		s.DBSizeBytes += 1_000_000 + rng.Int64N(100_000)
		s.StoreEvents = 50_000_000 + int64(i)*2500
		for _, r := range relay.ReasonNames() {
			s.EventsRejected[r] += rng.Int64N(50)
		}
		for _, l := range []*relay.LatencySummary{&s.OKLatency, &s.QueryLatency} {
			var c uint64
			for k := range l.Cumulative {
				c += uint64(rng.Int64N(300))
				l.Cumulative[k] += c
			}
			l.Count = l.Cumulative[15] + uint64(rng.Int64N(3))
		}
		// A flush of 64 MiB every half minute or so, compactions
		// writing 1.5 times that, now and then a stall.
		bg := s.StoreBackground
		if rng.Int64N(30) == 0 {
			bg.Flushes++
			bg.FlushBytes += 60<<20 + rng.Int64N(8<<20)
			bg.L0Tables += 30
			bg.L0Sublevels++
		}
		if rng.Int64N(20) == 0 {
			bg.Compactions++
			bg.CompactionBytes += 90<<20 + rng.Int64N(30<<20)
			bg.L0Tables, bg.L0Sublevels = rng.Int64N(4), rng.Int64N(2)
		}
		bg.CompactionDebtBytes = 200<<20 + rng.Int64N(100<<20)
		if rng.Int64N(300) == 0 {
			bg.WriteStalls++
			bg.WriteStallSeconds += rng.Float64() / 2
		}
		sr.add(t0.Add(time.Duration(i)*time.Second), &st)
	}
	feed, err := json.Marshal(sr.since(0))
	if err != nil {
		t.Fatal(err)
	}
	var doc seriesDoc
	json.Unmarshal(feed, &doc)
	if len(doc.Times) != seriesLen {
		t.Fatalf("%d samples, want %d", len(doc.Times), seriesLen)
	}
	// The page, with a NIP-11 identity as long as the fields go in
	// practice and every NIP petrel serves.
	page := dashboardPageHTML(nip11{
		Name: "relay.example.com", Description: "A public relay for the tests: " + strings.Repeat("words ", 40),
		Contact: "mailto:ops@example.com", PubKey: strings.Repeat("ab", 32),
		SupportedNIPs: []int{1, 9, 11, 13, 17, 40, 42, 45, 50, 59, 62, 70, 77, 86}, Version: "v1.0.0",
	})
	total := gz(feed) + gz(page)
	for _, f := range []string{"dashboard/app.js", "dashboard/app.css"} {
		b, err := dashboardFS.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		total += gz(b)
	}
	t.Logf("first load: %d bytes gzipped (the series alone %d bytes raw)", total, len(feed))
	if total >= 150_000 {
		t.Fatalf("first load transfers %d bytes, want < 150 KB", total)
	}
}

// TestSeriesScaled: the series holds each time /stats gives in seconds
// in whole milliseconds (seriesScale), rounded, and only those scaled.
func TestSeriesScaled(t *testing.T) {
	st := Stats{Snapshot: relay.Snapshot{
		StoreBackground: &store.Background{WriteStalls: 2, WriteStallSeconds: 0.0416},
		StorePostgres:   &store.Postgres{PoolMaxConns: 8, PoolAcquireWaitSeconds: 1.2344},
	}}
	want := map[string]int64{
		"store_background.write_stall_seconds":     42,
		"store_background.write_stalls":            2,
		"store_postgres.pool_acquire_wait_seconds": 1234,
		"store_postgres.pool_max_conns":            8,
	}
	sr := newSeries(&st)
	for _, f := range sr.fields {
		if w, ok := want[f.path]; ok {
			if got := f.get(&st); got != w {
				t.Errorf("%s = %d, want %d", f.path, got, w)
			}
			delete(want, f.path)
		}
	}
	if len(want) != 0 {
		t.Fatalf("series lacks %v", want)
	}
	if len(sr.scale) != 2 || sr.scale["store_background.write_stall_seconds"] != 1000 || sr.scale["store_postgres.pool_acquire_wait_seconds"] != 1000 {
		t.Fatalf("scales %v", sr.scale)
	}
}
