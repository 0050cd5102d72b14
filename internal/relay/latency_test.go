package relay

import (
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestQuantile(t *testing.T) {
	bounds := []float64{0.001, 0.002, 0.004, 0.008}
	f := func(q float64, cum []uint64, count uint64, want float64) {
		t.Helper()
		if got := Quantile(q, bounds, cum, count); math.Abs(got-want) > 1e-12 {
			t.Errorf("Quantile(%v, %v, %d) = %v, want %v", q, cum, count, got, want)
		}
	}
	f(0.5, []uint64{0, 0, 0, 0}, 0, 0)                 // nothing observed
	f(0.5, []uint64{10, 10, 10, 10}, 10, 0.0005)       // half way into the first bucket, from 0
	f(0.5, []uint64{0, 10, 10, 10}, 10, 0.0015)        // half way into (0.001, 0.002]
	f(0.99, []uint64{50, 100, 100, 100}, 100, 0.00198) // 49.5 of 50 into (0.001, 0.002]
	f(0.99, []uint64{0, 0, 0, 0}, 10, 0.008)           // in +Inf: the highest finite bound
	f(0.5, []uint64{5, 5, 10, 10}, 10, 0.001)          // rank 5 is the first bucket's top
}

func TestSummarize(t *testing.T) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x_seconds", Buckets: []float64{0.001, 0.01, 0.1}})
	for range 90 {
		h.Observe(0.0005)
	}
	for range 10 {
		h.Observe(0.05)
	}
	s := summarize(h)
	if s.Count != 100 || len(s.Bounds) != 3 || s.Cumulative[0] != 90 || s.Cumulative[2] != 100 {
		t.Fatalf("summary %+v", s)
	}
	if math.Abs(s.SumSeconds-(90*0.0005+10*0.05)) > 1e-9 {
		t.Fatalf("sum %v", s.SumSeconds)
	}
	if s.P50 <= 0 || s.P50 > 0.001 || s.P99 <= 0.01 || s.P99 > 0.1 {
		t.Fatalf("p50 %v p99 %v", s.P50, s.P99)
	}
}
