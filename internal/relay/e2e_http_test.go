package relay_test

// The HTTP side of the relay's port (NIP-11, landing page, /stats,
// /metrics) and graceful shutdown.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/pgtest"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store/pebble"
)

func TestHTTPNIP11(t *testing.T) {
	t.Parallel()
	cfg := relay.Config{MaxSubscriptions: 20, MaxFilters: 10, MaxLimit: 300, MaxSubIDLength: 32, MaxTags: 100,
		MaxMessageBytes: 50000, MaxEventBytes: 40000, CreatedAtPast: 48 * time.Hour, CreatedAtFuture: 5 * time.Minute}
	info := relay.Info{Name: "test relay", Description: "for tests", PubKey: strings.Repeat("ab", 32),
		Contact: "mailto:op@example.com", RelayCountries: []string{"DE"}}
	r := relaytest.Start(t, relaytest.Options{Relay: cfg, Info: info})

	resp, body := getHTTP(t, r, "GET", "/", map[string]string{"Accept": "application/nostr+json"})
	if resp.StatusCode != 200 {
		t.Fatalf("status %s", resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/nostr+json") {
		t.Fatalf("Content-Type %q", ct)
	}
	if v := resp.Header.Get("Access-Control-Allow-Origin"); v != "*" {
		t.Fatalf("Access-Control-Allow-Origin %q", v)
	}
	for _, h := range []string{"Access-Control-Allow-Headers", "Access-Control-Allow-Methods"} {
		if resp.Header.Get(h) == "" {
			t.Fatalf("missing %s", h)
		}
	}
	var doc struct {
		Name, Description, PubKey, Contact, Software, Version string
		SupportedNIPs                                         []int    `json:"supported_nips"`
		RelayCountries                                        []string `json:"relay_countries"`
		Limitation                                            map[string]any
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("NIP-11: %v\n%s", err, body)
	}
	if doc.Name != info.Name || doc.Description != info.Description || doc.PubKey != info.PubKey ||
		doc.Contact != info.Contact || len(doc.RelayCountries) != 1 {
		t.Fatalf("NIP-11 info fields: %+v", doc)
	}
	if doc.Software == "" || doc.Version == "" {
		t.Fatalf("software %q version %q", doc.Software, doc.Version)
	}
	nips := map[int]bool{}
	for _, n := range doc.SupportedNIPs {
		nips[n] = true
	}
	for _, n := range []int{1, 9, 11, 40} {
		if !nips[n] {
			t.Fatalf("supported_nips %v lacks %d", doc.SupportedNIPs, n)
		}
	}
	want := map[string]float64{
		"max_message_length": 50000, "max_subscriptions": 20, "max_filters": 10, "max_limit": 300,
		"default_limit": 300, "max_subid_length": 32, "max_event_tags": 100, "max_content_length": 40000,
		"created_at_lower_limit": 48 * 3600, "created_at_upper_limit": 300,
	}
	for k, v := range want {
		if got, ok := doc.Limitation[k].(float64); !ok || got != v {
			t.Fatalf("limitation.%s = %v, want %v", k, doc.Limitation[k], v)
		}
	}
	for _, k := range []string{"auth_required", "payment_required", "restricted_writes"} {
		if v, ok := doc.Limitation[k].(bool); !ok || v {
			t.Fatalf("limitation.%s = %v, want false", k, doc.Limitation[k])
		}
	}

	// Defaults: the document matches the default configuration.
	r2 := relaytest.Start(t, relaytest.Options{})
	_, body = getHTTP(t, r2, "GET", "/", map[string]string{"Accept": "application/nostr+json"})
	doc.Limitation = nil
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	def := relay.Config{}.Normalize()
	for k, v := range map[string]int{"max_message_length": def.MaxMessageBytes, "max_subscriptions": def.MaxSubscriptions,
		"max_filters": def.MaxFilters, "max_limit": def.MaxLimit, "max_subid_length": def.MaxSubIDLength,
		"max_event_tags": def.MaxTags} {
		if got := doc.Limitation[k].(float64); got != float64(v) {
			t.Fatalf("default limitation.%s = %v, want %d", k, got, v)
		}
	}
	if doc.Name == "" {
		t.Fatal("default name is empty")
	}
	if _, ok := doc.Limitation["created_at_lower_limit"]; ok {
		t.Fatal("created_at_lower_limit present without a past bound")
	}
}

func TestHTTPPreflightAndLanding(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Info: relay.Info{Name: "landing <test>"}})
	resp, _ := getHTTP(t, r, "OPTIONS", "/", map[string]string{
		"Origin": "https://client.example", "Access-Control-Request-Method": "GET",
		"Access-Control-Request-Headers": "accept"})
	if resp.StatusCode/100 != 2 {
		t.Fatalf("OPTIONS: %s", resp.Status)
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "GET") {
		t.Fatalf("OPTIONS: CORS headers %v", resp.Header)
	}

	resp, body := getHTTP(t, r, "GET", "/", nil)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("landing: %s %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	html := string(body)
	if !strings.Contains(html, "<html") || !strings.Contains(html, "landing &lt;test&gt;") || strings.Contains(html, "<test>") {
		t.Fatalf("landing page (name must be escaped):\n%s", html)
	}
	resp, _ = getHTTP(t, r, "GET", "/nope", nil)
	if resp.StatusCode != 404 {
		t.Fatalf("/nope: %s", resp.Status)
	}
	resp, _ = getHTTP(t, r, "POST", "/", nil)
	if resp.StatusCode != 405 {
		t.Fatalf("POST /: %s", resp.Status)
	}
}

