package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/pgtest"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store"
)

// get fetches path from r with the given headers, without keep-alive (an
// idle connection would hold a slot).
func get(t testing.TB, r *relaytest.Relay, path string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", r.HTTPURL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	cl := &http.Client{Timeout: relaytest.DefaultTimeout, Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true}}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// TestRootNegotiation: GET / gives a browser (Accept: text/html) the
// dashboard, a NIP-11 client the relay information document, and any
// other client the plain landing page it got before the dashboard.
func TestRootNegotiation(t *testing.T) {
	r := relaytest.Start(t, relaytest.Options{Info: relay.Info{Name: "dash <relay>", Description: "for the tests"}})
	browser := "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8" // Chromium's and Firefox's navigation Accept

	resp, body := get(t, r, "/", "Accept", browser)
	page := string(body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(page, `id="dash"`) || !strings.Contains(page, `src="/dashboard/app.js"`) {
		t.Fatalf("browser GET /: %s %v\n%s", resp.Status, resp.Header, page)
	}
	if !strings.Contains(page, "<h1>dash &lt;relay&gt;</h1>") || !strings.Contains(page, "for the tests") {
		t.Fatalf("dashboard lacks the escaped NIP-11 name or description:\n%s", page)
	}
	for _, n := range r.Relay.SupportedNIPs() {
		if !strings.Contains(page, fmt.Sprintf(`>%02d</a>`, n)) {
			t.Fatalf("dashboard lacks NIP %d:\n%s", n, page)
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") {
		t.Fatalf("dashboard CSP %q", csp)
	}

	resp, body = get(t, r, "/", "Accept", "application/nostr+json")
	var doc map[string]any
	if resp.Header.Get("Content-Type") != "application/nostr+json" || json.Unmarshal(body, &doc) != nil || doc["name"] != "dash <relay>" {
		t.Fatalf("NIP-11 GET /: %v %s", resp.Header, body)
	}
	// A browser's fetch of NIP-11 (both types accepted) still gets NIP-11.
	resp, _ = get(t, r, "/", "Accept", "application/nostr+json, text/html")
	if resp.Header.Get("Content-Type") != "application/nostr+json" {
		t.Fatalf("NIP-11 with text/html too: %v", resp.Header)
	}
	for _, accept := range []string{"", "*/*"} {
		resp, body = get(t, r, "/", "Accept", accept)
		if resp.StatusCode != 200 || !strings.Contains(string(body), "request this page with") || strings.Contains(string(body), `id="dash"`) {
			t.Fatalf("plain GET / (Accept %q): %s\n%s", accept, resp.Status, body)
		}
	}

	// The assets: served, typed, gzipped for a browser, 404 for others.
	for path, ctype := range map[string]string{"/dashboard/app.js": "text/javascript", "/dashboard/app.css": "text/css"} {
		resp, body := get(t, r, path)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) || len(body) == 0 {
			t.Fatalf("GET %s: %s %v", path, resp.Status, resp.Header)
		}
		resp, _ = get(t, r, path, "Accept-Encoding", "gzip")
		if resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("GET %s with gzip: %v", path, resp.Header)
		}
		resp, _ = get(t, r, path, "If-None-Match", resp.Header.Get("ETag"))
		if resp.StatusCode != http.StatusNotModified {
			t.Fatalf("GET %s revalidated: %s", path, resp.Status)
		}
	}
	if resp, _ := get(t, r, "/dashboard/index.html"); resp.StatusCode != 404 {
		t.Fatalf("GET /dashboard/index.html: %s", resp.Status)
	}
}

// seriesDoc is /stats/series, decoded.
type seriesDoc struct {
	IntervalMS int64                `json:"interval_ms"`
	Fields     []string             `json:"fields"`
	Bounds     map[string][]float64 `json:"bucket_bounds_seconds"`
	Scale      map[string]int64     `json:"scale"`
	Times      []int64              `json:"t"`
	Columns    [][]int64            `json:"columns"`
}

// last returns the doc's last sample, undoing the delta encoding.
func (d seriesDoc) last() (int64, map[string]int64) {
	var t int64
	for _, v := range d.Times {
		t += v
	}
	m := make(map[string]int64, len(d.Fields))
	for i, f := range d.Fields {
		var v int64
		for _, x := range d.Columns[i] {
			v += x
		}
		m[f] = v
	}
	return t, m
}

func getSeries(t testing.TB, r *relaytest.Relay, after int64) seriesDoc {
	t.Helper()
	resp, body := get(t, r, "/stats/series?after="+strconv.FormatInt(after, 10))
	if resp.StatusCode != 200 {
		t.Fatalf("/stats/series: %s", resp.Status)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	for k := range raw {
		switch k {
		case "interval_ms", "fields", "bucket_bounds_seconds", "scale", "t", "columns":
		default:
			t.Fatalf("/stats/series has %q, not described by the test", k)
		}
	}
	var d seriesDoc
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Columns) != len(d.Fields) {
		t.Fatalf("%d columns for %d fields", len(d.Columns), len(d.Fields))
	}
	for i, c := range d.Columns {
		if len(c) != len(d.Times) {
			t.Fatalf("column %s has %d values for %d samples", d.Fields[i], len(c), len(d.Times))
		}
	}
	return d
}

// awaitSample polls /stats/series until its last sample satisfies ok
// (what says what it waits for), and returns the feed and that sample.
func awaitSample(t testing.TB, r *relaytest.Relay, what string, ok func(last map[string]int64) bool) (seriesDoc, map[string]int64) {
	t.Helper()
	deadline := time.Now().Add(relaytest.DefaultTimeout)
	for {
		d := getSeries(t, r, 0)
		if _, last := d.last(); ok(last) {
			return d, last
		} else if time.Now().After(deadline) {
			t.Fatalf("no sample with %s: %v", what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lookup resolves a dotted /stats path ("events_rejected.invalid",
// "ok_latency.bucket_counts.3") in a decoded /stats document.
func lookup(doc any, path string) (any, bool) {
	for _, k := range strings.Split(path, ".") {
		switch v := doc.(type) {
		case map[string]any:
			x, ok := v[k]
			if !ok {
				return nil, false
			}
			doc = x
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			doc = v[i]
		default:
			return nil, false
		}
	}
	return doc, true
}

// TestSeriesOnlyStats: the dashboard's feed exposes nothing /stats does
// not: every field is a /stats path holding a number (or a boolean,
// held as 1 or 0), its latest sample
// equals /stats once the relay is quiet, and the bucket bounds are
// /stats's. The page itself carries only NIP-11's fields.
func TestSeriesOnlyStats(t *testing.T) {
	r := relaytest.Start(t, relaytest.Options{})
	c := relaytest.Dial(t, r.URL)
	sub := relaytest.Dial(t, r.URL)
	sub.Req("all", `{}`)
	alice := relaytest.NewKey("series")
	const n = 20
	for i := range n {
		c.MustPublish(alice.Note(fmt.Sprint("series ", i)))
	}
	c.SendRaw(`["EVENT",` + strings.Replace(string(alice.Note("bad").Raw), `"sig":"`, `"sig":"0`, 1) + `]`)
	c.ExpectType("OK")
	for range n {
		sub.ExpectType("EVENT")
	}
	// Two reloads, the last refused (the series holds the boolean).
	r.Server.NoteReload(true)
	r.Server.NoteReload(false)
	// Wait for a sample that saw all of it.
	d, last := awaitSample(t, r, "the events", func(last map[string]int64) bool {
		return last["store_events"] == n && last["events_rejected.invalid"] == 1 && last["live_deliveries"] == n &&
			last["config_reloads.last_refused"] == 1
	})
	_, body := get(t, r, "/stats")
	var st map[string]any
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	if d.IntervalMS != 1000 || len(d.Times) < 1 {
		t.Fatalf("interval %d ms, %d samples", d.IntervalMS, len(d.Times))
	}
	for _, f := range d.Fields {
		v, ok := lookup(st, f)
		if !ok {
			t.Fatalf("series field %q is not in /stats", f)
		}
		x, ok := v.(float64)
		if b, isBool := v.(bool); isBool { // held as 1 or 0
			x, ok = 0, true
			if b {
				x = 1
			}
		}
		if !ok {
			t.Fatalf("series field %q is %T in /stats, not a number or a boolean", f, v)
		}
		switch f {
		case "uptime_seconds", "db_size_bytes": // move by themselves
			if float64(last[f]) > x {
				t.Fatalf("series %s = %d, past /stats's %v", f, last[f], x)
			}
		default:
			if k := d.Scale[f]; k != 0 {
				// Held scaled: rounded to 1/k of the /stats unit.
				if got := float64(last[f]) / float64(k); math.Abs(got-x) > 0.5/float64(k) {
					t.Fatalf("series %s = %d / %d, /stats %v", f, last[f], k, x)
				}
			} else if float64(last[f]) != x {
				t.Fatalf("series %s = %d, /stats %v", f, last[f], x)
			}
		}
	}
	// The embedded store's background work is in it, the stall time
	// held in milliseconds.
	for _, f := range []string{"store_background.flush_bytes", "store_background.l0_sublevels", "store_background.write_stall_seconds"} {
		if _, ok := last[f]; !ok {
			t.Fatalf("series has no %s: %v", f, d.Fields)
		}
	}
	if k := d.Scale["store_background.write_stall_seconds"]; k != 1000 || len(d.Scale) != 1 {
		t.Fatalf("series scales %v, want the stall time's 1000", d.Scale)
	}
	for h, b := range d.Bounds {
		sb, ok := lookup(st, h+".bucket_bounds_seconds")
		if !ok || fmt.Sprint(sb) != fmt.Sprint(toAny(b)) {
			t.Fatalf("series bounds of %s %v, /stats %v", h, b, sb)
		}
	}
	// Incremental: nothing after the last sample's time, then new ones.
	lt, _ := d.last()
	if d2 := getSeries(t, r, lt); len(d2.Times) > 1 {
		t.Fatalf("after=%d: %d samples, want at most the one taken since", lt, len(d2.Times))
	}
}

func toAny(b []float64) []any {
	out := make([]any, len(b))
	for i, v := range b {
		out[i] = v
	}
	return out
}

// noBackground is a store that reports no background work, as the
// PostgreSQL store does.
type noBackground struct{ store.Store }

func (s noBackground) Stats() store.Stats {
	st := s.Store.Stats()
	st.Background = nil
	return st
}

// startWithoutBackground starts a relay over a pebble store that hides
// its background work.
func startWithoutBackground(t *testing.T) *relaytest.Relay {
	t.Helper()
	st, err := relaytest.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return relaytest.Start(t, relaytest.Options{Store: noBackground{st}})
}

// TestSeriesWithoutStoreBackground: with a store that has no background
// work to report, neither /stats nor the series names any, and nothing
// is held scaled.
func TestSeriesWithoutStoreBackground(t *testing.T) {
	r := startWithoutBackground(t)
	_, body := get(t, r, "/stats")
	if strings.Contains(string(body), "store_background") {
		t.Fatalf("/stats names store_background: %s", body)
	}
	d := getSeries(t, r, 0)
	for _, f := range d.Fields {
		if strings.HasPrefix(f, "store_background.") {
			t.Fatalf("series field %s without the embedded store's figures", f)
		}
	}
	if len(d.Scale) != 0 {
		t.Fatalf("series scales %v with no scaled field", d.Scale)
	}
	if len(d.Fields) == 0 {
		t.Fatal("series has no fields")
	}
}

// startPostgres starts a relay on PostgreSQL (pgtest.Open).
func startPostgres(t *testing.T) *relaytest.Relay {
	t.Helper()
	return relaytest.Start(t, relaytest.Options{Store: pgtest.Open(t)})
}

// TestSeriesPostgres: on PostgreSQL the series holds the store's pool
// and write figures (the wait time in milliseconds), each equal to
// /stats once the relay is quiet, and none of the embedded store's.
func TestSeriesPostgres(t *testing.T) {
	r := startPostgres(t)
	c := relaytest.Dial(t, r.URL)
	alice := relaytest.NewKey("series postgres")
	for i := range 3 {
		c.MustPublish(alice.Note(fmt.Sprint("counted ", i)))
	}
	d, last := awaitSample(t, r, "the 3 commits", func(last map[string]int64) bool { return last["store_commits"] == 3 })
	_, body := get(t, r, "/stats")
	var st map[string]any
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	// Every field is a /stats figure. The ones that hold still once the
	// relay is quiet equal it; the pool's gauges and its wait move with
	// the store's own background queries (the size refresh), so they
	// are only looked up.
	for _, f := range []string{"store_postgres.pool_conns", "store_postgres.pool_acquired_conns", "store_postgres.pool_acquire_wait_seconds"} {
		if _, ok := lookup(st, f); !ok {
			t.Fatalf("series field %s is not in /stats", f)
		}
		if _, ok := last[f]; !ok {
			t.Fatalf("series lacks %s", f)
		}
	}
	for _, f := range []string{"store_postgres.pool_max_conns", "store_postgres.write_retries", "store_commits"} {
		v, ok := lookup(st, f)
		if x, _ := v.(float64); !ok || float64(last[f]) != x {
			t.Fatalf("series %s = %d, /stats %v", f, last[f], v)
		}
	}
	if last["store_postgres.pool_max_conns"] != 8 {
		t.Fatalf("series pool_max_conns %d, want the default 8", last["store_postgres.pool_max_conns"])
	}
	for _, f := range d.Fields {
		if strings.HasPrefix(f, "store_background.") {
			t.Fatalf("series field %s on PostgreSQL", f)
		}
	}
	if k := d.Scale["store_postgres.pool_acquire_wait_seconds"]; k != 1000 || len(d.Scale) != 1 {
		t.Fatalf("series scales %v, want the wait time's 1000", d.Scale)
	}
}
