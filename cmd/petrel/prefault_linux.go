//go:build cgo

package main

// Start-up on a virtual machine is mostly page faults: each costs a trap
// to the hypervisor (7-15 µs on the guests of docs/BENCHMARKS.md), and a
// client command takes about 240 of them in petrel's own code and
// read-only data before main runs (package initialisation touches pages
// across the whole binary). MADV_POPULATE_READ maps every page of those
// segments in one system call per segment, which costs a fraction of
// the faults it saves (a page the page cache does not hold is read, as
// a fault would; a cold start's readahead reads nearly all of them
// anyway). It runs as an ELF constructor, before the Go runtime starts,
// so the runtime's own start-up gains too.
//
// PETREL_PREFAULT=0 in the environment turns it off (for measuring it);
// on kernels before 5.14 the advice is unknown and fails harmlessly.
// Fault-around already maps most of these pages (95% of the text on the
// guests measured), so a long-running process's resident size grows by
// under a megabyte of shared page cache.

/*
#define _GNU_SOURCE
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

__attribute__((constructor)) static void petrel_prefault(void) {
	const char *v = getenv("PETREL_PREFAULT");
	if (v && strcmp(v, "0") == 0) return;
	dl_iterate_phdr(petrel_prefault_phdr, NULL);
}
*/
import "C"
