package server_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/cluster"
	"github.com/petrel-relay/petrel/internal/pgtest"
	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/server"
	"github.com/petrel-relay/petrel/internal/store/pebble"
)

// chromium finds Debian's chromium (scripts/setup.sh installs it) or
// another Chromium-family browser, or skips the test saying so.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PETREL_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium found (scripts/setup.sh installs Debian's chromium; PETREL_CHROMIUM names another): the dashboard's browser test did not run")
	return ""
}

// browserProfile returns a fresh directory for one chromium run's
// --user-data-dir, removed when the test ends. Chromium's helper
// processes can outlive the browser process by a moment and still write
// there, so the removal is retried for a few seconds where t.TempDir's
// cleanup fails the test at the first "directory not empty".
func browserProfile(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "petrel-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			err := os.RemoveAll(dir)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("chromium's profile still in use 10 s after the test: %v", err)
				return
			}
		}
	})
	return dir
}

// runChromium runs headless chromium with args on url and returns its
// standard output. The virtual time budget lets the page's script run
// (its timers advance in virtual time; its fetches are real).
func runChromium(t *testing.T, bin, url string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--disable-extensions", "--disable-background-networking", "--hide-scrollbars",
		"--user-data-dir=" + browserProfile(t), "--virtual-time-budget=4000",
	}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, url)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, errb.Bytes())
	}
	return out.Bytes()
}

// attr returns the value of attribute name in the first tag of dom
// matching the tag regexp (an element with that id).
func attr(t *testing.T, dom, tagRE, name string) string {
	t.Helper()
	tag := regexp.MustCompile(tagRE).FindString(dom)
	if tag == "" {
		t.Fatalf("no element %s in the page", tagRE)
	}
	m := regexp.MustCompile(`\s` + regexp.QuoteMeta(name) + `="([^"]*)"`).FindStringSubmatch(tag)
	if m == nil {
		t.Fatalf("%s has no %s: %s", tagRE, name, tag)
	}
	return m[1]
}

// isHidden reports whether the first tag of dom matching tagRE has the
// hidden attribute.
func isHidden(t *testing.T, dom, tagRE string) bool {
	t.Helper()
	tag := regexp.MustCompile(tagRE).FindString(dom)
	if tag == "" {
		t.Fatalf("no element %s in the page", tagRE)
	}
	return regexp.MustCompile(`\shidden[\s=>]`).MatchString(tag)
}

func attrNum(t *testing.T, dom, tagRE, name string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(attr(t, dom, tagRE, name), 64)
	if err != nil {
		t.Fatalf("%s %s: %v", tagRE, name, err)
	}
	return v
}

