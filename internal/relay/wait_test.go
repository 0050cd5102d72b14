package relay

import (
	"testing"
	"time"
)

// TestWaitValve: the valve refuses at a wait just past its bound, not at
// the bound, from either of its measures (the last answer's sojourn, the
// time since the last answer while events wait), never with nothing in
// flight, and forgets both once an answer empties the pipeline.
func TestWaitValve(t *testing.T) {
	const bound = 250 * time.Millisecond
	t0 := time.Unix(1_800_000_000, 0)
	v := waitValve{max: bound}
	if v.over(t0, 5) {
		t.Fatal("over before any answer")
	}
	// Sojourn: answered after exactly the bound, one still in flight.
	v.answered(t0, t0.Add(bound), 1)
	at := t0.Add(bound)
	if v.over(at, 1) {
		t.Fatalf("sojourn at the bound: over (wait %v)", v.wait(at))
	}
	v.answered(t0, t0.Add(bound+1), 1)
	at = t0.Add(bound + 1)
	if !v.over(at, 1) {
		t.Fatalf("sojourn just past the bound: not over (wait %v)", v.wait(at))
	}
	if v.over(at, 0) {
		t.Fatal("over with nothing in flight")
	}
	// Stall: a quick answer left one in flight, then nothing for the
	// bound, then for just past it.
	last := t0.Add(time.Second)
	v.answered(last.Add(-time.Millisecond), last, 1)
	if v.over(last.Add(bound), 1) {
		t.Fatalf("stalled for the bound: over (wait %v)", v.wait(last.Add(bound)))
	}
	if !v.over(last.Add(bound+1), 1) {
		t.Fatalf("stalled just past the bound: not over (wait %v)", v.wait(last.Add(bound+1)))
	}
	// An answer that leaves nothing in flight: no standing wait.
	v.answered(t0, last.Add(time.Hour), 0)
	if w := v.wait(last.Add(2 * time.Hour)); w != 0 {
		t.Fatalf("wait after the pipeline emptied = %v, want 0", w)
	}
	// Nothing in flight any more, however the last EVENT ended.
	v.answered(t0, t0.Add(time.Hour), 1)
	v.idle()
	if w := v.wait(t0.Add(2 * time.Hour)); w != 0 {
		t.Fatalf("wait after idle = %v, want 0", w)
	}
	// Off.
	off := waitValve{max: -1}
	off.answered(t0, t0.Add(time.Hour), 1)
	if off.over(t0.Add(2*time.Hour), 1) {
		t.Fatal("a valve that is off refused")
	}
}