func TestHTTPStatsAndMetrics(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	alice := relaytest.NewKey("stats")
	c := relaytest.Dial(t, r.URL)
	ev := alice.Note("counted")
	c.MustPublish(ev)
	c.Publish(ev) // duplicate
	c.SendRaw(`["EVENT",` + strings.Replace(string(alice.Note("x").Raw), `"sig":"`, `"sig":"0`, 1) + `]`)
	c.Read() // its answer
	c.Req("s", authorFilter(alice, ""))

	st := statsJSON(t, r)
	num := func(k string) float64 {
		t.Helper()
		v, ok := st[k].(float64)
		if !ok {
			t.Fatalf("/stats lacks number %q: %v", k, st[k])
		}
		return v
	}
	for k, min := range map[string]float64{
		"connections_active": 1, "connections_total": 1, "subscriptions_active": 1, "subscriptions_total": 1,
		"events_received": 3, "events_accepted": 1, "events_duplicate": 1, "buffers_dropped": 0, "db_errors": 0,
		"messages_in": 4, "messages_out": 4, "bytes_in": 100, "bytes_out": 100, "db_size_bytes": 1,
		"uptime_seconds": 0, "connection_slots_active": 2,
		"store_commits": 1,
	} {
		if v := num(k); v < min {
			t.Fatalf("/stats %s = %v, want >= %v", k, v, min)
		}
	}
	if num("connections_active") != 1 || num("events_accepted") != 1 || num("events_duplicate") != 1 {
		t.Fatalf("/stats: %v", st)
	}
	checkStatsKeys(t, "", st)
	// The embedded store's background work: every figure is there, and a
	// store of one event has neither flushed nor stalled.
	bg, _ := st["store_background"].(map[string]any)
	for _, k := range []string{"flushes", "flush_bytes", "compactions", "compaction_bytes", "compaction_debt_bytes",
		"l0_sublevels", "l0_tables", "write_stalls", "write_stall_seconds"} {
		if _, ok := bg[k].(float64); !ok {
			t.Fatalf("/stats store_background lacks number %q: %v", k, st["store_background"])
		}
	}
	if bg["flushes"].(float64) != 0 || bg["write_stalls"].(float64) != 0 {
		t.Fatalf("/stats store_background of a store holding one event: %v", bg)
	}
	if _, ok := st["store_postgres"]; ok {
		t.Fatalf("/stats store_postgres with the embedded store: %v", st["store_postgres"])
	}
	// The dashboard's figures: stored events, the verify queue, latency.
	if num("store_events") != 1 || num("verify_queue_depth") != 0 || num("verify_queue_capacity") != float64(relay.Config{}.Normalize().VerifyQueue) {
		t.Fatalf("/stats store_events %v, verify_queue_depth %v, verify_queue_capacity %v", st["store_events"], st["verify_queue_depth"], st["verify_queue_capacity"])
	}
	okl, _ := st["ok_latency"].(map[string]any)
	if okl["count"].(float64) < 1 || okl["p50_seconds"].(float64) <= 0 || okl["p99_seconds"].(float64) < okl["p50_seconds"].(float64) ||
		len(okl["bucket_bounds_seconds"].([]any)) != len(okl["bucket_counts"].([]any)) {
		t.Fatalf("/stats ok_latency: %v", okl)
	}
	// The committed event passed every stage once; the stages are parts
	// of its OK latency (observed from the same clock readings), so
	// their sums are within it.
	stages, _ := st["ok_stages"].(map[string]any)
	var stageSum float64
	for _, name := range relay.OKStageNames {
		sl, _ := stages[name].(map[string]any)
		if sl == nil || sl["count"].(float64) != 1 || sl["sum_seconds"].(float64) < 0 {
			t.Fatalf("/stats ok_stages.%s: %v", name, stages[name])
		}
		stageSum += sl["sum_seconds"].(float64)
	}
	if len(stages) != len(relay.OKStageNames) || stageSum <= 0 || stageSum > okl["sum_seconds"].(float64)+1e-9 {
		t.Fatalf("/stats ok_stages (sums %v) against ok_latency (sum %v): %v", stageSum, okl["sum_seconds"], stages)
	}
	rej, ok := st["events_rejected"].(map[string]any)
	if !ok || rej["invalid"].(float64) != 1 || rej["blocked"].(float64) != 0 {
		t.Fatalf("/stats events_rejected: %v", st["events_rejected"])
	}
	if v, _ := st["verifier"].(string); v == "" {
		t.Fatal("/stats verifier is empty")
	}
	if _, ok := st["limits_tripped"].(map[string]any); !ok {
		t.Fatal("/stats lacks limits_tripped")
	}
	resp, _ := getHTTP(t, r, "GET", "/stats", nil)
	if resp.Header.Get("Access-Control-Allow-Origin") != "*" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("/stats headers: %v", resp.Header)
	}

	var m string
	// The query's latency is recorded just after its EOSE is queued.
	waitFor(t, "the query latency to be recorded", func() bool {
		resp, body := getHTTP(t, r, "GET", "/metrics", nil)
		if resp.StatusCode != 200 {
			t.Fatalf("/metrics: %s", resp.Status)
		}
		m = string(body)
		return strings.Contains(m, "petrel_query_latency_seconds_count 1")
	})
	for _, name := range []string{
		"petrel_connections_active 1", "petrel_events_accepted_total 1", "petrel_events_duplicate_total 1",
		`petrel_events_rejected_total{reason="invalid"} 1`, `petrel_limits_tripped_total{limit="max_filters"} 0`,
		"petrel_subscriptions_active 1", "petrel_buffers_dropped_total 0", "petrel_db_errors_total 0",
		"petrel_received_bytes_total", "petrel_sent_bytes_total", "petrel_messages_in_total", "petrel_db_size_bytes",
		"petrel_query_queued_bytes 0", "petrel_verifier_info{verifier=", "process_start_time_seconds",
		"petrel_store_events 1", "petrel_verify_queue_depth 0", "petrel_verify_queue_capacity ",
		"petrel_store_commits_total ",
		"petrel_store_flushes_total 0", "petrel_store_flush_bytes_total 0", "petrel_store_compactions_total ",
		"petrel_store_compaction_bytes_total ", "petrel_store_compaction_debt_bytes ", "petrel_store_l0_sublevels ",
		"petrel_store_l0_tables ", "petrel_store_write_stalls_total 0", "petrel_store_write_stall_seconds_total 0",
		"petrel_store_disk_free_bytes ", "petrel_store_disk_size_bytes ",
		"petrel_ok_latency_seconds_bucket", "petrel_ok_latency_seconds_count 1",
		`petrel_ok_stage_seconds_count{stage="verify"} 1`, `petrel_ok_stage_seconds_count{stage="store"} 1`,
		`petrel_ok_stage_seconds_count{stage="dispatch"} 1`,
		"petrel_query_latency_seconds_bucket", "petrel_query_latency_seconds_count 1",
		"go_goroutines",
	} {
		if !strings.Contains(m, name) {
			t.Fatalf("/metrics lacks %q", name)
		}
	}
	// The old names (units before the end, an uptime that repeats
	// process_start_time_seconds) are gone.
	// ... and a store without write-ahead log spares (the test relay's)
	// reports none.
	for _, name := range []string{"petrel_bytes_in_total", "petrel_bytes_out_total", "petrel_query_bytes_queued", "petrel_uptime_seconds",
		"petrel_store_wal_spares"} {
		if strings.Contains(m, name) {
			t.Fatalf("/metrics still has %q", name)
		}
	}
}

