package e2e

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/petrel-relay/petrel/internal/cluster"
	"github.com/petrel-relay/petrel/internal/pgtest"
	"github.com/petrel-relay/petrel/internal/relay"
)

// The harness: the petrel binary (built once per test run), and clusters
// of it started, faulted and stopped through scripts/cluster.sh.

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// petrelBinary builds cmd/petrel once for the whole test run.
func petrelBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "petrel-e2e-bin-")
		if buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "petrel")
		cmd := exec.Command("go", "build", "-o", buildBin, "github.com/petrel-relay/petrel/cmd/petrel")
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// skipUnlessWanted skips in -short mode and when told to by the
// environment; anything else missing is a failure (CI must run these).
func skipUnlessWanted(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the e2e tests start real processes")
	}
	for _, v := range []string{"PETREL_TEST_E2E", "PETREL_TEST_POSTGRES", "PETREL_TEST_NATS"} {
		if os.Getenv(v) == "skip" {
			t.Skip(v + "=skip")
		}
	}
}

func sharedNATSURL() string {
	if u := os.Getenv("PETREL_TEST_NATS_URL"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// needServices fails the test when what the cluster needs is missing.
func needServices(t *testing.T, o clusterOptions) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !o.privatePostgres {
		c, err := pgx.Connect(ctx, pgtest.URL())
		if err != nil {
			t.Fatalf("PostgreSQL at %s unreachable (scripts/setup.sh starts it; PETREL_TEST_POSTGRES=skip skips): %v", pgtest.URL(), err)
		}
		c.Close(ctx)
	}
	if !o.privateNATS {
		nc, err := nats.Connect(sharedNATSURL(), nats.Timeout(5*time.Second))
		if err != nil {
			t.Fatalf("NATS at %s unreachable (scripts/setup.sh starts it; PETREL_TEST_NATS=skip skips): %v", sharedNATSURL(), err)
		}
		nc.Close()
	}
	for _, need := range []struct {
		on   bool
		exe  string
		what string
	}{
		{o.haproxy, "haproxy", "haproxy (Debian package haproxy)"},
		{o.privateNATS, "nats-server", "nats-server (Debian package nats-server)"},
		{true, "flock", "flock (util-linux)"},
	} {
		if !need.on {
			continue
		}
		if _, err := exec.LookPath(need.exe); err != nil {
			if _, serr := os.Stat("/usr/sbin/" + need.exe); serr != nil {
				t.Fatalf("%s not found (scripts/setup.sh installs it): %v", need.what, err)
			}
		}
	}
}

// clusterOptions say what startCluster starts.
type clusterOptions struct {
	nodes           int
	haproxy         bool
	privatePostgres bool     // a PostgreSQL of its own, which the test may stop
	privateNATS     bool     // a nats-server of its own, which the test may kill
	env             []string // PETREL_* settings for every node
}

// testCluster is one cluster started by scripts/cluster.sh. It is stopped
// (processes, private servers, the schema) when the test ends.
type testCluster struct {
	t      *testing.T
	script string
	state  string
	env    map[string]string
	nodes  []testNode
	// proxy is HAProxy's ws:// URL and proxyStats its stats page ("" without).
	proxy, proxyStats string
}

// testNode is one petrel process of a cluster.
type testNode struct {
	name string // n1, n2...
	url  string // ws://127.0.0.1:port
	http string // http://127.0.0.1:port
}

// nodeEnv are the settings every test cluster's nodes get: pages of
// 10000 events (storedPage), and 127.0.0.3 blocked (the proxy
// test's forwarded-address check).
var nodeEnv = []string{
	"PETREL_RELAY_MAX_LIMIT=10000",
	"PETREL_POLICY_BLOCKED_IPS=127.0.0.3",
	"PETREL_LOG_LEVEL=info",
}

func startCluster(t *testing.T, o clusterOptions) *testCluster {
	t.Helper()
	skipUnlessWanted(t)
	needServices(t, o)
	bin := petrelBinary(t)
	script, err := filepath.Abs("../../scripts/cluster.sh")
	if err != nil {
		t.Fatal(err)
	}
	c := &testCluster{t: t, script: script, state: t.TempDir()}
	args := []string{"start", "--state", c.state, "--bin", bin, "--nodes", strconv.Itoa(o.nodes),
		"--ttl", "900", "--timeout", "90"}
	if o.haproxy {
		args = append(args, "--haproxy")
	}
	if o.privatePostgres {
		args = append(args, "--postgres", "private")
	} else {
		args = append(args, "--postgres", pgtest.URL())
	}
	if o.privateNATS {
		args = append(args, "--nats", "private")
	} else {
		args = append(args, "--nats", sharedNATSURL())
	}
	env := append(append([]string{}, nodeEnv...), o.env...)
	start := time.Now()
	out, err := c.run(env, args...)
	// Stop whatever started, even after a failed start (the script cleans
	// up itself then, and stop is harmless).
	t.Cleanup(c.stop)
	if err != nil {
		c.dumpLogs()
		t.Fatalf("cluster.sh start: %v\n%s", err, out)
	}
	c.readEnv()
	n, _ := strconv.Atoi(c.env["nodes"])
	for i := 1; i <= n; i++ {
		port := c.env[fmt.Sprintf("n%d_port", i)]
		c.nodes = append(c.nodes, testNode{name: fmt.Sprintf("n%d", i),
			url: "ws://127.0.0.1:" + port, http: "http://127.0.0.1:" + port})
	}
	c.proxy, c.proxyStats = c.env["haproxy_url"], c.env["haproxy_stats_url"]
	t.Logf("cluster: %d nodes (postgres %s, nats %s, haproxy %v) up in %v",
		n, c.env["postgres_url"], c.env["nats_url"], o.haproxy, time.Since(start).Round(time.Millisecond))
	return c
}

// run runs cluster.sh with the environment stripped of PETREL_ settings
// (the nodes get env only) and returns its combined output.
func (c *testCluster) run(env []string, args ...string) (string, error) {
	cmd := exec.Command(c.script, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PETREL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *testCluster) readEnv() {
	c.env = map[string]string{}
	b, err := os.ReadFile(filepath.Join(c.state, "cluster.env"))
	if err != nil {
		c.t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			c.env[k] = v
		}
	}
}

func (c *testCluster) stop() {
	c.logWarnings()
	if c.t.Failed() || os.Getenv("PETREL_TEST_LOG") != "" {
		c.dumpLogs()
	}
	if out, err := c.run(nil, "stop", "--state", c.state); err != nil {
		c.t.Errorf("cluster.sh stop: %v\n%s", err, out)
	}
}

// logWarnings logs, per node, how often each warning or error message
// appeared in its log: what a fault made the nodes say, and what a
// healthy test should not make them say.
func (c *testCluster) logWarnings() {
	logs, _ := filepath.Glob(filepath.Join(c.state, "n*.log"))
	for _, p := range logs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		counts := map[string]int{}
		var order []string
		for _, line := range strings.Split(string(b), "\n") {
			lvl := ""
			switch {
			case strings.Contains(line, "level=WARN"):
				lvl = "WARN"
			case strings.Contains(line, "level=ERROR"):
				lvl = "ERROR"
			default:
				continue
			}
			msg := lvl
			if _, rest, ok := strings.Cut(line, "msg="); ok {
				if strings.HasPrefix(rest, `"`) {
					if end := strings.Index(rest[1:], `"`); end >= 0 {
						rest = rest[1 : end+1]
					}
				} else if sp := strings.IndexByte(rest, ' '); sp >= 0 {
					rest = rest[:sp]
				}
				msg = lvl + " " + rest
			}
			if counts[msg] == 0 {
				order = append(order, msg)
			}
			counts[msg]++
		}
		for _, m := range order {
			c.t.Logf("%s: %d× %s", strings.TrimSuffix(filepath.Base(p), ".log"), counts[m], m)
		}
	}
}

