//go:build linux && cgo

package startup

// An ELF constructor: it runs in the dynamic loader's initialisation,
// before the Go runtime starts and before it makes any thread.
//
//   - It maps every page of the executable's read-only segments (code,
//     read-only data), so that the runtime's start-up and every package's
//     initialisation do not fault them in one by one. A page the page
//     cache does not hold is read, as a fault would read it (a cold
//     start's readahead reads nearly all of them anyway). It maps the
//     writable data segment for writing, its file-backed part and
//     petrel_data_ahead of its zero-filled part, which the runtime and
//     the packages' variables write as they start.
//   - For a client command (not serve, router, stream or bench: see
//     petrel_long_running) it sets the timer slack to 1 ms, which every thread
//     the runtime makes then inherits. Go's sysmon thread sleeps 20 µs at
//     a time while a system call or cgo call is under way and then hands
//     the processor to another thread (making one if need be); with the
//     kernel's default 50 µs slack that is a wake-up, a context switch and
//     often a new thread for each file read, dlopen or fsync of a short
//     command. With 1 ms it wakes about a millisecond later, when the call
//     is usually over. A timer of a client command (a --timeout) may fire
//     up to 1 ms late. `petrel serve` sets its own slack
//     (runtime.timer_slack), the load client's pacing needs precise
//     timers, and router and stream forward live traffic.
//
// The mapping is worth it only where a page fault is dear: a trap to the
// hypervisor costs 10-18 µs on the PVM guests of docs/BENCHMARKS.md and
// saves petrel version about 1.5 ms there, but on a guest whose faults
// cost about 1.3 µs, mapping a segment the page cache holds in small
// pages (an executable read back from disk, as an installed one is after
// a reboot) costs more than the faults it saves: 1.6 ms more on version
// there. So the constructor first times three first touches of fresh
// anonymous pages and maps the segments only when the fastest took
// longer than petrel_fault_costly_ns; the package's init maps the heap
// on the same decision (Prefaulted).
//
// PETREL_PREFAULT=0 in the environment turns the mapping off and
// PETREL_PREFAULT=1 on, whatever a fault costs; PETREL_CLIENT_SLACK=0
// turns the slack off (for measuring them).