// TestGracefulShutdown: on shutdown, connected clients get close 1001, and
// an EVENT in flight gets its OK if it was committed.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	for round := 0; round < 5; round++ {
		// 300 events in flight at once: above the default per-connection
		// share, which this test is not about.
		r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{MaxPendingEvents: 1024}})
		alice := relaytest.NewKey("shutdown")
		idle := relaytest.Dial(t, r.URL)
		sub := relaytest.Dial(t, r.URL)
		sub.Req("s", authorFilter(alice, ""))
		pub := relaytest.Dial(t, r.URL)
		evs := notes(alice, 300, "shutdown")
		for _, ev := range evs {
			pub.SendRaw(`["EVENT",` + string(ev.Raw) + `]`)
		}
		// Stop once the relay is busy with them.
		oks := map[string]bool{}
		for len(oks) < 5 {
			if m := pub.ExpectType("OK"); m.OK {
				oks[m.EventID.Hex()] = true
			}
		}
		r.Stop()
		for _, c := range []*relaytest.Client{idle, sub, pub} {
			if code := c.WaitClosed(relaytest.DefaultTimeout); code != relay.CloseGoingAway {
				t.Fatalf("round %d: close code %d, want %d", round, code, relay.CloseGoingAway)
			}
		}
		// Everything the client read before the close frame: every event
		// committed got its OK true; no OK true for an event not stored.
		refused := 0
		for {
			m, err := pub.ReadWithin(0)
			if err != nil {
				break
			}
			if m.Type == "OK" {
				oks[m.EventID.Hex()] = m.OK
				if !m.OK {
					if !strings.HasPrefix(m.Message, "error: ") {
						t.Fatalf("round %d: OK false %q", round, m.Message)
					}
					refused++
				}
			}
		}
		committed := 0
		for _, ev := range evs {
			has, err := r.Store.Has(context.Background(), ev.ID)
			if err != nil {
				t.Fatal(err)
			}
			ok, answered := oks[ev.ID.Hex()]
			switch {
			case has && (!answered || !ok):
				t.Fatalf("round %d: event %.12s committed but its OK is %v/%v", round, ev.ID.Hex(), answered, ok)
			case !has && ok:
				t.Fatalf("round %d: event %.12s got OK true but is not stored", round, ev.ID.Hex())
			}
			if has {
				committed++
			}
		}
		t.Logf("round %d: %d of %d events committed and answered, %d refused (shutting down)", round, committed, len(evs), refused)
	}
}

