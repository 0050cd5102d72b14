package bench

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/server"
)

// workerEnv makes the test binary a conns worker (see TestMain).
const workerEnv = "PETREL_BENCH_TEST_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" {
		if err := RunConnsWorker(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testOptions returns options for a small run against url.
func testOptions(url string) Options {
	return Options{URL: url, Seed: 42, Authors: 20, Timeout: 60 * time.Second, DialConcurrency: 16}
}

// exact fails the test unless the run was exact.
func exact(t *testing.T, res *Result) {
	t.Helper()
	if res.Failed() {
		var b strings.Builder
		res.WriteText(&b)
		t.Fatalf("run failed:\n%s", b.String())
	}
	if res.Disconnects != 0 || res.BadMessages != 0 || len(res.Closed) != 0 {
		t.Fatalf("disconnects %d bad %d closed %v", res.Disconnects, res.BadMessages, res.Closed)
	}
}

func checkOK(t *testing.T, c *OKCounts, n int64) {
	t.Helper()
	if c == nil || c.Sent != n || c.Accepted != n || c.Missing != 0 || c.RefusedTotal() != 0 || c.Unexpected != 0 || len(c.AcceptedWithPrefix) != 0 {
		t.Fatalf("OK counts %+v, want %d sent and accepted", c, n)
	}
}

func TestE2EIngest(t *testing.T) {
	rl := relaytest.Start(t, relaytest.Options{})
	o := testOptions(rl.URL)
	o.Events = 500
	o.PID = os.Getpid() // the relay runs in this process
	res, err := Ingest(o)
	if err != nil {
		t.Fatal(err)
	}
	exact(t, res)
	checkOK(t, res.OK, 500)
	if res.Latency["ok"].Count != 500 || res.Rates["accepted_events"] <= 0 {
		t.Errorf("latency %+v rates %v", res.Latency["ok"], res.Rates)
	}
	if res.Relay == nil || res.Relay.Err != "" || res.Relay.RSSPeakBytes <= 0 {
		t.Errorf("relay usage %+v", res.Relay)
	}
	if got := rl.Stats().EventsReceived; got != 500 {
		t.Errorf("relay received %d events, want 500", got)
	}
	// The same events again are duplicates, and the run says so.
	o.CreatedAt = res.Params["created_at_start"].(int64)
	res, err = Ingest(o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Failed() || !strings.Contains(res.Failures[0], "duplicate") {
		t.Fatalf("re-publishing did not fail with duplicates: %v", res.Failures)
	}
}

func TestE2EParallel(t *testing.T) {
	rl := relaytest.Start(t, relaytest.Options{})
	o := testOptions(rl.URL)
	o.Events = 400
	o.Conns = 4
	o.Window = 8
	res, err := Parallel(o)
	if err != nil {
		t.Fatal(err)
	}
	exact(t, res)
	checkOK(t, res.OK, 400)
}

func TestE2EFanout(t *testing.T) {
	rl := relaytest.Start(t, relaytest.Options{})
	o := testOptions(rl.URL)
	o.Events = 100
	o.Subs = 20
	o.Pubs = 2
	res, err := Fanout(o)
	if err != nil {
		t.Fatal(err)
	}
	exact(t, res)
	checkOK(t, res.OK, 100)
	d := res.Deliveries
	if d.Expected != 2000 || d.Received != 2000 || d.Duplicated != 0 || d.Missing != 0 || d.Unexpected != 0 {
		t.Fatalf("deliveries %+v", d)
	}
	if res.Latency["delivery"].Count != 2000 {
		t.Errorf("delivery latency %+v", res.Latency["delivery"])
	}
}

// TestE2EFanoutPacedElsewhere: subscribers on another URL of the relay
// (--sub-url), publishing paced open-loop (--rate): every delivery is
// counted, latency from the OK is reported for each, and the run lasts at
// least as long as the schedule says.
func TestE2EFanoutPacedElsewhere(t *testing.T) {
	rl := relaytest.Start(t, relaytest.Options{})
	o := testOptions(rl.URL)
	o.SubURL = strings.Replace(rl.URL, "127.0.0.1", "localhost", 1)
	o.Events = 50
	o.Subs = 4
	o.Rate = 500 // 50 events: the last is due 98 ms after the first
	start := time.Now()
	res, err := Fanout(o)
	if err != nil {
		t.Fatal(err)
	}
	exact(t, res)
	if d := res.Deliveries; d.Expected != 200 || d.Received != 200 || d.Duplicated != 0 {
		t.Fatalf("deliveries %+v", d)
	}
	if n := res.Latency["delivery_from_ok"].Count; n != 200 {
		t.Errorf("delivery_from_ok latency over %d deliveries, want 200", n)
	}
	if res.Params["sub_url"] != o.SubURL || res.Params["rate"] != o.Rate {
		t.Errorf("params %v do not record sub_url and rate", res.Params)
	}
	if el := time.Since(start); el < 98*time.Millisecond {
		t.Errorf("50 events at 500/s published in %v: not paced", el)
	}
}

// TestE2EFanoutSlowReader checks that lost deliveries are reported: with
// an 8-frame out-queue, a subscriber that reads slowly through a small
// socket buffer overflows and the relay closes its subscription.
func TestE2EFanoutSlowReader(t *testing.T) {
	rl := relaytest.Start(t, relaytest.Options{Relay: relay.Config{OutQueueFrames: 8}})
	o := testOptions(rl.URL)
	o.Events = 600
	o.Subs = 3
	o.SlowSubs = 1
	o.SlowReadDelay = 2 * time.Millisecond
	o.SlowReadBuffer = 4096
	res, err := Fanout(o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Failed() {
		t.Fatalf("a slow reader lost nothing? deliveries %+v", res.Deliveries)
	}
	if !strings.Contains(res.Failures[0], "deliveries missing") {
		t.Errorf("first failure %q does not report the missing deliveries", res.Failures[0])
	}
	if res.Deliveries.Missing == 0 || res.Deliveries.Received+res.Deliveries.Missing != res.Deliveries.Expected {
		t.Errorf("deliveries %+v", res.Deliveries)
	}
	if len(res.Closed) == 0 {
		t.Errorf("no CLOSED counted")
	}
	var b strings.Builder
	res.WriteText(&b)
	if !strings.HasPrefix(b.String(), "FAIL fanout: ") {
		t.Errorf("report does not start with FAIL:\n%s", b.String())
	}
}

func TestE2EReq(t *testing.T) {
	rl := relaytest.Start(t, relaytest.Options{})
	o := testOptions(rl.URL)
	o.Fill = 600
	o.Requests = 5
	o.Limit = 1000 // above petrel's max_limit 500: split in two filters
	res, err := Req(o)
	if err != nil {
		t.Fatal(err)
	}
	exact(t, res)
	checkOK(t, res.Fill.OK, 600)
	q := res.Queries
	// 600 events over 20 authors, split into two groups of 10 authors
	// with limit 500 each: 300 + 300.
	if q.Completed != 5 || q.EventsMin != 600 || q.EventsMax != 600 || q.Mismatched != 0 || q.DupInResponse != 0 {
		t.Fatalf("queries %+v", q)
	}
	if !strings.Contains(q.Filters, "2 filters") || len(res.Notes) == 0 {
		t.Errorf("split not reported: %q notes %v", q.Filters, res.Notes)
	}
	if res.Latency["eose"].Count != 5 {
		t.Errorf("eose latency %+v", res.Latency["eose"])
	}
}

func TestE2EFeed(t *testing.T) {
	rl := relaytest.Start(t, relaytest.Options{})
	o := testOptions(rl.URL)
	o.Authors = 40
	o.Fill = 400 // 10 per author: 20 authors give 200 events
	o.Requests = 6
	o.Conns = 2
	res, err := Feed(o)
	if err != nil {
		t.Fatal(err)
	}
	exact(t, res)
	q := res.Queries
	if q.Completed != 6 || q.EventsMin != 200 || q.EventsMax != 200 || q.Mismatched != 0 || q.Unordered != 0 {
		t.Fatalf("queries %+v", q)
	}
}

func TestE2ESearch(t *testing.T) {
	rl := relaytest.Start(t, relaytest.Options{})
	o := testOptions(rl.URL)
	o.Fill = 300
	o.Requests = 4
	res, err := Search(o)
	if err != nil {
		t.Fatal(err)
	}
	ri, err := FetchRelayInfo(t.Context(), rl.URL)
	if err != nil {
		t.Fatal(err)
	}
	if ri.Supports(50) {
		exact(t, res)
		if res.Queries.EventsTotal == 0 || res.Queries.Mismatched != 0 {
			t.Fatalf("queries %+v", res.Queries)
		}
		return
	}
	// Without NIP-50 the run must say the relay does not do search.
	if !res.Failed() || !strings.Contains(res.Failures[0], "search") {
		t.Fatalf("a relay without search passed the search scenario: %v %+v", res.Failures, res.Queries)
	}
}

func TestE2EConns(t *testing.T) {
	rl := relaytest.Start(t, relaytest.Options{})
	o := testOptions(rl.URL)
	o.Conns = 200
	o.PerIP = 50
	o.Hold = 100 * time.Millisecond
	res, err := Conns(o)
	if err != nil {
		t.Fatal(err)
	}
	exact(t, res)
	c := res.Conns
	if c.Opened != 200 || c.Subscribed != 200 || c.Held != 200 || c.LivenessReceived != 200 || c.LivenessMissing != 0 ||
		c.LivenessDuplicated != 0 || c.Processes != 1 || c.SourceAddrs != 4 || c.SourceRange != "127.0.0.2-127.0.0.5" {
		t.Fatalf("conns %+v", c)
	}
	if got := rl.Stats().ConnectionsTotal; got < 201 {
		t.Errorf("relay saw %d connections", got)
	}
}

func TestE2EConnsWorkers(t *testing.T) {
	rl := relaytest.Start(t, relaytest.Options{})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(workerEnv, "1") // inherited by the worker processes only: TestMain has run
	o := testOptions(rl.URL)
	o.Conns = 60
	o.PerProcess = 30
	o.PerIP = 25
	o.Hold = 100 * time.Millisecond
	o.WorkerCommand = []string{exe}
	res, err := Conns(o)
	if err != nil {
		t.Fatal(err)
	}
	exact(t, res)
	c := res.Conns
	if c.Processes != 2 || c.Subscribed != 60 || c.Held != 60 || c.LivenessReceived != 60 || c.LivenessMissing != 0 {
		t.Fatalf("conns %+v", c)
	}
	if res.Latency["connect"].Count != 60 || res.Latency["delivery"].Count != 60 {
		t.Errorf("latency %+v", res.Latency)
	}
	// Without a worker command a multi-process run is refused up front.
	o.WorkerCommand = nil
	if _, err := Conns(o); err == nil {
		t.Error("multi-process conns without a worker command ran")
	}
}

func TestE2ELadder(t *testing.T) {
	rl := relaytest.Start(t, relaytest.Options{Server: server.Config{PprofListen: "127.0.0.1:0"}})
	o := testOptions(rl.URL)
	o.OKTrace = "http://" + rl.Server.DebugAddr().String()
	o.Rates = []float64{100, 200}
	o.Hold = 500 * time.Millisecond
	o.Conns = 2
	res, err := Ladder(o)
	if err != nil {
		t.Fatal(err)
	}
	exact(t, res)
	checkOK(t, res.OK, 150)
	l := res.Ladder
	if len(l.Steps) != 2 {
		t.Fatalf("steps %+v", l.Steps)
	}
	for i, s := range l.Steps {
		if s.Scheduled != int64(o.Rates[i]/2) || s.Sent != s.Scheduled || s.Accepted != s.Sent || s.Missing != 0 || s.Latency.Count != uint64(s.Sent) {
			t.Errorf("step %d: %+v", i, s)
		}
		if s.Verdict == "" {
			t.Errorf("step %d has no verdict", i)
		}
		// The step's events were all answered, so committed, before the
		// relay's count was read again, and each of its commits stored
		// at least one of them: at least one event a commit.
		if s.EventsPerCommit < 1 {
			t.Errorf("step %d: %v events a commit for %d accepted", i, s.EventsPerCommit, s.Accepted)
		}
		// The relay's embedded store reported its background work (a
		// few hundred events: no flush; level 0 is empty).
		if s.Store == nil || s.Store.Flushes != 0 || s.Store.WriteStalls != 0 || s.Store.L0Sublevels != 0 {
			t.Errorf("step %d: store background %+v", i, s.Store)
		}
		// ... and its OKs were recorded in the relay's histogram.
		if s.RelayOKP99Ms <= 0 {
			t.Errorf("step %d: no relay-side OK p99 bound (%v)", i, s.RelayOKP99Ms)
		}
		// Every accepted event was traced by the relay, and the tail's
		// parts add up to it (one host, one clock).
		if sp := s.OKTrace; sp == nil || sp.Matched != s.Accepted || sp.Dropped != 0 || sp.TailInsideMs <= 0 || sp.InsideP99Ms <= 0 ||
			math.Abs(sp.TailBeforeMs+sp.TailInsideMs+sp.TailAfterMs-sp.TailMs) > 1e-6 {
			t.Errorf("step %d: OK trace %+v for %d accepted", i, sp, s.Accepted)
		}
	}
	knee, capacity, capIdx := KneeAndCapacity(l.Steps, o.MaxErrorRate)
	if knee != l.KneeIndex || capacity != l.Capacity || capIdx != l.CapacityIndex {
		t.Errorf("knee/capacity %d %v %d, recomputed %d %v %d", l.KneeIndex, l.Capacity, l.CapacityIndex, knee, capacity, capIdx)
	}
	// A ladder that cannot be pre-signed within --max-events is refused.
	o.MaxEvents = 10
	if _, err := Ladder(o); err == nil {
		t.Error("ladder over --max-events ran")
	}
}

// TestE2ELadderTimeout: a ladder whose timeout ends a step mid-send
// reports the timeout, marks the step "timeout" and leaves it out of the
// knee and capacity, rather than charging the relay with missing OKs.
func TestE2ELadderTimeout(t *testing.T) {
	rl := relaytest.Start(t, relaytest.Options{})
	o := testOptions(rl.URL)
	o.Rates = []float64{100, 200}
	o.Hold = 6500 * time.Millisecond // 650 + 1,300 events
	o.Conns = 2
	o.Timeout = 3 * time.Second // within the first step
	res, err := Ladder(o)
	if err != nil {
		t.Fatal(err)
	}
	l := res.Ladder
	if len(l.Steps) != 1 {
		t.Fatalf("%d steps, want the first only: %+v", len(l.Steps), l.Steps)
	}
	s := l.Steps[0]
	if !s.Cut || s.Verdict != "timeout" || s.Sent >= s.Scheduled || s.Sent == 0 {
		t.Fatalf("step %+v", s)
	}
	if l.KneeIndex != -1 || l.CapacityIndex != -1 {
		t.Fatalf("a cut step judged: knee %d, capacity step %d", l.KneeIndex, l.CapacityIndex)
	}
	if !res.Failed() || !strings.Contains(strings.Join(res.Failures, "; "), "--timeout") {
		t.Fatalf("failures %q", res.Failures)
	}
}

func TestRefusesRemote(t *testing.T) {
	for _, fn := range []func(Options) (*Result, error){Ingest, Fanout, Conns, Ladder, Req} {
		if _, err := fn(Options{URL: "ws://10.1.2.3:7447"}); err == nil {
			t.Fatal("a scenario accepted a non-loopback target")
		}
	}
}

// TestE2ECompress: with --compress every connection negotiates
// permessage-deflate, deliveries and answers are exact, and fewer bytes
// cross the wire per delivery and per REQ than in the same run without.
func TestE2ECompress(t *testing.T) {
	rl := relaytest.Start(t, relaytest.Options{})
	fan := func(compress bool) *Result {
		o := testOptions(rl.URL)
		o.Events = 100
		o.Subs = 10
		o.Compress = compress
		if compress {
			o.Seed++ // other events: the first run's would be duplicates
		}
		res, err := Fanout(o)
		if err != nil {
			t.Fatal(err)
		}
		exact(t, res)
		if d := res.Deliveries; d.Received != 1000 || d.Missing != 0 {
			t.Fatalf("compress %v: deliveries %+v", compress, d)
		}
		return res
	}
	plain, z := fan(false), fan(true)
	if plain.Wire == nil || z.Wire == nil {
		t.Fatal("no wire figures")
	}
	if plain.Wire.Negotiated != 0 || z.Wire.Negotiated != 11 {
		t.Fatalf("negotiated on %d and %d connections; want 0 and 11", plain.Wire.Negotiated, z.Wire.Negotiated)
	}
	if !(z.Wire.PerDelivery > 0 && z.Wire.PerDelivery < plain.Wire.PerDelivery) {
		t.Fatalf("bytes per delivery: %.1f compressed, %.1f plain", z.Wire.PerDelivery, plain.Wire.PerDelivery)
	}
	feed := func(compress bool) *Result {
		o := testOptions(rl.URL)
		o.Authors = 40
		o.Fill = -1 // what the fan-outs stored
		o.Requests = 4
		o.Conns = 1
		o.Compress = compress
		res, err := Feed(o)
		if err != nil {
			t.Fatal(err)
		}
		exact(t, res)
		return res
	}
	pf, zf := feed(false), feed(true)
	if pf.Queries.EventsTotal != zf.Queries.EventsTotal || zf.Queries.EventsTotal == 0 {
		t.Fatalf("feed events: %d plain, %d compressed", pf.Queries.EventsTotal, zf.Queries.EventsTotal)
	}
	if !(zf.Wire.PerRequest > 0 && zf.Wire.PerRequest < pf.Wire.PerRequest) {
		t.Fatalf("bytes per REQ: %.0f compressed, %.0f plain", zf.Wire.PerRequest, pf.Wire.PerRequest)
	}
	t.Logf("per delivery %.1f / %.1f B, per REQ %.0f / %.0f B (compressed / plain)", z.Wire.PerDelivery, plain.Wire.PerDelivery, zf.Wire.PerRequest, pf.Wire.PerRequest)
}
