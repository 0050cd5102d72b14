//go:build linux

// Package startup makes a petrel process start sooner on a virtual
// machine, where start-up is mostly traps to the hypervisor: page faults
// (7-15 µs each on the guests of docs/BENCHMARKS.md, where `petrel
// version` took about 760 of them, half its time) and wake-ups.
//
//   - The executable's read-only segments are mapped in one system call
//     each (MADV_POPULATE_READ, Linux 5.14), by an ELF constructor
//     before the runtime starts (constructor_cgo.go): package
//     initialisation touches the whole binary, about 240 faults.
//   - The next MiB of the Go heap is mapped (MADV_POPULATE_WRITE) at this
//     package's initialisation, early in the init order (it imports only
//     syscall and unsafe); the rest of the packages' initialisation and a
//     client command's work fill it: about 160 faults for 256 pages.
//   - A client command runs with a 1 ms timer slack, set by the same
//     constructor before the runtime makes its first thread, so that
//     Go's sysmon does not wake every 20 µs through each system call
//     (constructor_cgo.go says which commands and why).
//
// Fault-around already maps 95% of the first range, and the second is
// heap the process uses next, so a long-running process's resident size
// grows by under 2 MiB. PETREL_PREFAULT=0 in the environment turns the
// two mappings off, PETREL_CLIENT_SLACK=0 the slack (for measuring them);
// on older kernels the advice fails, ignored. cmd/petrel imports the
// package for its side effects.
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
	if v, _ := syscall.Getenv("PETREL_PREFAULT"); v == "0" {
		return
	}
	mapHeap()
}

// mapHeap maps up to heapAhead bytes of the heap from its frontier and
// returns the range it mapped for certain.
func mapHeap() (start, n uintptr, err error) {
	start = frontierPage()
	n, err = populate(start, heapAhead)
	return start, n, err
}

// frontierPage is the page of a fresh one-page allocation (see frontier).
func frontierPage() uintptr {
	frontier = make([]byte, 8192)
	p := uintptr(unsafe.Pointer(&frontier[0])) &^ uintptr(syscall.Getpagesize()-1)
	frontier = nil
	return p
}

// populate maps [start, start+n) of the Go heap's own anonymous memory
// for writing and returns how much of it it mapped for certain. The heap
// is mapped read-write in chunks, and past the current chunk lies its
// reservation (PROT_NONE: EINVAL) or nothing (ENOMEM); the kernel maps
// the range up to there before it fails, and populate then halves the
// range until a call succeeds, so that it knows what it mapped.
func populate(start, n uintptr) (uintptr, error) {
	page := uintptr(syscall.Getpagesize())
	for ; n >= page; n = n / 2 &^ (page - 1) {
		_, _, e := syscall.Syscall(syscall.SYS_MADVISE, start, n, madvPopulateWrite)
		switch e {
		case 0:
			return n, nil
		case syscall.EINVAL, syscall.ENOMEM:
			continue
		}
		return 0, e
	}
	return 0, syscall.ENOMEM
}
