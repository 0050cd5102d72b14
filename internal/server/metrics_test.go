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
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/server"
)

// TestMetricsDescribed gathers the relay's metrics through a pedantic
// registry, which fails when a collected metric was not described or a
// description does not match: every petrel_ metric must be listed by
// Describe.
func TestMetricsDescribed(t *testing.T) {
	st, err := relaytest.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
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