/*
#define _GNU_SOURCE
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

// petrel_data_ahead is how much of the zero-filled part of the writable
// segment (.bss, then .noptrbss, which holds a 32 MiB buffer of Go's
// crypto that nothing touches) is mapped after its file-backed part:
// `petrel version` wrote 26 of .bss's 40 pages and 12 in the first 34 of
// .noptrbss (docs/BENCHMARKS.md, issue 15, twenty-eighth sitting).
#define petrel_data_ahead (256 << 10)

static int petrel_prefault_phdr(struct dl_phdr_info *info, size_t size, void *data) {
	uintptr_t page = sysconf(_SC_PAGESIZE);
	uintptr_t relro_end = 0; // the loader has made [.., relro_end) read-only
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_GNU_RELRO) relro_end = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
	}
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD) continue;
		uintptr_t addr = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_flags & PF_W) {
			// Writable data (.data, .noptrdata, .bss): written as it is
			// first touched, a copy-on-write or zero-fill fault a page.
			// Its first page is shared with the read-only tail of
			// relocations (GNU_RELRO), which the advice would refuse.
			uintptr_t start = (addr > relro_end ? addr : relro_end);
			start = (start + page - 1) & ~(page - 1);
			size_t want = ph->p_filesz + petrel_data_ahead;
			if (want > ph->p_memsz) want = ph->p_memsz;
			if (addr + want > start) madvise((void *)start, addr + want - start, MADV_POPULATE_WRITE);
			continue;
		}
		uintptr_t start = addr & ~(page - 1);
		size_t len = addr + ph->p_memsz - start;
		madvise((void *)start, len, MADV_POPULATE_READ);
	}
	return 1; // the first object is the executable: stop there
}

static int petrel_off(const char *name) {
	const char *v = getenv(name);
	return v && strcmp(v, "0") == 0;
}

// A first touch slower than this makes the constructor map the segments
// (see above: 1.2-1.5 µs on a guest where mapping lost, 11-12 µs on one
// where it gained).
#define petrel_fault_costly_ns 5000

// petrel_fault_ns is the fastest of three first touches of fresh
// anonymous pages, as timed at start-up (0 when not timed: forced by
// PETREL_PREFAULT, or the timing failed); petrel_prefaulted is whether
// the segments were mapped.
long petrel_fault_ns;
int petrel_prefaulted;

static long petrel_time_fault(void) {
	long page = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) return 0;
	long best = 0;
	for (int i = 0; i < 3; i++) {
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		*(volatile char *)(p + i * page) = 1;
		clock_gettime(CLOCK_MONOTONIC, &b);
		long ns = (b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec);
		if (i == 0 || ns < best) best = ns;
	}
	munmap(p, 3 * page);
	return best;
}

// petrel_forced reports whether PETREL_PREFAULT's value v (NULL: unset)
// decides by itself: 0 (never map) or 1 (always).
static int petrel_forced(const char *v) {
	return v && (strcmp(v, "0") == 0 || strcmp(v, "1") == 0);
}

// petrel_prefault_decide is the rule: as PETREL_PREFAULT's value v says,
// else map when the fastest first touch took more than
// petrel_fault_costly_ns, or could not be timed (ns 0).
static int petrel_prefault_decide(const char *v, long ns) {
	if (petrel_forced(v)) return v[0] == '1';
	return ns == 0 || ns > petrel_fault_costly_ns;
}

// petrel_prefault_wanted times a fault unless PETREL_PREFAULT decides, and
// applies the rule.
static int petrel_prefault_wanted(void) {
	const char *v = getenv("PETREL_PREFAULT");
	if (!petrel_forced(v)) petrel_fault_ns = petrel_time_fault();
	return petrel_prefault_decide(v, petrel_fault_ns);
}

// The commands that keep running and whose timers must be precise.
static int petrel_long_running(const char *cmd) {
	static const char *const names[] = {"serve", "router", "stream", "bench", NULL};
	for (int i = 0; names[i]; i++)
		if (strcmp(cmd, names[i]) == 0) return 1;
	return 0;
}

// glibc passes the program's arguments to constructors; petrel has no
// flag before its command, so argv[1] is the command. A flag there is
// --version or --help, or a test binary's -test.* (whose tests measure
// the slack they inherit): left alone.
__attribute__((constructor)) static void petrel_startup(int argc, char **argv, char **envp) {
	petrel_prefaulted = petrel_prefault_wanted();
	if (petrel_prefaulted) dl_iterate_phdr(petrel_prefault_phdr, NULL);
#ifdef __GLIBC__
	if (argc >= 2 && argv[1][0] != '-' && !petrel_long_running(argv[1]) && !petrel_off("PETREL_CLIENT_SLACK"))
		prctl(PR_SET_TIMERSLACK, 1000000UL, 0, 0, 0); // 1 ms: serve's autoTimerSlack, TestStartup checks both
#endif
}
*/
import "C"

import "unsafe"

// Prefaulted reports whether this process's start-up mapped the
// executable's read-only segments (and so maps the heap at init). It
// reads a variable: no call into C.
func Prefaulted() bool { return C.petrel_prefaulted != 0 }

// FaultNanos is the fastest of the first touches start-up timed to
// decide, in nanoseconds (0 when PETREL_PREFAULT decided). Not a
// time.Duration: the package imports nothing it need not, to initialise
// early.
func FaultNanos() int64 { return int64(C.petrel_fault_ns) }

// FaultCostlyNanos is the first touch above which start-up maps.
const FaultCostlyNanos = C.petrel_fault_costly_ns

// decide applies the constructor's rule to PETREL_PREFAULT's value env
// (set false: unset) and a first touch of ns nanoseconds, for tests.
func decide(env string, set bool, ns int64) bool {
	var v *C.char
	if set {
		v = C.CString(env)
		defer C.free(unsafe.Pointer(v))
	}
	return C.petrel_prefault_decide(v, C.long(ns)) != 0
}

// heapWanted: the heap is mapped on the constructor's decision.
func heapWanted() bool { return Prefaulted() }
