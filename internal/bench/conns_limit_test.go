package bench

import (
	"errors"
	"fmt"
	"testing"
)

// TestConnsLiveEventsLimit: a conns worker tracks each subscription's
// liveness events in one 64-bit mask, so it takes at most maxLiveEvents:
// 64 are accepted, 65 refused as bad options.
func TestConnsLiveEventsLimit(t *testing.T) {
	ids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%064x", i+1)
		}
		return out
	}
	g, err := newConnsGroup(connsSpec{EventIDs: ids(maxLiveEvents)})
	if err != nil {
		t.Fatalf("%d liveness events: %v", maxLiveEvents, err)
	}
	if len(g.targets) != maxLiveEvents {
		t.Fatalf("%d targets, want %d", len(g.targets), maxLiveEvents)
	}
	if _, err := newConnsGroup(connsSpec{EventIDs: ids(maxLiveEvents + 1)}); !errors.Is(err, ErrOptions) {
		t.Fatalf("%d liveness events: %v, want ErrOptions", maxLiveEvents+1, err)
	}
}
