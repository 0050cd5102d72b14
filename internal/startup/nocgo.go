//go:build linux && !cgo

package startup

import "syscall"

// Without cgo there is no constructor: the segments are not mapped, and
// the heap is unless PETREL_PREFAULT=0 (no fault is timed).

// Prefaulted reports whether start-up mapped the executable's read-only
// segments: never without cgo.
func Prefaulted() bool { return false }

// FaultNanos is 0: nothing was timed.
func FaultNanos() int64 { return 0 }

// FaultCostlyNanos is the threshold of the cgo build (unused here).
const FaultCostlyNanos = 5000

func heapWanted() bool {
	v, _ := syscall.Getenv("PETREL_PREFAULT")
	return v != "0"
}
