package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/petrel-relay/petrel/internal/store"
)

// relayFigures is what a ladder reads from a petrel relay's /stats
// between steps.
type relayFigures struct {
	// commits is store_commits, the store's synced group commits (with
	// PostgreSQL, its write transactions; haveCommits: a petrel relay).
	commits     int64
	haveCommits bool
	// okBounds, okBuckets and okCount are ok_latency's histogram: bucket
	// bounds in seconds, the cumulative count at each bound, and the
	// count of all (the +Inf bucket). haveOK: the relay reports it.
	okBounds  []float64
	okBuckets []uint64
	okCount   uint64
	haveOK    bool
	// bg is store_background, the embedded store's flushes, compactions
	// and write stalls (haveBG: a petrel relay with the embedded store).
	bg     store.Background
	haveBG bool
}

// readRelayStats reads a petrel relay's /stats (on the WebSocket URL's
// host): its commit count, so a ladder step can say how many events
// shared each commit's fsync, and its store's flushes, compactions and
// stalls (both only with the embedded store), and its OK histogram.
// False for a /stats that cannot be read; a relay that is not petrel
// gives figures with none of these.
func readRelayStats(ctx context.Context, wsURL string) (relayFigures, bool) {
	var f relayFigures
	u, err := url.Parse(wsURL)
	if err != nil {
		return f, false
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	default:
		return f, false
	}
	u.Path, u.RawQuery, u.Fragment = "/stats", "", ""
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return f, false
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return f, false
	}
	defer res.Body.Close()
	var st struct {
		Backend string `json:"store_backend"`
		Commits *int64 `json:"store_commits"`
		OK      *struct {
			Count   uint64    `json:"count"`
			Bounds  []float64 `json:"bucket_bounds_seconds"`
			Buckets []uint64  `json:"bucket_counts"`
		} `json:"ok_latency"`
		Background *store.Background `json:"store_background"`
	}
	if res.StatusCode != http.StatusOK || json.NewDecoder(res.Body).Decode(&st) != nil {
		return f, false
	}
	if st.Commits != nil && st.Backend != "" {
		f.commits, f.haveCommits = *st.Commits, true
	}
	if st.Background != nil && st.Backend == "pebble" {
		f.bg, f.haveBG = *st.Background, true
	}
	if ok := st.OK; ok != nil && len(ok.Bounds) > 0 && len(ok.Bounds) == len(ok.Buckets) {
		f.okBounds, f.okBuckets, f.okCount, f.haveOK = ok.Bounds, ok.Buckets, ok.Count, true
	}
	return f, true
}

// okP99Bound returns the upper bound, in milliseconds, of the relay's
// OK-latency bucket that holds the 99th percentile of the OKs recorded
// between two readings (above: past the last bound). The buckets double
// (..., 6.4, 12.8, 25.6 ms, ...), so this bounds the relay's own p99 (its
// clock runs from the EVENT's parse to its OK queued), it does not
// measure it. False when either reading lacks the histogram, the two
// differ in bounds, or no OK was recorded between them.
func okP99Bound(before, after relayFigures) (ms float64, above, ok bool) {
	if !before.haveOK || !after.haveOK || len(before.okBounds) != len(after.okBounds) || after.okCount <= before.okCount {
		return 0, false, false
	}
	for i := range after.okBounds {
		if before.okBounds[i] != after.okBounds[i] {
			return 0, false, false
		}
	}
	total := after.okCount - before.okCount
	// The smallest bucket whose cumulative count reaches 99% of them.
	need := uint64(NearestRank(99, int(total)))
	for i, b := range after.okBounds {
		if after.okBuckets[i]-before.okBuckets[i] >= need {
			return b * 1e3, false, true
		}
	}
	return after.okBounds[len(after.okBounds)-1] * 1e3, true, true
}

// stepStore is the store's background work between two readings; nil
// when either lacks it.
func stepStore(before, after relayFigures) *StepStore {
	if !before.haveBG || !after.haveBG {
		return nil
	}
	b, a := before.bg, after.bg
	return &StepStore{
		Flushes:      a.Flushes - b.Flushes,
		Compactions:  a.Compactions - b.Compactions,
		CompactionMB: float64(a.CompactionBytes-b.CompactionBytes) / 1e6,
		WriteStalls:  a.WriteStalls - b.WriteStalls,
		WriteStallMs: (a.WriteStallSeconds - b.WriteStallSeconds) * 1e3,
		L0Sublevels:  a.L0Sublevels,
	}
}
