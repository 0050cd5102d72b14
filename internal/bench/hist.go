package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"time"
)

// Hist is a latency histogram with log-linear buckets (as HDR histograms
// do): values below 256 ns are counted exactly, larger values in buckets
// 1/128 of their magnitude wide, so a percentile is within 0.4% of the
// exact nearest-rank value (it reports the bucket's midpoint, clamped to
// the recorded min and max). Memory grows with the number of distinct
// magnitudes seen (2 KiB each), not with the number of samples.
//
// A Hist is not safe for concurrent use; see LockedHist.
type Hist struct {
	rows  [hRows]*[hCols]uint64
	n     uint64
	sum   float64
	min   int64
	max   int64
	valid bool
}

const (
	hBits = 8
	hCols = 1 << hBits // 256
	hRows = 64 - hBits + 1
)

// bucket returns the row and column of v (v >= 0).
func bucket(v int64) (row, col int) {
	u := uint64(v)
	if u < hCols {
		return 0, int(u)
	}
	shift := bits.Len64(u) - hBits // >= 1
	return shift, int(u >> shift)  // col in [128, 255]
}

// bucketRange returns the smallest and largest value of a bucket.
func bucketRange(row, col int) (lo, hi int64) {
	if row == 0 {
		return int64(col), int64(col)
	}
	lo = int64(col) << row
	return lo, lo + (int64(1) << row) - 1
}

// Record adds one sample. Negative values are recorded as 0.
func (h *Hist) Record(v int64) {
	if v < 0 {
		v = 0
	}
	r, c := bucket(v)
	if h.rows[r] == nil {
		h.rows[r] = new([hCols]uint64)
	}
	h.rows[r][c]++
	h.n++
	h.sum += float64(v)
	if !h.valid || v < h.min {
		h.min = v
	}
	if !h.valid || v > h.max {
		h.max = v
	}
	h.valid = true
}

// RecordDuration adds one sample of d in nanoseconds.
func (h *Hist) RecordDuration(d time.Duration) { h.Record(int64(d)) }

// Merge adds every sample of o to h.
func (h *Hist) Merge(o *Hist) {
	if o == nil || o.n == 0 {
		return
	}
	for r := range o.rows {
		if o.rows[r] == nil {
			continue
		}
		if h.rows[r] == nil {
			h.rows[r] = new([hCols]uint64)
		}
		for c, k := range o.rows[r] {
			h.rows[r][c] += k
		}
	}
	if !h.valid || o.min < h.min {
		h.min = o.min
	}
	if !h.valid || o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	h.sum += o.sum
	h.valid = true
}

// Count returns the number of samples.
func (h *Hist) Count() uint64 { return h.n }

// Max returns the largest sample (0 when empty).
func (h *Hist) Max() int64 { return h.max }

// Min returns the smallest sample (0 when empty).
func (h *Hist) Min() int64 { return h.min }

// Mean returns the mean sample (0 when empty).
func (h *Hist) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100): the
// smallest recorded value v such that at least p% of samples are <= v, to
// the bucket precision described on Hist. It returns 0 when empty.
func (h *Hist) Percentile(p float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := NearestRank(p, int(h.n))
	var seen uint64
	for r := range h.rows {
		row := h.rows[r]
		if row == nil {
			continue
		}
		for c, k := range row {
			if k == 0 {
				continue
			}
			seen += k
			if seen >= uint64(rank) {
				lo, hi := bucketRange(r, c)
				v := lo + (hi-lo)/2
				return min(max(v, h.min), h.max)
			}
		}
	}
	return h.max
}

// NearestRank returns the 1-based rank of the p-th percentile of n sorted
// samples: ceil(p/100 * n), at least 1 and at most n.
func NearestRank(p float64, n int) int {
	r := int(math.Ceil(p / 100 * float64(n)))
	return min(max(r, 1), n)
}

// Summary is a histogram's digest in milliseconds.
type Summary struct {
	Count uint64  `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
	Mean  float64 `json:"mean_ms"`
}

// Summary digests the histogram of nanosecond samples.
func (h *Hist) Summary() Summary {
	ms := func(v float64) float64 { return math.Round(v/1e3) / 1e3 }
	return Summary{
		Count: h.n,
		P50:   ms(float64(h.Percentile(50))),
		P90:   ms(float64(h.Percentile(90))),
		P99:   ms(float64(h.Percentile(99))),
		Max:   ms(float64(h.max)),
		Mean:  ms(h.Mean()),
	}
}

// histJSON is the wire form of a Hist (used between the conns scenario's
// processes): sparse buckets as [row, col, count] triples.
type histJSON struct {
	Buckets [][3]uint64 `json:"b"`
	Sum     float64     `json:"sum"`
	Min     int64       `json:"min"`
	Max     int64       `json:"max"`
}

// MarshalJSON encodes the histogram losslessly.
func (h *Hist) MarshalJSON() ([]byte, error) {
	j := histJSON{Buckets: [][3]uint64{}, Sum: h.sum, Min: h.min, Max: h.max}
	for r, row := range h.rows {
		if row == nil {
			continue
		}
		for c, k := range row {
			if k != 0 {
				j.Buckets = append(j.Buckets, [3]uint64{uint64(r), uint64(c), k})
			}
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes what MarshalJSON produced, replacing h's contents.
func (h *Hist) UnmarshalJSON(b []byte) error {
	var j histJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*h = Hist{}
	for _, t := range j.Buckets {
		r, c, k := t[0], t[1], t[2]
		if r >= hRows || c >= hCols || (r > 0 && c < hCols/2) {
			return fmt.Errorf("bench: histogram bucket %d/%d out of range", r, c)
		}
		if h.rows[r] == nil {
			h.rows[r] = new([hCols]uint64)
		}
		h.rows[r][c] += k
		h.n += k
	}
	if h.n > 0 {
		h.sum, h.min, h.max, h.valid = j.Sum, j.Min, j.Max, true
	}
	return nil
}

// LockedHist is a Hist guarded by a mutex, safe for concurrent use.
type LockedHist struct {
	mu sync.Mutex
	h  Hist
}

// Record adds one sample.
func (l *LockedHist) Record(v int64) {
	l.mu.Lock()
	l.h.Record(v)
	l.mu.Unlock()
}

// Snapshot returns a copy of the histogram.
func (l *LockedHist) Snapshot() *Hist {
	l.mu.Lock()
	defer l.mu.Unlock()
	var c Hist
	c.Merge(&l.h)
	return &c
}