// TestIDFilterStat: the store's filter of stored ids is built after the
// first EVENT and its memory shows in /stats.
func TestIDFilterStat(t *testing.T) {
	r := relaytest.Start(t, relaytest.Options{})
	if n := statsJSON(t, r)["id_filter_bytes"]; n != 0.0 {
		t.Fatalf("id_filter_bytes %v before any EVENT", n)
	}
	c := relaytest.Dial(t, r.URL)
	c.MustPublish(relaytest.NewKey("alice").Note("first"))
	waitFor(t, "id_filter_bytes = 1 MiB", func() bool { return statsJSON(t, r)["id_filter_bytes"] == float64(1<<20) })
}

// TestWALSpareMetrics: a store with write-ahead log spares reports them
// in /metrics (and not in the public /stats): how many it keeps, how many
// are ready, how many new logs took one and how many found none.
func TestWALSpareMetrics(t *testing.T) {
	t.Parallel()
	// 1 MiB memtables: a spare of 1.1 MiB, written in a fraction of a second.
	st, err := pebble.Open(pebble.Options{Path: t.TempDir(), WALSpares: 1, MemTableSize: 1 << 20, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if st.Stats().WALSpares != 1 {
		t.Skip("the test directory is on a tmpfs: no spares")
	}
	r := relaytest.Start(t, relaytest.Options{Store: st})
	relaytest.Dial(t, r.URL).MustPublish(relaytest.NewKey("spares").Note("spare"))
	var m string
	// The keeper writes its spare after the open, at 8 MiB/s.
	waitFor(t, "a write-ahead log spare ready", func() bool {
		_, body := getHTTP(t, r, "GET", "/metrics", nil)
		m = string(body)
		return strings.Contains(m, "petrel_store_wal_spares_ready 1")
	})
	// The fresh store's first log was made before any spare existed.
	for _, line := range []string{"petrel_store_wal_spares 1\n", "petrel_store_wal_spares_used_total 0\n", "petrel_store_wal_logs_unspared_total 1\n"} {
		if !strings.Contains(m, line) {
			t.Fatalf("/metrics lacks %q:\n%s", line, m)
		}
	}
	for k := range statsJSON(t, r) {
		if strings.Contains(k, "spare") {
			t.Fatalf("/stats has %q", k)
		}
	}
}

// checkStatsKeys fails unless every key of the /stats document v (at
// path) is lower case: snake_case names, or NIP-01 prefixes such as
// "rate-limited" in the maps keyed by reason.
func checkStatsKeys(t *testing.T, path string, v any) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			for _, c := range k {
				if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
					t.Fatalf("/stats key %s.%s is not snake_case", path, k)
				}
			}
			checkStatsKeys(t, path+"."+k, e)
		}
	case []any:
		for _, e := range x {
			checkStatsKeys(t, path+"[]", e)
		}
	}
}

