package server

import (
	"compress/gzip"
	"embed"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/store"
)

// The dashboard is what GET / shows a browser (a request that accepts
// text/html): live charts of the relay's counters over the last
// seriesLen samples, under its NIP-11 identity. The page, its script and
// its style are embedded (no third-party host, works offline); the script
// polls /stats/series, which holds nothing but /stats figures (the
// series' fields are /stats paths, checked by a test), so that a proxy
// rule that keeps /stats private (a prefix match on /stats) keeps the
// dashboard's data private too.

//go:embed dashboard/app.js dashboard/app.css
var dashboardFS embed.FS

// seriesInterval is the time between two samples; seriesLen samples make
// the 15 minutes the dashboard shows.
const (
	seriesInterval = time.Second
	seriesLen      = 900
)

// seriesField is one figure of the series: its /stats path (keys joined
// with ".", an array index as a number) and how to read it from a
// document.
type seriesField struct {
	path string
	get  func(*Stats) int64
}

// seriesScale lists the fields the series holds scaled: the /stats
// value times the scale, rounded (the series carries integers, and a few
// /stats figures are seconds).
var seriesScale = map[string]int64{
	"store_background.write_stall_seconds":     msScale,
	"store_postgres.pool_acquire_wait_seconds": msScale,
}

// msScale holds a time in milliseconds (the store's write stalls, the
// waits for a PostgreSQL connection): a stall's or a wait's length is
// what an operator reads off its chart, and a second is too coarse.
const msScale = 1000

// seriesFields lists the figures the dashboard charts: integers in
// /stats (counters, gauges, bucket counts), seconds scaled to integers,
// or true and false as 1 and 0. The embedded store's background work is in it when st has
// it (only the pebble store reports it), the PostgreSQL store's pool
// and retries likewise (st is the relay's first /stats document, and the
// store does not change while the relay runs).
func seriesFields(st *Stats) []seriesField {
	fs := []seriesField{
		{"uptime_seconds", func(s *Stats) int64 { return int64(s.UptimeSeconds) }},
		{"events_accepted", func(s *Stats) int64 { return s.EventsAccepted }},
		{"events_ephemeral", func(s *Stats) int64 { return s.EventsEphemeral }},
		{"live_deliveries", func(s *Stats) int64 { return s.Deliveries }},
		{"stored_events_sent", func(s *Stats) int64 { return s.StoredSent }},
		{"connections_active", func(s *Stats) int64 { return s.ConnectionsActive }},
		{"connections_total", func(s *Stats) int64 { return s.ConnectionsTotal }},
		{"connections_rejected", func(s *Stats) int64 { return s.ConnectionsRejected }},
		{"subscriptions_active", func(s *Stats) int64 { return s.SubscriptionsActive }},
		{"verify_queue_depth", func(s *Stats) int64 { return s.VerifyQueueDepth }},
		{"verify_queue_capacity", func(s *Stats) int64 { return s.VerifyQueueCapacity }},
		{"db_size_bytes", func(s *Stats) int64 { return s.DBSizeBytes }},
		{"store_events", func(s *Stats) int64 { return s.StoreEvents }},
		{"store_commits", func(s *Stats) int64 { return s.StoreCommits }},
		// The configuration reloads: the page warns while the last one
		// was refused (a restart would fail on the file as it is).
		{"config_reloads.applied", func(s *Stats) int64 { return s.ConfigReloads.Applied }},
		{"config_reloads.refused", func(s *Stats) int64 { return s.ConfigReloads.Refused }},
		{"config_reloads.last_refused", func(s *Stats) int64 { return boolInt(s.ConfigReloads.LastRefused) }},
	}
	for _, r := range relay.ReasonNames() {
		fs = append(fs, seriesField{"events_rejected." + r, func(s *Stats) int64 { return s.EventsRejected[r] }})
	}
	lat := func(name string, pick func(*Stats) *relay.LatencySummary) {
		fs = append(fs, seriesField{name + ".count", func(s *Stats) int64 { return int64(pick(s).Count) }})
		for i := range pick(st).Bounds {
			fs = append(fs, seriesField{name + ".bucket_counts." + strconv.Itoa(i), func(s *Stats) int64 {
				if c := pick(s).Cumulative; i < len(c) {
					return int64(c[i])
				}
				return 0
			}})
		}
	}
	lat("ok_latency", func(s *Stats) *relay.LatencySummary { return &s.OKLatency })
	lat("query_latency", func(s *Stats) *relay.LatencySummary { return &s.QueryLatency })
	if st.StoreBackground != nil {
		bg := func(s *Stats) *store.Background { return s.StoreBackground }
		fs = storeField(fs, "store_background.flush_bytes", bg, func(b *store.Background) int64 { return b.FlushBytes })
		fs = storeField(fs, "store_background.compaction_bytes", bg, func(b *store.Background) int64 { return b.CompactionBytes })
		fs = storeField(fs, "store_background.compaction_debt_bytes", bg, func(b *store.Background) int64 { return b.CompactionDebtBytes })
		fs = storeField(fs, "store_background.l0_sublevels", bg, func(b *store.Background) int64 { return b.L0Sublevels })
		fs = storeField(fs, "store_background.l0_tables", bg, func(b *store.Background) int64 { return b.L0Tables })
		fs = storeField(fs, "store_background.write_stalls", bg, func(b *store.Background) int64 { return b.WriteStalls })
		fs = storeField(fs, "store_background.write_stall_seconds", bg, func(b *store.Background) int64 {
			return int64(math.Round(b.WriteStallSeconds * msScale))
		})
	}
	if st.StorePostgres != nil {
		pg := func(s *Stats) *store.Postgres { return s.StorePostgres }
		fs = storeField(fs, "store_postgres.write_retries", pg, func(p *store.Postgres) int64 { return p.WriteRetries })
		fs = storeField(fs, "store_postgres.pool_max_conns", pg, func(p *store.Postgres) int64 { return p.PoolMaxConns })
		fs = storeField(fs, "store_postgres.pool_conns", pg, func(p *store.Postgres) int64 { return p.PoolConns })
		fs = storeField(fs, "store_postgres.pool_acquired_conns", pg, func(p *store.Postgres) int64 { return p.PoolAcquiredConns })
		fs = storeField(fs, "store_postgres.pool_acquire_wait_seconds", pg, func(p *store.Postgres) int64 {
			return int64(math.Round(p.PoolAcquireWaitSeconds * msScale))
		})
	}
	if bf, ok := st.Cluster.(busFigures); ok {
		for _, k := range clusterKeys {
			if _, ok := bf.Figure(k); !ok {
				continue
			}
			fs = append(fs, seriesField{"cluster." + k, func(s *Stats) int64 {
				if bf, ok := s.Cluster.(busFigures); ok {
					v, _ := bf.Figure(k)
					return v
				}
				return 0
			}})
		}
	}
	return fs
}