// dumpLogs prints the end of every process's log.
func (c *testCluster) dumpLogs() {
	logs, _ := filepath.Glob(filepath.Join(c.state, "*.log"))
	for _, p := range logs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		c.t.Logf("--- %s (last %d lines)\n%s", filepath.Base(p), len(lines), strings.Join(lines, "\n"))
	}
}

// kill is cluster.sh kill: SIGKILL for a node or nats, an immediate
// shutdown for pg.
func (c *testCluster) kill(name string) {
	c.t.Helper()
	if out, err := c.run(nil, "kill", name, "--state", c.state); err != nil {
		c.t.Fatalf("cluster.sh kill %s: %v\n%s", name, err, out)
	}
}

// restart is cluster.sh restart: start name again on its port (after
// stopping it if it runs).
func (c *testCluster) restart(name string) {
	c.t.Helper()
	if out, err := c.run(nil, "restart", name, "--state", c.state, "--timeout", "90"); err != nil {
		c.t.Fatalf("cluster.sh restart %s: %v\n%s", name, err, out)
	}
}

// nodeStats is the part of a node's /stats document the tests read.
type nodeStats struct {
	StoreUnavailable     bool              `json:"store_unavailable"`
	StoreErrors          int64             `json:"store_errors"`
	EventsAccepted       int64             `json:"events_accepted"`
	EventsRejected       map[string]int64  `json:"events_rejected"`
	SubscriptionsActive  int64             `json:"subscriptions_active"`
	SubscriptionsTotal   int64             `json:"subscriptions_total"`
	ConnectionsActive    int64             `json:"connections_active"`
	ConnectionsBlocked   int64             `json:"connections_blocked"`
	SlotsRemoteAddresses int               `json:"connection_slots_remote_addresses"`
	Cluster              *cluster.Stats    `json:"cluster"`
	Policy               relay.PolicyStats `json:"policy"`
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// stats reads a node's /stats.
func (n testNode) stats() (nodeStats, error) {
	var s nodeStats
	resp, err := httpClient.Get(n.http + "/stats")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("%s/stats: HTTP %d", n.http, resp.StatusCode)
	}
	err = json.NewDecoder(resp.Body).Decode(&s)
	return s, err
}