// TestDashboardInBrowser loads the dashboard in headless Chromium against
// a running relay after a burst of events, and checks from the page's
// DOM that each chart drew non-zero data; it saves screenshots (desktop
// and phone widths) and prints where.
func TestDashboardInBrowser(t *testing.T) {
	bin := chromium(t)
	// Memtables of 64 KiB: the burst's events fill a few, so the store
	// flushes and the store charts have something to draw.
	st, err := pebble.Open(pebble.Options{Path: t.TempDir(), MemTableSize: 64 << 10,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := relaytest.Start(t, relaytest.Options{Store: st})
	sub := relaytest.Dial(t, r.URL)
	sub.Req("all", `{}`)
	c := relaytest.Dial(t, r.URL)
	alice := relaytest.NewKey("browser")
	const n = 150
	for i := range n {
		c.SendRaw(`["EVENT",` + string(alice.Note(fmt.Sprint("burst ", i)).Raw) + `]`)
	}
	for range 5 { // refused: a bad signature
		c.SendRaw(`["EVENT",` + strings.Replace(string(alice.Note("bad").Raw), `"sig":"`, `"sig":"0`, 1) + `]`)
	}
	for range n + 5 {
		c.ExpectType("OK")
	}
	for range n {
		sub.ExpectType("EVENT")
	}
	// Wait for a sample that saw the burst (the first, taken at start,
	// saw none of it, so the rates are non-zero between the two).
	awaitSample(t, r, "the burst and a flush", func(last map[string]int64) bool {
		return last["store_events"] == n && last["events_rejected.invalid"] == 5 && last["store_background.flush_bytes"] > 0
	})

	dom := string(runChromium(t, bin, r.HTTPURL()+"/", "--dump-dom"))
	if st := attr(t, dom, `<main[^>]*id="dash"[^>]*>`, "data-state"); st != "live" {
		t.Fatalf("dashboard state %q, want live:\n%s", st, dom)
	}
	chart := func(id string) string { return `<figure[^>]*id="chart-` + id + `"[^>]*>` }
	for _, id := range []string{"accepted", "refused", "deliveries", "connections", "ok-latency", "query-latency", "verify-queue", "store-events", "store-size", "store-writes"} {
		if pts := attrNum(t, dom, chart(id), "data-points"); pts < 2 {
			t.Fatalf("chart %s drew %v samples, want >= 2", id, pts)
		}
		if max := attrNum(t, dom, chart(id), "data-max"); max <= 0 {
			t.Fatalf("chart %s drew nothing above 0 (data-max %v)", id, max)
		}
	}
	line := func(id, name string) string {
		return chart(id) + `(?s:.*?)<path[^>]*data-line="` + regexp.QuoteMeta(name) + `"[^>]*>`
	}
	pathAttr := func(id, name, a string) float64 {
		t.Helper()
		re := regexp.MustCompile(line(id, name))
		m := re.FindString(dom)
		if m == "" {
			t.Fatalf("chart %s has no line %s", id, name)
		}
		tag := m[strings.LastIndex(m, "<path"):]
		return attrNum(t, tag, `<path[^>]*>`, a)
	}
	for _, l := range [][2]string{{"accepted", "stored"}, {"refused", "invalid"}, {"deliveries", "live"}, {"ok-latency", "p99"}, {"query-latency", "p50"}} {
		if v := pathAttr(l[0], l[1], "data-max"); v <= 0 {
			t.Fatalf("chart %s line %s: data-max %v, want > 0", l[0], l[1], v)
		}
	}
	if v := pathAttr("store-events", "events", "data-last"); v != n {
		t.Fatalf("stored events drawn last %v, want %d", v, n)
	}
	if v := pathAttr("connections", "connections", "data-last"); v < 2 {
		t.Fatalf("connections drawn last %v, want >= 2", v)
	}
	// The store charts are shown, the PostgreSQL ones hidden.
	for _, id := range []string{"store-writes", "store-stalls", "store-l0"} {
		if isHidden(t, dom, chart(id)) {
			t.Fatalf("chart %s hidden with the embedded store", id)
		}
	}
	for _, id := range []string{"pg-pool", "pg-waits", "pg-writes"} {
		if !isHidden(t, dom, chart(id)) {
			t.Fatalf("chart %s shown with the embedded store", id)
		}
	}
	// A single node: no bus chart, no bus tiles.
	if !isHidden(t, dom, chart("cluster")) || !isHidden(t, dom, `<div[^>]*id="tile-bus"[^>]*>`) || !isHidden(t, dom, `<div[^>]*id="tile-nodes"[^>]*>`) {
		t.Fatal("cluster bus chart or tiles shown on a single node")
	}
	// Stalls and level 0 may well be zero by now (a compaction empties
	// level 0): drawn, whatever their value.
	for _, id := range []string{"store-stalls", "store-l0"} {
		if pts := attrNum(t, dom, chart(id), "data-points"); pts < 2 {
			t.Fatalf("chart %s drew %v samples, want >= 2", id, pts)
		}
	}
	if v := pathAttr("store-writes", "flushes", "data-max"); v <= 0 {
		t.Fatalf("no flush drawn (data-max %v)", v)
	}
	// The tiles show the latest sample: every stored event.
	if v := attrNum(t, dom, `<div[^>]*id="tile-events"[^>]*><b[^>]*>`, "data-value"); v != n {
		t.Fatalf("stored events tile %v, want %d", v, n)
	}

	screenshot(t, bin, r.HTTPURL()+"/", "dashboard.png", "1280,1700")
	screenshot(t, bin, r.HTTPURL()+"/", "dashboard-phone.png", "412,2600")
}

// screenshot saves the page at url, in a window of size ("w,h"), as name
// in $PETREL_TEST_ARTIFACTS (or the temporary directory's
// petrel-test-artifacts) and logs where.
func screenshot(t *testing.T, bin, url, name, size string) {
	t.Helper()
	dir := os.Getenv("PETREL_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "petrel-test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	os.Remove(p)
	runChromium(t, bin, url, "--screenshot="+p, "--window-size="+size)
	b, err := os.ReadFile(p)
	if err != nil || len(b) < 1000 || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("screenshot %s: %d bytes, %v", p, len(b), err)
	}
	t.Logf("screenshot: %s", p)
}

// TestDashboardWithoutStoreBackground: with a store that reports no
// background work (PostgreSQL), the page hides the store's background
// charts, the stall tile and the compaction-debt line, and shows the
// rest.
func TestDashboardWithoutStoreBackground(t *testing.T) {
	bin := chromium(t)
	r := startWithoutBackground(t)
	dom := string(runChromium(t, bin, r.HTTPURL()+"/", "--dump-dom"))
	if st := attr(t, dom, `<main[^>]*id="dash"[^>]*>`, "data-state"); st != "live" {
		t.Fatalf("dashboard state %q, want live:\n%s", st, dom)
	}
	chart := func(id string) string { return `<figure[^>]*id="chart-` + id + `"[^>]*>` }
	for _, id := range []string{"store-writes", "store-stalls", "store-l0", "pg-pool", "pg-waits", "pg-writes"} {
		if !isHidden(t, dom, chart(id)) {
			t.Fatalf("chart %s shown without the store's figures", id)
		}
	}
	for _, id := range []string{"accepted", "store-size", "store-events"} {
		if isHidden(t, dom, chart(id)) {
			t.Fatalf("chart %s hidden", id)
		}
	}
	if !isHidden(t, dom, `<div[^>]*id="tile-stalls"[^>]*>`) || isHidden(t, dom, `<div[^>]*id="tile-events"[^>]*>`) {
		t.Fatal("stall tile shown or stored-events tile hidden without the store's figures")
	}
	debt := regexp.MustCompile(chart("store-size") + `(?s:.*?)<span[^>]*>(?:<i></i>)?compaction debt`).FindString(dom)
	if debt == "" {
		t.Fatal("store-size chart has no compaction-debt key")
	}
	if !isHidden(t, debt[strings.LastIndex(debt, "<span"):], `<span[^>]*>`) {
		t.Fatalf("compaction-debt key shown without the store's figures: %s", debt)
	}
}

// TestDashboardPostgres: on PostgreSQL the page shows the connection
// pool, the waits for a connection and the write transactions, and
// hides the embedded store's charts.
func TestDashboardPostgres(t *testing.T) {
	bin := chromium(t)
	r := startPostgres(t)
	c := relaytest.Dial(t, r.URL)
	alice := relaytest.NewKey("browser postgres")
	const n = 20
	for i := range n {
		c.MustPublish(alice.Note(fmt.Sprint("burst ", i)))
	}
	// Wait for a sample that saw every commit (the first, taken at
	// start, saw none, so the commit rate is non-zero between the two).
	awaitSample(t, r, "the burst", func(last map[string]int64) bool { return last["store_commits"] >= n })
	dom := string(runChromium(t, bin, r.HTTPURL()+"/", "--dump-dom"))
	if st := attr(t, dom, `<main[^>]*id="dash"[^>]*>`, "data-state"); st != "live" {
		t.Fatalf("dashboard state %q, want live:\n%s", st, dom)
	}
	chart := func(id string) string { return `<figure[^>]*id="chart-` + id + `"[^>]*>` }
	for _, id := range []string{"store-writes", "store-stalls", "store-l0"} {
		if !isHidden(t, dom, chart(id)) {
			t.Fatalf("chart %s shown on PostgreSQL", id)
		}
	}
	for _, id := range []string{"pg-pool", "pg-waits", "pg-writes"} {
		if isHidden(t, dom, chart(id)) {
			t.Fatalf("chart %s hidden on PostgreSQL", id)
		}
		if pts := attrNum(t, dom, chart(id), "data-points"); pts < 2 {
			t.Fatalf("chart %s drew %v samples, want >= 2", id, pts)
		}
	}
	line := func(id, name, a string) float64 {
		t.Helper()
		m := regexp.MustCompile(chart(id) + `(?s:.*?)<path[^>]*data-line="` + regexp.QuoteMeta(name) + `"[^>]*>`).FindString(dom)
		if m == "" {
			t.Fatalf("chart %s has no line %s", id, name)
		}
		return attrNum(t, m[strings.LastIndex(m, "<path"):], `<path[^>]*>`, a)
	}
	if v := line("pg-pool", "limit", "data-last"); v != 8 {
		t.Fatalf("pool limit drawn last %v, want the default 8", v)
	}
	if v := line("pg-pool", "open", "data-last"); v < 1 || v > 8 {
		t.Fatalf("open connections drawn last %v, want 1..8", v)
	}
	if v := line("pg-writes", "committed", "data-max"); v <= 0 {
		t.Fatalf("no write transaction drawn (data-max %v)", v)
	}
	if !isHidden(t, dom, `<div[^>]*id="tile-stalls"[^>]*>`) {
		t.Fatal("store write stalls tile shown on PostgreSQL")
	}
}

// TestDashboardReloadAlert: while the last configuration reload was
// refused the page says so above the charts (a restart would fail on the
// file as it is), and an applied reload takes the warning away.
func TestDashboardReloadAlert(t *testing.T) {
	bin := chromium(t)
	r := relaytest.Start(t, relaytest.Options{})
	const alert = `<p[^>]*id="alert"[^>]*>`
	page := func(lastRefused int64) string {
		t.Helper()
		awaitSample(t, r, fmt.Sprint("last_refused ", lastRefused), func(last map[string]int64) bool {
			return last["config_reloads.last_refused"] == lastRefused
		})
		dom := string(runChromium(t, bin, r.HTTPURL()+"/", "--dump-dom"))
		if st := attr(t, dom, `<main[^>]*id="dash"[^>]*>`, "data-state"); st != "live" {
			t.Fatalf("dashboard state %q, want live:\n%s", st, dom)
		}
		return dom
	}

	if dom := page(0); !isHidden(t, dom, alert) {
		t.Fatalf("warning shown with no reload: %s", regexp.MustCompile(alert+`[^<]*`).FindString(dom))
	}
	r.Server.NoteReload(false)
	r.Server.NoteReload(false)
	dom := page(1)
	if isHidden(t, dom, alert) || attr(t, dom, alert, "data-alerts") != "reload" {
		t.Fatalf("no reload warning after a refused reload: %s", regexp.MustCompile(alert).FindString(dom))
	}
	if text := regexp.MustCompile(alert + `([^<]*)`).FindStringSubmatch(dom)[1]; !strings.Contains(text, "reload was refused (2 refused") {
		t.Fatalf("warning says %q", text)
	}
	screenshot(t, bin, r.HTTPURL()+"/", "dashboard-reload-refused.png", "1280,700")
	r.Server.NoteReload(true)
	if dom := page(0); !isHidden(t, dom, alert) {
		t.Fatalf("warning still shown after an applied reload: %s", regexp.MustCompile(alert+`[^<]*`).FindString(dom))
	}
}

// startClusterNodes starts two relays over one PostgreSQL schema with
// cluster bridges over the real NATS (127.0.0.1:4222, or
// PETREL_TEST_NATS_URL), on a subject of their own.
func startClusterNodes(t *testing.T) (a, b *relaytest.Relay, bb *cluster.Bridge) {
	t.Helper()
	url := cmp.Or(os.Getenv("PETREL_TEST_NATS_URL"), "nats://127.0.0.1:4222")
	subject := fmt.Sprintf("petrel.test.dashboard.%d.%d", os.Getpid(), time.Now().UnixNano())
	sts := pgtest.Nodes(t, 2)
	var rs [2]*relaytest.Relay
	var bridges [2]*cluster.Bridge
	for i, name := range []string{"a", "b"} {
		br, err := cluster.New(cluster.Options{URL: url, Node: name, Subject: subject, Feed: sts[i],
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), HeartbeatInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			br.Close(ctx)
		})
		rs[i] = relaytest.Start(t, relaytest.Options{Store: sts[i], Bus: br})
		if err := br.Start(rs[i].Relay.Publish); err != nil {
			t.Fatalf("bridge %s on %s: %v", name, url, err)
		}
		t.Cleanup(br.StopDelivery)
		bridges[i] = br
	}
	return rs[0], rs[1], bridges[1]
}

// TestDashboardCluster: on a node of a cluster the series holds the bus's
// figures (each equal to /stats once quiet), and the page shows the bus
// tiles (up, one other node) and the bus chart with the events received
// from the other node; when the node loses its bus, a warning says so
// and the tile says down.
func TestDashboardCluster(t *testing.T) {
	bin := chromium(t)
	a, b, bb := startClusterNodes(t)
	c := relaytest.Dial(t, a.URL)
	alice := relaytest.NewKey("dashboard cluster")
	const n = 10
	for i := range n {
		c.MustPublish(alice.Note(fmt.Sprint("across ", i)))
	}
	d, last := awaitSample(t, b, "the other node's events", func(last map[string]int64) bool {
		return last["cluster.received"] == n && last["cluster.origins"] == 1 && last["cluster.connected"] == 1
	})
	_, body := get(t, b, "/stats")
	var st map[string]any
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	fields := 0
	for _, f := range d.Fields {
		if !strings.HasPrefix(f, "cluster.") {
			continue
		}
		fields++
		v, ok := lookup(st, f)
		if b, isBool := v.(bool); isBool {
			v, ok = 0.0, true
			if b {
				v = 1.0
			}
		}
		if x, isNum := v.(float64); !ok || !isNum || float64(last[f]) != x {
			t.Fatalf("series %s = %d, /stats %v", f, last[f], v)
		}
	}
	if fields != 7 {
		t.Fatalf("%d cluster fields in the series, want 7: %v", fields, d.Fields)
	}

	dom := string(runChromium(t, bin, b.HTTPURL()+"/", "--dump-dom"))
	if st := attr(t, dom, `<main[^>]*id="dash"[^>]*>`, "data-state"); st != "live" {
		t.Fatalf("dashboard state %q, want live:\n%s", st, dom)
	}
	tile := func(id string) string { return `<div[^>]*id="tile-` + id + `"[^>]*><b[^>]*>` }
	if isHidden(t, dom, `<div[^>]*id="tile-bus"[^>]*>`) || attrNum(t, dom, tile("bus"), "data-value") != 1 ||
		!regexp.MustCompile(tile("bus")+`up</b>`).MatchString(dom) || attrNum(t, dom, tile("nodes"), "data-value") != 1 {
		t.Fatalf("bus tiles: %s %s", regexp.MustCompile(tile("bus")+`[^<]*`).FindString(dom), regexp.MustCompile(tile("nodes")+`[^<]*`).FindString(dom))
	}
	chart := `<figure[^>]*id="chart-cluster"[^>]*>`
	if isHidden(t, dom, chart) {
		t.Fatal("cluster chart hidden on a node of a cluster")
	}
	m := regexp.MustCompile(chart + `(?s:.*?)<path[^>]*data-line="received from them"[^>]*>`).FindString(dom)
	if m == "" || attrNum(t, m[strings.LastIndex(m, "<path"):], `<path[^>]*>`, "data-max") <= 0 {
		t.Fatalf("no events received drawn: %q", m)
	}
	if !isHidden(t, dom, `<p[^>]*id="alert"[^>]*>`) {
		t.Fatal("warning shown with the bus up")
	}
	screenshot(t, bin, b.HTTPURL()+"/", "dashboard-cluster.png", "1280,1900")

	// NATS refuses one of b's messages (over the server's max_payload):
	// the page warns.
	bb.ShareRates(make([]byte, 2<<20))
	awaitSample(t, b, "a bus error", func(last map[string]int64) bool { return last["cluster.bus_errors"] == 1 })
	dom = string(runChromium(t, bin, b.HTTPURL()+"/", "--dump-dom"))
	if alert := `<p[^>]*id="alert"[^>]*>`; isHidden(t, dom, alert) || attr(t, dom, alert, "data-alerts") != "busErrors" ||
		!strings.Contains(regexp.MustCompile(alert+`[^<]*`).FindString(dom), "NATS refused 1 of this node") {
		t.Fatalf("bus errors: %s", regexp.MustCompile(alert+`[^<]*`).FindString(dom))
	}

	// b loses its bus.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bb.Close(ctx)
	awaitSample(t, b, "the bus down", func(last map[string]int64) bool { return last["cluster.connected"] == 0 })
	dom = string(runChromium(t, bin, b.HTTPURL()+"/", "--dump-dom"))
	alert := `<p[^>]*id="alert"[^>]*>`
	if isHidden(t, dom, alert) || attr(t, dom, alert, "data-alerts") != "bus busErrors" || !regexp.MustCompile(tile("bus")+`down</b>`).MatchString(dom) {
		t.Fatalf("bus down: %s %s", regexp.MustCompile(alert+`[^<]*`).FindString(dom), regexp.MustCompile(tile("bus")+`[^<]*`).FindString(dom))
	}
}

// TestDashboardChurn: the page charts the WebSockets opened and the
// connections refused each second (here by policy.connect_rate: a burst
// of two for a client behind the trusted proxy 127.0.0.1, the third
// refused; the test's and the browser's own requests come from the
// proxy's address, whose plain HTTP takes no token).
func TestDashboardChurn(t *testing.T) {
	bin := chromium(t)
	r := relaytest.Start(t, relaytest.Options{
		Server: server.Config{TrustedProxies: []string{"127.0.0.1"}},
		Policy: policy.Config{ConnectRate: 0.01, ConnectBurst: 2},
	})
	client := relaytest.DialOptions{LocalIP: "127.0.0.1", Header: http.Header{"X-Forwarded-For": {"203.0.113.5"}}}
	for i := range 3 {
		_, err := relaytest.DialWith(t, r.URL, client)
		if (err == nil) != (i < 2) {
			t.Fatalf("connection %d from 127.0.0.2: %v", i+1, err)
		}
	}
	awaitSample(t, r, "the refusal", func(last map[string]int64) bool {
		return last["connections_rejected"] == 1 && last["connections_total"] == 2
	})
	dom := string(runChromium(t, bin, r.HTTPURL()+"/", "--dump-dom"))
	chart := `<figure[^>]*id="chart-churn"[^>]*>`
	if isHidden(t, dom, chart) {
		t.Fatal("churn chart hidden")
	}
	for _, name := range []string{"WebSockets opened", "refused"} {
		m := regexp.MustCompile(chart + `(?s:.*?)<path[^>]*data-line="` + name + `"[^>]*>`).FindString(dom)
		if m == "" || attrNum(t, m[strings.LastIndex(m, "<path"):], `<path[^>]*>`, "data-max") <= 0 {
			t.Fatalf("nothing drawn for %s: %q", name, m)
		}
	}
}
