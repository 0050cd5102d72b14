package relay

// capTrim decides when a slice that is emptied and refilled over and over
// (the flusher's queue, the dispatcher's list of sessions to flush) should give back
// a backing array its recent uses no longer need. Kept as is, such a
// slice holds the capacity of its largest use for good: after a fan-out
// to a million connections, 8 MB of pointer slots each. Dropping it at
// every emptying would allocate it again at the next large batch, so the
// array goes only after trimAfter emptyings in a row that each used less
// than a quarter of it, and never below trimKeepCap.
type capTrim struct {
	peak  int // the most the slice held since it was last emptied
	small int // emptyings in a row whose peak was under a quarter of cap
}

const (
	trimKeepCap = 4096 // capacity always kept (32 KiB of pointers)
	trimAfter   = 256  // small uses in a row before the array goes
)

// used records that the slice holds n items.
func (c *capTrim) used(n int) { c.peak = max(c.peak, n) }

// emptied records that the slice, of capacity capacity, was emptied, and
// reports whether to drop its backing array now.
func (c *capTrim) emptied(capacity int) bool {
	peak := c.peak
	c.peak = 0
	if capacity <= trimKeepCap || peak >= capacity/4 {
		c.small = 0
		return false
	}
	if c.small++; c.small < trimAfter {
		return false
	}
	c.small = 0
	return true
}
