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
	// A store error's answer (a database down: its sojourn is the
	// writer's retries) shows no standing wait, even with EVENTs in
	// flight behind it.
	v.answered(t0, t0.Add(time.Hour), 1)
	if !v.over(t0.Add(time.Hour), 1) {
		t.Fatal("not over after an hour-long sojourn")
	}
	v.failed(t0.Add(time.Hour))
	if v.over(t0.Add(time.Hour), 1) {
		t.Fatalf("over after a store error's answer (wait %v)", v.wait(t0.Add(time.Hour)))
	}
	// An EVENT admitted before that error, answered long after (the
	// backlog once the store is back): its wait is the outage's.
	v.answered(t0.Add(time.Hour-time.Second), t0.Add(2*time.Hour), 1)
	if v.over(t0.Add(2*time.Hour), 1) {
		t.Fatalf("over after an answer admitted before the store error (wait %v)", v.wait(t0.Add(2*time.Hour)))
	}
	// One admitted after it counts again.
	v.answered(t0.Add(time.Hour+time.Second), t0.Add(2*time.Hour), 1)
	if !v.over(t0.Add(2*time.Hour), 1) {
		t.Fatal("not over after a long sojourn admitted after the store error")
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
