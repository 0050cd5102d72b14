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

// TestMetricsDescribed gathers the relay's metrics through a pedantic
// registry, which fails when a collected metric was not described or a
// description does not match: every petrel_ metric must be listed by
// Describe.
func TestMetricsDescribed(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// With write-ahead log spares, so that their metrics are gathered
	// too (unless the directory is on a tmpfs).
	st, err := pebble.Open(pebble.Options{Path: t.TempDir(), WALSpares: 1, MemTableSize: 1 << 20, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rl, err := relay.New(relay.Config{}, relay.Options{Store: st, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Shutdown(context.Background())
	reg := prometheus.NewPedanticRegistry()
	if _, err := server.New(server.Config{Listen: "127.0.0.1:0"}, server.Options{Relay: rl, Logger: log, Registry: reg}); err != nil {
		t.Fatal(err)
	}
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