func (n testNode) mustStats(t *testing.T) nodeStats {
	t.Helper()
	s, err := n.stats()
	if err != nil {
		t.Fatalf("%s: %v", n.name, err)
	}
	return s
}

// metric reads one unlabelled sample of a node's /metrics.
func (n testNode) metric(name string) (float64, error) {
	resp, err := httpClient.Get(n.http + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == name {
			return strconv.ParseFloat(f[1], 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s/metrics: no sample %s", n.http, name)
}

// clusterSummary is one line of a node's bus figures for the test log.
func clusterSummary(s *cluster.Stats) string {
	if s == nil {
		return "no cluster stats"
	}
	return fmt.Sprintf("connected=%v disconnects=%d reconnects=%d published=%d received=%d gaps=%d lost=%d silent=%d catchups=%d caught_up=%d catchup_errors=%d duplicates_skipped=%d",
		s.Connected, s.Disconnects, s.Reconnects, s.Published, s.Received, s.GapsDetected, s.MessagesLost,
		s.OriginsSilent, s.CatchUps, s.CaughtUp, s.CatchUpErrors, s.DuplicatesSkipped)
}

// logClusterStats logs every live node's bus figures.
func (c *testCluster) logClusterStats(t *testing.T, skip ...string) {
	t.Helper()
	for _, n := range c.nodes {
		if slices.Contains(skip, n.name) {
			continue
		}
		s, err := n.stats()
		if err != nil {
			t.Logf("%s: stats: %v", n.name, err)
			continue
		}
		t.Logf("%s: accepted=%d store_errors=%d bus: %s", n.name, s.EventsAccepted, s.StoreErrors, clusterSummary(s.Cluster))
	}
}

// proxyServers returns HAProxy's view of the nodes: name -> status (UP,
// DOWN, ...), from its stats page's CSV.
func (c *testCluster) proxyServers() (map[string]string, error) {
	resp, err := httpClient.Get(c.proxyStats + ";csv")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	r := csv.NewReader(strings.NewReader(strings.TrimPrefix(string(b), "# ")))
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil || len(rows) == 0 {
		return nil, fmt.Errorf("haproxy stats: %v", err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	out := map[string]string{}
	for _, row := range rows[1:] {
		if row[col["pxname"]] == "petrel_nodes" && row[col["svname"]] != "BACKEND" {
			out[row[col["svname"]]] = row[col["status"]]
		}
	}
	return out, nil
}

// waitFor polls cond every 50ms until it holds, failing the test after
// limit. The limits are generous guards against a hang, not measurements.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}
