//go:build linux

package startup

import (
	"syscall"
	"unsafe"
)

const (
	madvPopulateWrite = 23 // MADV_POPULATE_WRITE
	// heapAhead is how much of the heap mapHeap maps: 1 MiB saved `petrel
	// version` 0.7 ms on the test guest, 1.5 MiB no more (docs/BENCHMARKS.md).
	heapAhead = 1 << 20
)

// frontier receives a fresh one-page allocation: the page allocator
// takes the lowest free pages, so at start-up (nothing freed yet) it
// lands where the heap grows next.
var frontier []byte

func init() {
	if heapWanted() {
		mapHeap()
	}
}

// mapHeap maps up to heapAhead bytes of the heap from its frontier and
// returns where it started.
func mapHeap() (start uintptr, err error) {
	start = frontierPage()
	return start, populate(start, heapAhead)
}

// frontierPage is the page of a fresh one-page allocation (see frontier).
func frontierPage() uintptr {
	frontier = make([]byte, 8192)
	p := uintptr(unsafe.Pointer(&frontier[0])) &^ uintptr(syscall.Getpagesize()-1)
	frontier = nil
	return p
}

// populate maps [start, start+n) for writing. The heap is mapped
// read-write in chunks, and past the current chunk lies its reservation
// (PROT_NONE): a range that runs into it is mapped up to there, and the
// call then fails with EINVAL, which changes nothing for the caller.
func populate(start, n uintptr) error {
	if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, start, n, madvPopulateWrite); e != 0 {
		return e
	}
	return nil
}
