//go:build linux && !cgo

package startup

import "syscall"

// Without cgo there is no constructor: the segments are not mapped and no
// fault is timed; the heap is mapped unless PETREL_PREFAULT=0.
func heapWanted() bool {
	v, _ := syscall.Getenv("PETREL_PREFAULT")
	return v != "0"
}
