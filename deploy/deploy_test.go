package deploy

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/petrel-relay/petrel/internal/cluster"
	"github.com/petrel-relay/petrel/internal/config"
	"github.com/petrel-relay/petrel/internal/pgtest"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// prometheusOwn are series Prometheus makes itself, not found in any
// target's /metrics.
var prometheusOwn = []string{"up"}

// selectorRE finds metric names in PromQL: a name directly followed by a
// label matcher or a range, or any petrel_, process_ or go_ name.
var (
	selectorRE = regexp.MustCompile(`\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*([{\[])`)
	prefixedRE = regexp.MustCompile(`\b((?:petrel|process|go)_[a-zA-Z0-9_:]+)`)
	matcherRE  = regexp.MustCompile(`\b([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}`)
	equalsRE   = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"$]*)"`)
	// Grafana's variables ($instance, $__rate_interval) and template
	// functions are not PromQL; ranges in them are not names.
	promqlKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or", "unless"}
)

// metricNames returns the metric names expr selects, and the
// name{label="value"} equality matchers it uses.
func metricNames(expr string) (names []string, matchers [][3]string) {
	for _, m := range selectorRE.FindAllStringSubmatch(expr, -1) {
		if m[2] == "[" && strings.HasPrefix(m[1], "$") || slices.Contains(promqlKeywords, m[1]) {
			continue
		}
		names = append(names, m[1])
	}
	for _, m := range prefixedRE.FindAllStringSubmatch(expr, -1) {
		names = append(names, m[1])
	}
	for _, m := range matcherRE.FindAllStringSubmatch(expr, -1) {
		for _, e := range equalsRE.FindAllStringSubmatch(m[2], -1) {
			if !strings.HasPrefix(m[2][strings.Index(m[2], e[0])+len(e[1]):], "=~") {
				matchers = append(matchers, [3]string{m[1], e[1], e[2]})
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names), matchers
}

// exposition is a running relay's /metrics, as series name -> the label
// sets of its samples.
type exposition map[string][]string

// scrape returns the union of the /metrics of two running relays: one
// node on the embedded store (which has the disk figures), and a node of
// a cluster, on PostgreSQL and NATS (which has the bus's figures).
func scrape(t *testing.T) exposition {
	t.Helper()
	ex := scrapeRelay(t, relaytest.Start(t, relaytest.Options{}))
	for name, labels := range scrapeRelay(t, startClusterNode(t)) {
		ex[name] = append(ex[name], labels...)
	}
	return ex
}

// startClusterNode starts a relay on a fresh PostgreSQL schema with a
// NATS bus (the servers the multi-node tests use:
// PETREL_TEST_POSTGRES_URL, PETREL_TEST_NATS_URL, or the local ones).
func startClusterNode(t *testing.T) *relaytest.Relay {
	t.Helper()
	natsURL := cmp.Or(os.Getenv("PETREL_TEST_NATS_URL"), "nats://127.0.0.1:4222")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st := pgtest.Open(t)
	subject := fmt.Sprintf("petrel_deploy_%d", os.Getpid())
	b, err := cluster.New(cluster.Options{URL: natsURL, Node: "deploy-test", Subject: subject, Feed: st, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b.Close(ctx)
	})
	r := relaytest.Start(t, relaytest.Options{Store: st, Bus: b})
	if err := b.Start(r.Relay.Publish); err != nil {
		t.Fatalf("NATS at %s (set PETREL_TEST_NATS_URL): %v", natsURL, err)
	}
	t.Cleanup(b.StopDelivery) // before the relay shuts down
	return r
}

func scrapeRelay(t *testing.T, r *relaytest.Relay) exposition {
	t.Helper()
	c := relaytest.Dial(t, r.URL)
	c.MustPublish(relaytest.NewKey("deploy").Note("scraped"))
	c.Req("q", `{"limit":1}`)
	resp, err := http.Get(r.HTTPURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	ex := exposition{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
			if line[i] == '{' {
				labels = line[i:strings.IndexByte(line, '}')]
			}
		}
		ex[name] = append(ex[name], labels)
	}
	return ex
}

// check fails for every name or matcher of expr (in what) that the
// relay's /metrics lacks.
func (ex exposition) check(t *testing.T, what, expr string) int {
	t.Helper()
	names, matchers := metricNames(expr)
	if len(names) == 0 {
		t.Errorf("%s: no metric found in %q", what, expr)
	}
	for _, n := range names {
		if _, ok := ex[n]; !ok && !slices.Contains(prometheusOwn, n) {
			t.Errorf("%s: %s is not in petrel's /metrics (%s)", what, n, expr)
		}
	}
	for _, m := range matchers {
		if slices.Contains(prometheusOwn, m[0]) || m[1] == "job" {
			continue
		}
		want := fmt.Sprintf(`%s="%s"`, m[1], m[2])
		if !slices.ContainsFunc(ex[m[0]], func(l string) bool { return strings.Contains(l, want) }) {
			t.Errorf("%s: no %s{%s} in petrel's /metrics", what, m[0], want)
		}
	}
	return len(names)
}

// TestAlertRules: deploy/prometheus/alerts.yml parses, every rule is
// complete, and every metric (and label value) it names is in a running
// relay's /metrics; promtool checks the PromQL when it is installed.
func TestAlertRules(t *testing.T) {
	raw, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	ex := scrape(t)
	var alerts []string
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v: want alert, expr and a summary", r)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q", r.Alert, s)
			}
			ex.check(t, r.Alert, r.Expr)
			alerts = append(alerts, r.Alert)
		}
	}
	// What the issue asks the rules to cover.
	for _, want := range []string{"PetrelRefusalRateHigh", "PetrelOKLatencyHigh", "PetrelVerifyQueueNearFull", "PetrelStoreErrors", "PetrelDiskLow"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no %s rule", want)
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool not installed (Debian: prometheus): the rules' PromQL was not checked by Prometheus itself")
		return
	}
	if out, err := exec.Command(promtool, "check", "rules", "prometheus/alerts.yml").CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}

// TestGrafanaDashboard: deploy/grafana/petrel.json is a dashboard whose
// every query names metrics (and label values) a running relay's /metrics
// has, over the dashboard's datasource variable.
func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile("grafana/petrel.json")
	if err != nil {
		t.Fatal(err)
	}
	type target struct {
		Expr string `json:"expr"`
	}
	type panel struct {
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []target `json:"targets"`
		Panels  []panel  `json:"panels"`
	}
	var dash struct {
		Title      string  `json:"title"`
		UID        string  `json:"uid"`
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	if dash.Title == "" || dash.UID == "" {
		t.Fatalf("dashboard title %q uid %q", dash.Title, dash.UID)
	}
	ex := scrape(t)
	queries := 0
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: datasource %v, want the ${datasource} variable", p.Title, p.Datasource)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				ex.check(t, "panel "+p.Title, tg.Expr)
				queries++
			}
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Definition != "" {
			ex.check(t, "variable "+v.Name, strings.NewReplacer("label_values(", "", ", instance)", "{}").Replace(v.Definition))
		}
	}
	if queries < 20 {
		t.Fatalf("%d queries, want the dashboard's whole set", queries)
	}
}

// TestDeployEnvironment: the PETREL_ settings the deploy files set (the
// systemd unit, the Dockerfile, compose.yaml) are settings petrel knows,
// with values it takes.
func TestDeployEnvironment(t *testing.T) {
	var env []string
	unit, err := os.ReadFile("petrel.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^Environment=(PETREL_\S+)$`).FindAllStringSubmatch(string(unit), -1) {
		env = append(env, m[1])
	}
	docker, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(PETREL_[A-Z_]+=\S+)`).FindAllStringSubmatch(string(docker), -1) {
		env = append(env, m[1])
	}
	raw, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatal(err)
	}
	vars := regexp.MustCompile(`\$\{[^}]*\}`)
	for k, v := range compose.Services["petrel"].Environment {
		env = append(env, k+"="+vars.ReplaceAllString(v, "relay.example.com"))
	}
	if len(env) < 5 {
		t.Fatalf("found %d PETREL_ settings in the deploy files: %v", len(env), env)
	}
	c, err := config.Load("", env)
	if err != nil {
		t.Fatalf("the deploy files' settings %v: %v", env, err)
	}
	if c.Store.Path != "/var/lib/petrel/data" || len(c.Server.TrustedProxies) == 0 {
		t.Fatalf("settings %v gave store.path %q, trusted_proxies %v", env, c.Store.Path, c.Server.TrustedProxies)
	}
}
