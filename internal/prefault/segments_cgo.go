//go:build linux && cgo

package prefault

// The executable's read-only segments (code, read-only data): every page
// is mapped by an ELF constructor, which runs before the Go runtime
// starts, so the runtime's own start-up gains too. A page the page cache
// does not hold is read, as a fault would read it (a cold start's
// readahead reads nearly all of them anyway).

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