// busFigures is a cluster bus's report (cluster.Stats, /stats
// "cluster") with the figures the dashboard charts, by /stats key.
type busFigures interface {
	Figure(key string) (int64, bool)
}

// clusterKeys are the bus's figures in the series (a single node has
// none): whether this node's bus connection is up, the other nodes heard
// lately, events sent to and received from them, caught up from the
// store, bus messages lost, and the errors NATS reported for this node's
// messages.
var clusterKeys = []string{"connected", "origins", "published", "received", "caught_up_events", "messages_lost", "bus_errors"}

// boolInt is a /stats true or false as the series holds it: 1 or 0.
func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// storeField appends the field at path, read by get from the block of
// a store's own figures that block picks from a document (0 when the
// document has none).
func storeField[T any](fs []seriesField, path string, block func(*Stats) *T, get func(*T) int64) []seriesField {
	return append(fs, seriesField{path, func(s *Stats) int64 {
		if b := block(s); b != nil {
			return get(b)
		}
		return 0
	}})
}

// series is the ring of samples the dashboard reads. Safe for
// concurrent use.
type series struct {
	fields []seriesField
	bounds map[string][]float64 // latency histograms' bucket bounds, by /stats key
	scale  map[string]int64     // the scaled fields' scales, by path

	mu    sync.Mutex
	times []int64   // unix milliseconds; ring, next at pos
	rows  [][]int64 // one value per field
	pos   int
	n     int
}

func newSeries(st *Stats) *series {
	fs := seriesFields(st)
	sr := &series{
		fields: fs,
		bounds: map[string][]float64{"ok_latency": st.OKLatency.Bounds, "query_latency": st.QueryLatency.Bounds},
		times:  make([]int64, seriesLen),
		rows:   make([][]int64, seriesLen),
		scale:  map[string]int64{},
	}
	for _, f := range fs {
		if k, ok := seriesScale[f.path]; ok {
			sr.scale[f.path] = k
		}
	}
	return sr
}

