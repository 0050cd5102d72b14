package nbio

import (
	"testing"
	"time"
)

// TestStopRightAfterStart: an engine stopped as soon as Start returns,
// before its pollers' goroutines have begun their loops (what nbhttp's
// Start does when it cannot listen), stops: Stop returns. Each round
// stops several pollers, so that some are caught before their loop
// starts.
func TestStopRightAfterStart(t *testing.T) {
	for round := 0; round < 20; round++ {
		g := NewEngine(Config{NPoller: 4})
		stopped := make(chan error, 1)
		go func() {
			err := g.Start()
			if err == nil {
				g.Stop()
			}
			stopped <- err
		}()
		select {
		case err := <-stopped:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second): // a hang detector, not a timing
			t.Fatalf("round %d: Stop right after Start did not return", round)
		}
	}
}
