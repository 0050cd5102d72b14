//go:build linux && cgo

package startup

import (
	"os"
	"testing"
)

// TestPrefaultDecision: the test binary's own constructor timed a first
// touch unless PETREL_PREFAULT=0 or 1 decided, and decided by the rule.
func TestPrefaultDecision(t *testing.T) {
	v, set := os.LookupEnv("PETREL_PREFAULT")
	ns, forced := FaultNanos(), set && (v == "0" || v == "1")
	if forced != (ns == 0) {
		t.Fatalf("PETREL_PREFAULT %q (set %v): a first touch timed at %d ns", v, set, ns)
	}
	if want := decide(v, set, ns); Prefaulted() != want {
		t.Fatalf("PETREL_PREFAULT %q (set %v), a first touch of %d ns (threshold %d): prefaulted %v, want %v", v, set, ns, FaultCostlyNanos, Prefaulted(), want)
	}
	t.Logf("a first touch took %d ns here: prefaulted %v", ns, Prefaulted())
}

// TestPrefaultRule: the constructor's rule at its edges: a first touch
// of exactly FaultCostlyNanos does not map, one nanosecond more does;
// an untimed touch (0) maps, as before the rule; PETREL_PREFAULT=0 and 1
// decide whatever the touch took, any other value is as unset.
func TestPrefaultRule(t *testing.T) {
	for _, c := range []struct {
		env  string
		set  bool
		ns   int64
		want bool
	}{
		{"", false, FaultCostlyNanos, false},
		{"", false, FaultCostlyNanos + 1, true},
		{"", false, 1, false},
		{"", false, 0, true},
		{"0", true, 10 * FaultCostlyNanos, false},
		{"1", true, 1, true},
		{"", true, FaultCostlyNanos + 1, true},
		{"yes", true, FaultCostlyNanos, false},
		{"10", true, FaultCostlyNanos, false},
	} {
		if got := decide(c.env, c.set, c.ns); got != c.want {
			t.Errorf("PETREL_PREFAULT %q (set %v), a touch of %d ns: map %v, want %v", c.env, c.set, c.ns, got, c.want)
		}
	}
}
