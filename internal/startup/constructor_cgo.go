//go:build linux && cgo

package startup

// An ELF constructor: it runs in the dynamic loader's initialisation,
// before the Go runtime starts and before it makes any thread.
//
//   - It maps every page of the executable's read-only segments (code,
//     read-only data), so that the runtime's start-up and every package's
//     initialisation do not fault them in one by one. A page the page
//     cache does not hold is read, as a fault would read it (a cold
//     start's readahead reads nearly all of them anyway).
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
// PETREL_PREFAULT=0 and PETREL_CLIENT_SLACK=0 in the environment turn
// each off (for measuring them).

/*
#define _GNU_SOURCE
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

static int petrel_prefault_phdr(struct dl_phdr_info *info, size_t size, void *data) {
	long page = sysconf(_SC_PAGESIZE);
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W)) continue;
		uintptr_t start = (info->dlpi_addr + ph->p_vaddr) & ~(uintptr_t)(page - 1);
		size_t len = info->dlpi_addr + ph->p_vaddr + ph->p_memsz - start;
		madvise((void *)start, len, MADV_POPULATE_READ);
	}
	return 1; // the first object is the executable: stop there
}

static int petrel_off(const char *name) {
	const char *v = getenv(name);
	return v && strcmp(v, "0") == 0;
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
	if (!petrel_off("PETREL_PREFAULT")) dl_iterate_phdr(petrel_prefault_phdr, NULL);
#ifdef __GLIBC__
	if (argc >= 2 && argv[1][0] != '-' && !petrel_long_running(argv[1]) && !petrel_off("PETREL_CLIENT_SLACK"))
		prctl(PR_SET_TIMERSLACK, 1000000UL, 0, 0, 0); // 1 ms: serve's autoTimerSlack, TestStartup checks both
#endif
}
*/
import "C"
