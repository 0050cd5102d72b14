package relay

import (
	"testing"

	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// TestRegistryShrinks: after a peak of connections has gone, the session
// registry does not keep the peak's capacity, and every remaining session
// is still registered at its slot.
func TestRegistryShrinks(t *testing.T) {
	r, err := New(Config{}, Options{Store: storetest.NewModel()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(t.Context()) })
	const peak = 100_000
	sessions := make([]*Session, peak)
	for i := range sessions {
		sessions[i] = r.NewSession(&sinkTransport{}, "192.0.2.1")
	}
	peakCap := cap(r.sessions)
	keep := 100
	for _, s := range sessions[keep:] {
		s.Closed()
	}
	r.regMu.Lock()
	defer r.regMu.Unlock()
	if len(r.sessions) != keep {
		t.Fatalf("%d sessions registered, want %d", len(r.sessions), keep)
	}
	if c := cap(r.sessions); c > registryShrinkMin {
		t.Fatalf("registry capacity %d after %d of %d sessions closed (peak capacity %d), want at most %d", c, peak-keep, peak, peakCap, registryShrinkMin)
	}
	for i, s := range sessions[:keep] {
		if int(s.slot) >= len(r.sessions) || r.sessions[s.slot] != s {
			t.Fatalf("session %d not at its slot %d", i, s.slot)
		}
	}
}

// TestShrinkRegistryLimits: the registry's array is kept at
// registryShrinkMin and at a quarter in use, and shrunk one slot past
// either.
func TestShrinkRegistryLimits(t *testing.T) {
	list := func(n, c int) []*Session { return make([]*Session, n, c) }
	for _, tc := range []struct {
		n, c   int
		shrunk bool
	}{
		{0, registryShrinkMin, false},       // at the floor
		{0, registryShrinkMin + 1, true},    // one past it
		{1024, 4096, false},                 // a quarter in use
		{1023, 4096, true},                  // one under a quarter
		{registryShrinkMin, 8 * 1024, true}, // to twice the length
	} {
		got := shrinkRegistry(list(tc.n, tc.c))
		if len(got) != tc.n {
			t.Fatalf("len %d of %d: shrunk to length %d", tc.n, tc.c, len(got))
		}
		if (cap(got) < tc.c) != tc.shrunk {
			t.Fatalf("len %d of %d: capacity %d, want shrunk %v", tc.n, tc.c, cap(got), tc.shrunk)
		}
		if tc.shrunk && cap(got) != max(2*tc.n, registryShrinkMin) {
			t.Fatalf("len %d of %d: new capacity %d, want %d", tc.n, tc.c, cap(got), max(2*tc.n, registryShrinkMin))
		}
	}
}