// TestStatsDuplicates: events_duplicate counts every "duplicate:" answer,
// the already stored (OK true) and the older replaceable versions (OK
// false), and events_rejected.duplicate the refused part of it, so the
// two never disagree.
func TestStatsDuplicates(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	alice := relaytest.NewKey("stats-dup")
	c := relaytest.Dial(t, r.URL)
	now := time.Now().Unix()
	newer, older := alice.Event(0, `{"name":"new"}`, nil, now), alice.Event(0, `{"name":"old"}`, nil, now-10)
	c.MustPublish(newer)
	if m := c.Publish(newer); !m.OK || !strings.HasPrefix(m.Message, "duplicate:") {
		t.Fatalf("again: %+v", m)
	}
	if m := c.Publish(older); m.OK || !strings.HasPrefix(m.Message, "duplicate:") {
		t.Fatalf("older: %+v", m)
	}
	st := statsJSON(t, r)
	rej := st["events_rejected"].(map[string]any)
	if st["events_duplicate"] != float64(2) || rej["duplicate"] != float64(1) || st["events_accepted"] != float64(1) {
		t.Fatalf("events_duplicate %v, events_rejected.duplicate %v, events_accepted %v; want 2, 1, 1",
			st["events_duplicate"], rej["duplicate"], st["events_accepted"])
	}
}

// TestHTTPStatsPostgres: a relay on PostgreSQL reports its write
// transactions and its connection pool in /stats and /metrics, and no
// embedded store's background work.
func TestHTTPStatsPostgres(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Store: pgtest.Open(t)})
	alice := relaytest.NewKey("stats postgres")
	c := relaytest.Dial(t, r.URL)
	for i := range 3 {
		c.MustPublish(alice.Note(fmt.Sprint("counted ", i)))
	}
	if evs := c.Req("s", authorFilter(alice, "")); len(evs) != 3 {
		t.Fatalf("REQ: %d events, want 3", len(evs))
	}

	st := statsJSON(t, r)
	checkStatsKeys(t, "", st)
	if _, ok := st["store_background"]; ok || st["store_backend"] != "postgres" {
		t.Fatalf("/stats store_backend %v, store_background %v", st["store_backend"], st["store_background"])
	}
	if v, _ := st["store_commits"].(float64); v != 3 {
		t.Fatalf("/stats store_commits %v for 3 events published one after another", st["store_commits"])
	}
	pg, _ := st["store_postgres"].(map[string]any)
	for k, want := range map[string]float64{"pool_max_conns": 8, "write_retries": 0, "commits_in_doubt_committed": 0,
		"late_committed_events": 0, "pool_acquires_canceled": 0} {
		if v, ok := pg[k].(float64); !ok || v != want {
			t.Fatalf("/stats store_postgres.%s = %v, want %v: %v", k, pg[k], want, pg)
		}
	}
	for _, k := range []string{"pool_conns", "pool_acquires", "pool_acquire_waits", "pool_acquire_wait_seconds", "pool_conns_opened"} {
		if v, ok := pg[k].(float64); !ok || v <= 0 {
			t.Fatalf("/stats store_postgres.%s = %v, want > 0: %v", k, pg[k], pg)
		}
	}
	for _, k := range []string{"pool_acquired_conns", "pool_idle_conns"} {
		if _, ok := pg[k].(float64); !ok {
			t.Fatalf("/stats store_postgres lacks number %q: %v", k, pg)
		}
	}

	_, body := getHTTP(t, r, "GET", "/metrics", nil)
	m := string(body)
	for _, name := range []string{
		"petrel_store_commits_total ", "petrel_store_write_retries_total 0",
		"petrel_store_commits_in_doubt_committed_total 0", "petrel_store_late_committed_events_total 0",
		"petrel_store_pool_max_conns 8", "petrel_store_pool_conns ", "petrel_store_pool_acquired_conns ",
		"petrel_store_pool_idle_conns ", "petrel_store_pool_acquires_total ", "petrel_store_pool_acquire_waits_total ",
		"petrel_store_pool_acquire_wait_seconds_total ", "petrel_store_pool_acquires_canceled_total 0",
		"petrel_store_pool_conns_opened_total ",
	} {
		if !strings.Contains(m, name) {
			t.Fatalf("/metrics lacks %q", name)
		}
	}
	if strings.Contains(m, "petrel_store_flushes_total") {
		t.Fatal("/metrics has the embedded store's flushes with PostgreSQL")
	}
}
