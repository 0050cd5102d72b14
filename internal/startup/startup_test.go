//go:build linux

package startup

import (
	"syscall"
	"testing"
	"unsafe"
)

// resident counts the pages of [start, start+n) that are in memory.
func resident(t *testing.T, start, n uintptr) int {
	t.Helper()
	page := uintptr(syscall.Getpagesize())
	vec := make([]byte, (n+page-1)/page)
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, start, n, uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatalf("mincore: %v", e)
	}
	c := 0
	for _, v := range vec {
		c += int(v & 1)
	}
	return c
}

// skipWithoutPopulate skips a test on a kernel without MADV_POPULATE_*
// (before 5.14), where the package's calls fail, as intended.
func skipWithoutPopulate(t *testing.T) {
	t.Helper()
	m, err := syscall.Mmap(-1, 0, syscall.Getpagesize(), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	if err := syscall.Madvise(m, madvPopulateWrite); err == syscall.EINVAL {
		t.Skip("this kernel has no MADV_POPULATE_WRITE (Linux 5.14)")
	}
}

var hold [][]byte

// TestHeap: populate maps heap memory that was not mapped (a large
// allocation, which fresh memory from the kernel serves untouched), and
// mapHeap maps the range above its own allocation.
func TestHeap(t *testing.T) {
	skipWithoutPopulate(t)
	page := uintptr(syscall.Getpagesize())
	big := make([]byte, 4*heapAhead)
	hold = append(hold, big) // never freed: its pages are never reused
	start := uintptr(unsafe.Pointer(&big[0])) &^ (page - 1)
	pages := int(heapAhead / page)
	before := resident(t, start, heapAhead)
	if before == pages {
		t.Fatalf("a fresh 4 MiB allocation at %#x was resident already: the test cannot tell", start)
	}
	n, err := populate(start, heapAhead)
	if err != nil || n != heapAhead {
		t.Fatalf("populate: %d bytes, %v", n, err)
	}
	if got := resident(t, start, n); got != pages {
		t.Errorf("after populate, %d of %d pages from %#x resident, want all", got, pages, start)
	}
	t.Logf("populate mapped %d KiB at %#x, of which %d pages were resident before", n>>10, start, before)

	start, n, err = mapHeap()
	if err != nil || n < 16*page {
		t.Fatalf("mapHeap: %d bytes, %v", n, err)
	}
	if got := resident(t, start, n); got != int(n/page) {
		t.Errorf("after mapHeap, %d of %d pages from %#x resident, want all", got, n/page, start)
	}
}

// TestPopulatePastMapping: a range that runs into memory mapped without
// access (the heap's reservation past its chunk) is mapped up to there,
// and populate says how much it mapped for certain.
func TestPopulatePastMapping(t *testing.T) {
	skipWithoutPopulate(t)
	page := syscall.Getpagesize()
	m, err := syscall.Mmap(-1, 0, 8*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	if err := syscall.Mprotect(m[4*page:], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	start := uintptr(unsafe.Pointer(&m[0]))
	if got := resident(t, start, uintptr(8*page)); got != 0 {
		t.Fatalf("%d pages of a fresh mapping resident", got)
	}
	n, err := populate(start, uintptr(8*page))
	if err != nil || n != uintptr(4*page) {
		t.Fatalf("populate: %d bytes, %v; want the %d accessible", n, err, 4*page)
	}
	if got := resident(t, start, uintptr(8*page)); got != 4 {
		t.Errorf("%d pages resident, want the 4 accessible", got)
	}
	if _, err := populate(start+uintptr(4*page), uintptr(4*page)); err == nil {
		t.Errorf("populate of memory without access succeeded")
	}
}
