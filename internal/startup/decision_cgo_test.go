//go:build linux && cgo

package startup

import (
	"os"
	"testing"
)

// TestPrefaultDecision: the test binary's own constructor decided as the
// rule says: as PETREL_PREFAULT says when set to 0 or 1, else by the
// first touch it timed (more than FaultCostlyNanos: map).
func TestPrefaultDecision(t *testing.T) {
	ns := FaultNanos()
	switch v := os.Getenv("PETREL_PREFAULT"); v {
	case "0", "1":
		if Prefaulted() != (v == "1") || ns != 0 {
			t.Fatalf("PETREL_PREFAULT=%s: prefaulted %v, a fault timed at %d ns; want %v and none timed", v, Prefaulted(), ns, v == "1")
		}
		return
	}
	if ns <= 0 {
		t.Fatalf("no first touch timed (%d ns)", ns)
	}
	if want := ns > FaultCostlyNanos; Prefaulted() != want {
		t.Fatalf("a first touch took %d ns (threshold %d): prefaulted %v, want %v", ns, FaultCostlyNanos, Prefaulted(), want)
	}
	t.Logf("a first touch took %d ns here: prefaulted %v", ns, Prefaulted())
}
