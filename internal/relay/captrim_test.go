package relay

import (
	"testing"

	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// TestCapTrim: a reused slice keeps a large array while its uses need it
// (a large use now and then resets the count), gives it back after
// trimAfter small uses in a row, and never trims at or below trimKeepCap.
func TestCapTrim(t *testing.T) {
	var c capTrim
	const big = 64 * trimKeepCap
	c.used(big)
	if c.emptied(big) {
		t.Fatal("trimmed right after a use of the whole array")
	}
	for i := 1; i < trimAfter; i++ {
		c.used(big/4 - 1)
		if c.emptied(big) {
			t.Fatalf("trimmed after %d small uses, want %d", i, trimAfter)
		}
	}
	c.used(big / 4) // a quarter: large enough to keep it, and the count starts over
	if c.emptied(big) {
		t.Fatal("trimmed after a use of a quarter")
	}
	for i := 1; i < trimAfter; i++ {
		c.used(10)
		if c.emptied(big) {
			t.Fatalf("trimmed after %d small uses since the last large one, want %d", i, trimAfter)
		}
	}
	c.used(10)
	if !c.emptied(big) {
		t.Fatalf("not trimmed after %d small uses in a row", trimAfter)
	}
	for i := 0; i < 2*trimAfter; i++ {
		c.used(0)
		if c.emptied(trimKeepCap) {
			t.Fatalf("trimmed an array of %d (the capacity always kept)", trimKeepCap)
		}
	}
}

// TestFIFOGivesBackPeak: a queue that once held a burst gives its array
// back once it has stayed small for trimAfter emptyings, and works on.
func TestFIFOGivesBackPeak(t *testing.T) {
	var q fifo[*int]
	v := 1
	for range 100_000 {
		q.push(&v)
	}
	for q.len() > 0 {
		q.pop()
	}
	if cap(q.items) < 100_000 {
		t.Fatalf("capacity %d right after the burst; want the array kept for now", cap(q.items))
	}
	for range trimAfter {
		q.push(&v, &v)
		q.pop()
		q.pop()
	}
	if c := cap(q.items); c > trimKeepCap {
		t.Fatalf("capacity %d after %d small uses, want at most %d", c, trimAfter, trimKeepCap)
	}
	q.push(&v)
	if q.len() != 1 || q.pop() != &v {
		t.Fatal("the queue does not work after its array was given back")
	}
}

// TestCapTrimJustAboveKeep: an array one slot over trimKeepCap is given
// back like any other (the limit's other side).
func TestCapTrimJustAboveKeep(t *testing.T) {
	var c capTrim
	for i := 1; i <= trimAfter; i++ {
		c.used(1)
		if got := c.emptied(trimKeepCap + 1); got != (i == trimAfter) {
			t.Fatalf("small use %d of an array of %d: trimmed %v", i, trimKeepCap+1, got)
		}
	}
}

// TestDispatcherTouchedGivesBackPeak: the dispatcher's list of sessions
// to flush keeps a wide batch's array while batches stay wide, and gives
// it back after trimAfter narrow ones.
func TestDispatcherTouchedGivesBackPeak(t *testing.T) {
	r, err := New(Config{}, Options{Store: storetest.NewModel()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(t.Context()) })
	sessions := make([]*Session, 4*trimKeepCap)
	for i := range sessions {
		sessions[i] = r.NewSession(&sinkTransport{}, "192.0.2.1")
	}
	d := &dispatcher{r: r} // not running: the test is its only goroutine
	batch := func(ss []*Session) {
		for _, s := range ss {
			d.touch(s)
		}
		d.flushTouched()
	}
	batch(sessions)
	wide := cap(d.touched)
	for range 2 * trimAfter {
		batch(sessions[:wide/4]) // a quarter of the array: still wide enough
	}
	if cap(d.touched) != wide {
		t.Fatalf("capacity %d after batches of a quarter, want %d kept", cap(d.touched), wide)
	}
	for range trimAfter {
		batch(sessions[:1])
	}
	if c := cap(d.touched); c > trimKeepCap {
		t.Fatalf("capacity %d after %d batches of one session, want at most %d", c, trimAfter, trimKeepCap)
	}
}
