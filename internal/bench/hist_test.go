package bench

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// exactPercentile is the nearest-rank percentile of samples.
func exactPercentile(samples []int64, p float64) int64 {
	s := slices.Clone(samples)
	slices.Sort(s)
	return s[NearestRank(p, len(s))-1]
}

func TestNearestRank(t *testing.T) {
	f := func(p float64, n, want int) {
		t.Helper()
		if got := NearestRank(p, n); got != want {
			t.Errorf("NearestRank(%v, %d) = %d, want %d", p, n, got, want)
		}
	}
	f(50, 1, 1)
	f(99, 1, 1)
	f(50, 2, 1)
	f(50, 3, 2)
	f(50, 4, 2)
	f(99, 100, 99)
	f(99, 101, 100)
	f(100, 7, 7)
	f(0.001, 10, 1)
}

func TestHistPercentileExactSmall(t *testing.T) {
	// Values below 256 are counted exactly.
	var h Hist
	samples := []int64{5, 1, 200, 7, 7, 3, 255, 0, 100, 42}
	for _, v := range samples {
		h.Record(v)
	}
	for _, p := range []float64{1, 10, 25, 50, 75, 90, 99, 100} {
		if got, want := h.Percentile(p), exactPercentile(samples, p); got != want {
			t.Errorf("p%v = %d, want %d", p, got, want)
		}
	}
	if h.Count() != 10 || h.Min() != 0 || h.Max() != 255 {
		t.Errorf("count %d min %d max %d", h.Count(), h.Min(), h.Max())
	}
	if got := h.Mean(); got != 62 {
		t.Errorf("mean %v, want 62", got)
	}
}

func TestHistPercentileAccuracy(t *testing.T) {
	f := func(name string, gen func(r *rand.Rand) int64) {
		t.Helper()
		r := rand.New(rand.NewPCG(1, 2))
		var h Hist
		samples := make([]int64, 20000)
		for i := range samples {
			samples[i] = gen(r)
			h.Record(samples[i])
		}
		for _, p := range []float64{50, 90, 99, 99.9} {
			got, want := h.Percentile(p), exactPercentile(samples, p)
			if err := math.Abs(float64(got-want)) / float64(want); err > 1.0/256 {
				t.Errorf("%s p%v = %d, exact %d (error %.4f)", name, p, got, want, err)
			}
		}
		if h.Max() != slices.Max(samples) || h.Min() != slices.Min(samples) {
			t.Errorf("%s: min/max differ", name)
		}
	}
	f("uniform 1ms-10ms", func(r *rand.Rand) int64 { return 1e6 + r.Int64N(9e6) })
	f("exponential 2ms", func(r *rand.Rand) int64 { return 1000 + int64(r.ExpFloat64()*2e6) })
	f("bimodal", func(r *rand.Rand) int64 {
		if r.IntN(100) < 95 {
			return 300_000 + r.Int64N(50_000)
		}
		return 40e6 + r.Int64N(10e6)
	})
	f("wide", func(r *rand.Rand) int64 { return int64(math.Exp(r.Float64()*25)) + 1 })
}

func TestHistEmptyAndNegative(t *testing.T) {
	var h Hist
	if h.Percentile(50) != 0 || h.Mean() != 0 || h.Summary().Count != 0 {
		t.Error("empty histogram is not all zero")
	}
	h.Record(-5)
	if h.Percentile(50) != 0 || h.Min() != 0 {
		t.Error("negative sample not recorded as 0")
	}
}

func TestHistMergeAndJSON(t *testing.T) {
	var a, b, all Hist
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 5000; i++ {
		v := r.Int64N(1e9)
		if i%2 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
		all.Record(v)
	}
	a.Merge(&b)
	a.Merge(nil)
	a.Merge(&Hist{})
	for _, p := range []float64{1, 50, 99, 100} {
		if a.Percentile(p) != all.Percentile(p) {
			t.Errorf("merged p%v = %d, want %d", p, a.Percentile(p), all.Percentile(p))
		}
	}
	j, err := json.Marshal(&a)
	if err != nil {
		t.Fatal(err)
	}
	var c Hist
	if err := json.Unmarshal(j, &c); err != nil {
		t.Fatal(err)
	}
	if c.Summary() != all.Summary() {
		t.Errorf("JSON round trip: %+v, want %+v", c.Summary(), all.Summary())
	}
	if err := json.Unmarshal([]byte(`{"b":[[99,1,1]]}`), &c); err == nil {
		t.Error("out-of-range bucket accepted")
	}
}

func FuzzHistUnmarshal(f *testing.F) {
	var h Hist
	h.Record(12345)
	h.Record(7)
	seed, _ := json.Marshal(&h)
	f.Add(seed)
	f.Add([]byte(`{"b":[[0,255,3],[1,128,1]],"sum":5,"min":1,"max":300}`))
	f.Add([]byte(`{"b":[[56,255,1]]}`))
	f.Add([]byte(`{"b":[[1,5,1]]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var h Hist
		if err := json.Unmarshal(data, &h); err != nil {
			return
		}
		h.Summary() // must not panic
		var m Hist
		m.Merge(&h)
		if m.Count() != h.Count() {
			t.Fatalf("merge count %d, want %d", m.Count(), h.Count())
		}
	})
}

func BenchmarkHistRecord(b *testing.B) {
	var h Hist
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		h.Record(int64(i&0xfffff) * 997)
	}
}
