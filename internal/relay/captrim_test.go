package relay

import "testing"

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
