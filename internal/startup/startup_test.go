//go:build linux

package startup

import (
	"os"
	"strconv"
	"strings"
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

// freshMapping maps n bytes of anonymous memory, read-write, untouched,
// unmapped when the test ends. Go's heap is not used for this: a large
// allocation may land on pages the heap touched or populated before
// (mapHeap's own, from an earlier test or run), which made these tests
// fail on one guest ("resident already: the test cannot tell").
func freshMapping(t *testing.T, n uintptr) uintptr {
	t.Helper()
	m, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(m) })
	// Page by page, also where transparent huge pages are "always": a
	// write fault there may map 2 MiB at once.
	if err := syscall.Madvise(m, syscall.MADV_NOHUGEPAGE); err != nil {
		t.Fatalf("madvise NOHUGEPAGE: %v", err)
	}
	start := uintptr(unsafe.Pointer(&m[0]))
	if got := resident(t, start, n); got != 0 {
		t.Fatalf("%d pages of a fresh mapping resident: the test cannot tell", got)
	}
	return start
}

// TestHeap: populate maps memory that was not mapped (anonymous and
// private, as the heap's is), and mapHeap maps the heap from its
// frontier up to heapAhead or the end of the heap's mapping.
func TestHeap(t *testing.T) {
	skipWithoutPopulate(t)
	page := uintptr(syscall.Getpagesize())
	start := freshMapping(t, 4*heapAhead)
	pages := int(heapAhead / page)
	if err := populate(start, heapAhead); err != nil {
		t.Fatalf("populate: %v", err)
	}
	if got := resident(t, start, heapAhead); got != pages {
		t.Errorf("after populate, %d of %d pages from %#x resident, want all", got, pages, start)
	}
	if got := resident(t, start+heapAhead, heapAhead); got != 0 {
		t.Errorf("populate mapped %d pages past its range", got)
	}

	start, err := mapHeap()
	end := min(start+heapAhead, mappingEnd(t, start))
	if err != nil && end == start+heapAhead {
		t.Fatalf("mapHeap: %v, with the whole range mapped read-write", err)
	}
	if got, want := resident(t, start, end-start), int((end-start)/page); got != want {
		t.Errorf("after mapHeap, %d of %d pages from %#x resident, want all", got, want, start)
	}
}

// TestTopUp: when init's mapping stopped short (topUpFrom set), topUp
// maps from the frontier what is left of heapAhead counted from where
// init started, once; nothing when the heap has used heapAhead since, or
// when init's mapping was whole. The frontier here is the start of a
// fresh mapping: topUp only counts from it and populates.
func TestTopUp(t *testing.T) {
	skipWithoutPopulate(t)
	page := uintptr(syscall.Getpagesize())
	defer func() { topUpFrom = 0 }()

	f := freshMapping(t, 2*heapAhead)
	used := uintptr(heapAhead / 4)
	topUpFrom = f - used // init started a quarter of heapAhead below
	topUp(f)
	want := int((heapAhead - used) / page)
	if got := resident(t, f, 2*heapAhead); got != want {
		t.Errorf("after topUp, %d pages resident from the frontier, want %d (heapAhead less what was used)", got, want)
	}
	if got := resident(t, f, heapAhead-used); got != want {
		t.Errorf("after topUp, %d of the %d pages next to the frontier resident, want all", got, want)
	}
	if topUpFrom != 0 {
		t.Error("topUp left its start set")
	}
	f = freshMapping(t, 2*heapAhead)
	topUp(f) // once only
	if got := resident(t, f, 2*heapAhead); got != 0 {
		t.Errorf("a second topUp mapped %d pages", got)
	}
	topUpFrom = f - heapAhead // the heap used heapAhead since init
	topUp(f)
	if got := resident(t, f, 2*heapAhead); got != 0 {
		t.Errorf("topUp past heapAhead mapped %d pages", got)
	}
}

// mappingEnd is the end of the mapping in /proc/self/maps that holds
// addr.
func mappingEnd(t *testing.T, addr uintptr) uintptr {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(maps)) {
		lo, hi, ok := strings.Cut(strings.Fields(line)[0], "-")
		if !ok {
			continue
		}
		l, err1 := strconv.ParseUint(lo, 16, 64)
		h, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 == nil && err2 == nil && uintptr(l) <= addr && addr < uintptr(h) {
			return uintptr(h)
		}
	}
	t.Fatalf("no mapping holds %#x", addr)
	return 0
}

// TestPopulatePastMapping: a range that runs into memory mapped without
// access (the heap's reservation past its chunk) is mapped up to there
// by the one call, which then fails.
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
	if err := populate(start, uintptr(8*page)); err != syscall.EINVAL {
		t.Errorf("populate into memory without access: %v, want EINVAL", err)
	}
	if got := resident(t, start, uintptr(8*page)); got != 4 {
		t.Errorf("%d pages resident, want the 4 accessible", got)
	}
}