// add records st, taken at t.
func (sr *series) add(t time.Time, st *Stats) {
	row := make([]int64, len(sr.fields))
	for i, f := range sr.fields {
		row[i] = f.get(st)
	}
	sr.mu.Lock()
	sr.times[sr.pos], sr.rows[sr.pos] = t.UnixMilli(), row
	sr.pos = (sr.pos + 1) % seriesLen
	sr.n = min(sr.n+1, seriesLen)
	sr.mu.Unlock()
}

// seriesDoc is /stats/series: the samples after a time, as columns, each
// delta-encoded (its first value, then the differences from one sample
// to the next), which keeps the 15 minutes small.
type seriesDoc struct {
	IntervalMS int64                `json:"interval_ms"`
	Fields     []string             `json:"fields"`
	Bounds     map[string][]float64 `json:"bucket_bounds_seconds"`
	// Scale lists the fields held scaled: a value divided by its scale
	// is the /stats figure.
	Scale   map[string]int64 `json:"scale,omitempty"`
	Times   []int64          `json:"t"`
	Columns [][]int64        `json:"columns"`
}

// since returns the samples taken after unix millisecond after.
func (sr *series) since(after int64) seriesDoc {
	d := seriesDoc{IntervalMS: seriesInterval.Milliseconds(), Bounds: sr.bounds, Scale: sr.scale,
		Fields: make([]string, len(sr.fields)), Columns: make([][]int64, len(sr.fields))}
	for i, f := range sr.fields {
		d.Fields[i] = f.path
		d.Columns[i] = []int64{}
	}
	d.Times = []int64{}
	sr.mu.Lock()
	defer sr.mu.Unlock()
	var prevT int64
	var prev []int64
	for k := sr.n; k > 0; k-- {
		i := (sr.pos - k + seriesLen) % seriesLen
		if sr.times[i] <= after {
			continue
		}
		row := sr.rows[i]
		d.Times = append(d.Times, sr.times[i]-prevT)
		for j, v := range row {
			if prev != nil {
				v -= prev[j]
			}
			d.Columns[j] = append(d.Columns[j], v)
		}
		prevT, prev = sr.times[i], row
	}
	return d
}

// sample records a /stats snapshot every seriesInterval until done closes.
func (s *Server) sample(done <-chan struct{}) {
	t := time.NewTicker(seriesInterval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			st := s.statsDoc()
			s.series.add(now, &st)
		}
	}
}

func (s *Server) handleSeries(w http.ResponseWriter, r *http.Request) {
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	setCORS(w)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	writeMaybeGzip(w, r, func(out io.Writer) { _ = json.NewEncoder(out).Encode(s.series.since(after)) })
}

// writeMaybeGzip writes what body writes, gzipped if the client takes it.
func writeMaybeGzip(w http.ResponseWriter, r *http.Request, body func(io.Writer)) {
	w.Header().Add("Vary", "Accept-Encoding")
	if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		body(w)
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	body(zw)
	zw.Close()
}

// wantsHTML reports whether r accepts text/html (a browser navigating).
func wantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// dashboardCSP allows the page its own script, style and data, nothing
// else.
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func (s *Server) serveDashboard(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", dashboardCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	page := dashboardPageHTML(s.nip11Doc()) // pages.go
	writeMaybeGzip(w, r, func(out io.Writer) { out.Write(page) })
}

// handleDashboardAsset serves the page's script and style.
func (s *Server) handleDashboardAsset(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/dashboard/")
	var ctype string
	switch name {
	case "app.js":
		ctype = "text/javascript; charset=utf-8"
	case "app.css":
		ctype = "text/css; charset=utf-8"
	default:
		http.NotFound(w, r)
		return
	}
	b, err := dashboardFS.ReadFile("dashboard/" + name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("X-Content-Type-Options", "nosniff")
	// The assets change with the binary: revalidate by version.
	etag := `"` + s.version + "-" + strconv.Itoa(len(b)) + `"`
	h.Set("ETag", etag)
	h.Set("Cache-Control", "no-cache")
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	writeMaybeGzip(w, r, func(out io.Writer) { out.Write(b) })
}
