package relay

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// LatencySummary is a latency histogram's state in /stats: the same
// figures /metrics gives as petrel_<name>_seconds_bucket, _sum and
// _count, plus the median and 99th percentile since start, estimated the
// way Prometheus's histogram_quantile does (linear within a bucket).
// A reader that wants a recent percentile takes two snapshots and
// applies Quantile to the difference of their bucket counts.
type LatencySummary struct {
	Count      uint64  `json:"count"`
	SumSeconds float64 `json:"sum_seconds"`
	P50        float64 `json:"p50_seconds"`
	P99        float64 `json:"p99_seconds"`
	// Bounds are the buckets' upper bounds in seconds, ascending (the
	// last bucket, +Inf, is implicit: its count is Count); Cumulative[i]
	// counts the observations <= Bounds[i].
	Bounds     []float64 `json:"bucket_bounds_seconds"`
	Cumulative []uint64  `json:"bucket_counts"`
}

// OKStageNames are the stages of OKStages, in the order an event passes
// them: verify, from the EVENT's arrival to its hand-over to the store
// (the verify queue, the signature check, the wait for earlier batches'
// turn); store, from the hand-over to the commit's reply (the writer's
// queue, the batch, the WAL sync); dispatch, from the reply to the OK
// queued (the dispatcher's queue).
var OKStageNames = [...]string{"verify", "store", "dispatch"}

const (
	okStageVerify = iota
	okStageStore
	okStageDispatch
)

// summarize reads h's state. It allocates; call it on cold paths only.
func summarize(h prometheus.Histogram) LatencySummary {
	var m dto.Metric
	if err := h.Write(&m); err != nil || m.Histogram == nil {
		return LatencySummary{}
	}
	hs := m.Histogram
	s := LatencySummary{Count: hs.GetSampleCount(), SumSeconds: hs.GetSampleSum()}
	for _, b := range hs.Bucket {
		if math.IsInf(b.GetUpperBound(), 1) {
			continue
		}
		s.Bounds = append(s.Bounds, b.GetUpperBound())
		s.Cumulative = append(s.Cumulative, b.GetCumulativeCount())
	}
	s.P50 = Quantile(0.5, s.Bounds, s.Cumulative, s.Count)
	s.P99 = Quantile(0.99, s.Bounds, s.Cumulative, s.Count)
	return s
}

// Quantile estimates the q-quantile (0 < q < 1) of count observations
// held in buckets with upper bounds bounds and cumulative counts cum (the
// +Inf bucket implicit, holding count), as Prometheus's
// histogram_quantile does: linear interpolation within the bucket the
// rank falls in, the first bucket starting at 0, and the highest finite
// bound when the rank falls in the +Inf bucket. It returns 0 when count
// is 0. The dashboard's script (dashboard/app.js, quantile) is the same
// function over the difference of two snapshots.
func Quantile(q float64, bounds []float64, cum []uint64, count uint64) float64 {
	if count == 0 || len(bounds) == 0 {
		return 0
	}
	rank := q * float64(count)
	lower, below := 0.0, uint64(0)
	for i, ub := range bounds {
		if float64(cum[i]) >= rank {
			in := cum[i] - below
			if in == 0 {
				return ub
			}
			return lower + (ub-lower)*(rank-float64(below))/float64(in)
		}
		lower, below = ub, cum[i]
	}
	return bounds[len(bounds)-1]
}
