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

// topUpFrom is where init's mapping of the heap started when it ran
// into the end of the heap's mapped part (0 otherwise): see TopUp.
var topUpFrom uintptr

func init() {
	if heapWanted() {
		if start, err := mapHeap(); err == syscall.EINVAL {
			topUpFrom = start
		}
	}
}

// TopUp maps what init's mapping of the heap left out, for a command
// about to run (cmd/petrel calls it first thing in main, and
// internal/cli/early before the client command it runs). The heap is
// mapped in 4 MiB chunks and Go (1.26) places its start at random in the
// first, so in some runs init's frontier lies within heapAhead of the
// chunk's end and the mapping stops there (EINVAL; 5 runs in 10, then 1
// in 16, of `petrel version` on one guest: docs/BENCHMARKS.md). By
// main, and by the time package early runs a client command (79 of 80
// runs that needed it, PETREL_PREFAULT=1, on the forty-second sitting's
// guest), the packages' initialisation has usually moved the frontier
// into the next chunk, which the runtime has mapped by then: TopUp maps from
// there what is left of heapAhead (counting the heap used since init).
// Otherwise it maps nothing more. Once only.
func TopUp() {
	if topUpFrom != 0 {
		topUp(frontierPage())
	}
}

// topUp is TopUp with the frontier at f.
func topUp(f uintptr) {
	from := topUpFrom
	if from == 0 {
		return
	}
	topUpFrom = 0
	if f > from && f-from < heapAhead {
		populate(f, heapAhead-(f-from))
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
