package server_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/server"
	"github.com/petrel-relay/petrel/internal/store/pebble"
)

// metricsServer returns a server (not listening) over a relay on a
// pebble store with write-ahead log spares, so that their metrics are
// gathered too (unless the directory is on a tmpfs), and the pedantic
// registry its metrics are in.
func metricsServer(t *testing.T) (*pebble.Store, *server.Server, *prometheus.Registry) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := pebble.Open(pebble.Options{Path: t.TempDir(), WALSpares: 1, MemTableSize: 1 << 20, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rl, err := relay.New(relay.Config{}, relay.Options{Store: st, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rl.Shutdown(context.Background()) })
	reg := prometheus.NewPedanticRegistry()
	srv, err := server.New(server.Config{Listen: "127.0.0.1:0"}, server.Options{Relay: rl, Logger: log, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	return st, srv, reg
}

// TestConfigReloadStats: the reloads petrel serve notes are in /stats
// (config_reloads) and /metrics (petrel_config_reloads_total{result},
// petrel_config_last_reload_successful, 1 until a reload is refused).
func TestConfigReloadStats(t *testing.T) {
	_, srv, reg := metricsServer(t)
	metric := func(name, label string) float64 {
		t.Helper()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.GetMetric() {
				if label != "" && (len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != label) {
					continue
				}
				if c := m.GetCounter(); c != nil {
					return c.GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
		t.Fatalf("%s{%s} not gathered", name, label)
		return 0
	}
	if st := srv.StatsDoc().ConfigReloads; st != (server.ReloadStats{}) || metric("petrel_config_last_reload_successful", "") != 1 {
		t.Fatalf("before any reload: %+v", st)
	}
	srv.NoteReload(true)
	srv.NoteReload(true)
	srv.NoteReload(false)
	st := srv.StatsDoc().ConfigReloads
	if st.Applied != 2 || st.Refused != 1 || !st.LastRefused || st.Last.IsZero() {
		t.Fatalf("after two reloads applied and one refused: %+v", st)
	}
	if metric("petrel_config_reloads_total", "applied") != 2 || metric("petrel_config_reloads_total", "refused") != 1 ||
		metric("petrel_config_last_reload_successful", "") != 0 {
		t.Fatal("/metrics does not show the reloads")
	}
	srv.NoteReload(true)
	if srv.StatsDoc().ConfigReloads.LastRefused || metric("petrel_config_last_reload_successful", "") != 1 {
		t.Fatal("an applied reload after a refused one still shows the refusal")
	}
}

// TestMetricsDescribed gathers the relay's metrics through a pedantic
// registry, which fails when a collected metric was not described or a
// description does not match: every petrel_ metric must be listed by
// Describe.
func TestMetricsDescribed(t *testing.T) {
	st, _, reg := metricsServer(t)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	n := 0
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "petrel_") {
			n++
		}
	}
	if st.Stats().WALSpares == 1 {
		names := map[string]bool{}
		for _, f := range fams {
			names[f.GetName()] = true
		}
		for _, name := range []string{"petrel_store_wal_spares", "petrel_store_wal_spares_ready", "petrel_store_wal_spares_used_total", "petrel_store_wal_logs_unspared_total"} {
			if !names[name] {
				t.Errorf("%s not gathered from a store with spares", name)
			}
		}
	}
	if n < 30 {
		t.Fatalf("gathered %d petrel_ metric families, want the relay's whole set", n)
	}
	// Prometheus's naming rules: the unit last and plural (before
	// _total on a counter), base units, _total only on counters.
	var petrel []*dto.MetricFamily
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "petrel_") {
			petrel = append(petrel, f)
		}
	}
	problems, err := promlint.NewWithMetricFamilies(petrel).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
