package bench

import (
	"strings"
	"testing"
	"time"
)

// step builds a ladder step for the table tests.
func step(offered, achieved float64, p99ms, errRate float64, behind bool) LadderStep {
	s := LadderStep{Offered: offered, Achieved: achieved, Sent: 1000, Accepted: int64(1000 * (1 - errRate)),
		ErrorRate: errRate, Behind: behind}
	s.Latency.P99 = p99ms
	return s
}

func TestJudge(t *testing.T) {
	f := func(s LadderStep, want string) {
		t.Helper()
		steps := []LadderStep{s}
		Judge(steps, 15*time.Millisecond, 0.001)
		if steps[0].Verdict != want {
			t.Errorf("step %+v: verdict %q, want %q", s, steps[0].Verdict, want)
		}
	}
	f(step(1000, 1000, 3, 0, false), "pass")
	f(step(1000, 1000, 15, 0.001, false), "pass") // bounds are inclusive
	f(step(1000, 1000, 15.01, 0, false), "queueing")
	f(step(1000, 1000, 3, 0, true), "behind")
	f(step(1000, 1000, 300, 0.5, true), "behind")
	limited := step(1000, 800, 3, 0.2, false)
	limited.RateLimited = 200
	f(limited, "refusing")
	other := step(1000, 800, 3, 0.2, false)
	other.Refused = map[string]int64{"invalid": 200}
	f(other, "errors")
	missing := step(1000, 1000, 3, 0.01, false)
	missing.Missing = 10
	missing.RateLimited = 10
	f(missing, "errors")
	f(LadderStep{Offered: 1000}, "errors") // nothing sent
	cut := step(1000, 500, 300, 0.5, false)
	cut.Missing, cut.Cut = 500, true
	f(cut, "timeout") // the run's timeout, not the relay
}

func TestKneeAndCapacity(t *testing.T) {
	f := func(name string, steps []LadderStep, wantKnee int, wantCap float64, wantCapIdx int) {
		t.Helper()
		Judge(steps, 15*time.Millisecond, 0.001)
		knee, capacity, capIdx := KneeAndCapacity(steps, 0.001)
		if knee != wantKnee || capacity != wantCap || capIdx != wantCapIdx {
			t.Errorf("%s: knee %d capacity %v (step %d), want %d %v (%d)", name, knee, capacity, capIdx, wantKnee, wantCap, wantCapIdx)
		}
	}
	f("all pass", []LadderStep{
		step(1000, 1000, 2, 0, false),
		step(2000, 2000, 3, 0, false),
		step(4000, 3990, 9, 0, false),
	}, 2, 3990, 2)
	f("queueing then refusing", []LadderStep{
		step(1000, 1000, 2, 0, false),
		step(2000, 2000, 8, 0, false),
		step(4000, 3500, 40, 0, false), // queueing: no errors, counts for capacity
		step(8000, 3000, 900, 0.4, false),
	}, 1, 3500, 2)
	f("a failing lower step caps the knee", []LadderStep{
		step(1000, 1000, 2, 0, false),
		step(2000, 2000, 30, 0, false), // fails on latency
		step(4000, 4000, 5, 0, false),  // passes, but a lower step failed
	}, 0, 4000, 2)
	f("lowest fails", []LadderStep{
		step(1000, 990, 20, 0, false),
		step(2000, 1900, 5, 0.01, false),
	}, -1, 990, 0)
	f("excluded steps are skipped", []LadderStep{
		step(1000, 1000, 2, 0, false),
		step(2000, 2000, 2, 0, true), // generator behind: neither passes nor fails
		step(4000, 4000, 4, 0, false),
		step(8000, 9000, 4, 0, true), // behind: its rate does not count
	}, 2, 4000, 2)
	cut := step(8000, 7000, 4, 0, false)
	cut.Cut = true
	f("a step the timeout cut is skipped", []LadderStep{
		step(1000, 1000, 2, 0, false),
		step(2000, 2000, 3, 0, false),
		cut, // neither a failure nor capacity
	}, 1, 2000, 1)
	f("errors exclude from capacity", []LadderStep{
		step(1000, 1000, 2, 0, false),
		step(2000, 1999, 2, 0.002, false),
	}, 0, 1000, 0)
	f("empty", nil, -1, 0, -1)
	f("all behind", []LadderStep{step(1000, 1000, 2, 0, true)}, -1, 0, -1)
}

func TestLadderTable(t *testing.T) {
	steps := []LadderStep{step(1000, 1000, 2, 0, false), step(2000, 1500, 40, 0, false)}
	steps[0].EventsPerCommit = 2.5
	steps[0].RelayOKP99Ms = 12.8
	steps[1].RelayOKP99Ms, steps[1].RelayOKP99Above = 3276.8, true
	steps[1].Store = &StepStore{Flushes: 2, Compactions: 7, WriteStalls: 1, WriteStallMs: 41.6}
	Judge(steps, 15*time.Millisecond, 0.001)
	knee, capacity, capIdx := KneeAndCapacity(steps, 0.001)
	l := &LadderResult{Steps: steps, KneeIndex: knee, Knee: &steps[knee], Capacity: capacity, CapacityIndex: capIdx, MaxP99Ms: 15, MaxErrorRate: 0.001}
	out := l.table()
	for _, want := range []string{"<- knee", "<- capacity", "queueing", "knee: 1,000 events/s", "capacity: 1,500", "ev/commit", " 2.50 ", "relay p99 <=", " 12.80 ms ", " > 3277 ms ", "flush/compact/stall ms", " 2/7/42 "} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
