// Package startup makes a petrel process start sooner on a virtual
// machine, where start-up is mostly traps to the hypervisor: page faults
// (10-18 µs each on the PVM guests of docs/BENCHMARKS.md; `petrel version`
// took about 760 of them on one, half its time) and wake-ups.
//
//   - The executable's read-only segments are mapped in one system call
//     each (MADV_POPULATE_READ, Linux 5.14), by an ELF constructor
//     before the runtime starts (constructor_cgo.go): package
//     initialisation touches the whole binary, about 240 faults.
//   - So are its writable data (.data, .noptrdata) and the first 256 KiB
//     of its zero-filled data (.bss), written for the first time as the
//     runtime and the packages start (MADV_POPULATE_WRITE): about 75
//     faults of `petrel version`.
//   - The next MiB of the Go heap is mapped (MADV_POPULATE_WRITE) at this
//     package's initialisation, early in the init order (it imports only
//     syscall and unsafe); the rest of the packages' initialisation and a
//     client command's work fill it: about 160 faults for 256 pages. Go
//     places the heap's start at random in its first 4 MiB chunk, so in
//     some runs that mapping stops at the chunk's end; cmd/petrel's main
//     (or, for a client command, internal/cli/early's init) then calls
//     TopUp, which maps the rest in the next chunk.
//   - A client command runs with a 1 ms timer slack, set by the same
//     constructor before the runtime makes its first thread, so that
//     Go's sysmon does not wake every 20 µs through each system call
//     (constructor_cgo.go says which commands and why).
//
// The mappings are made only where a fault is dear: the constructor
// times three first touches of fresh anonymous pages and maps if the
// fastest took more than 5 µs. Where faults are cheap (1.2-1.6 µs on one
// guest), mapping a segment the page cache holds in small pages costs
// more than the faults it saves (constructor_cgo.go).
//
// Fault-around already maps 95% of the first range, the data is the
// process's own (under 1 MiB; the 32 MiB buffer of Go's crypto in .bss is
// left alone) and the heap is what the process uses next, so a
// long-running process's resident size grows by under 3 MiB.
// PETREL_PREFAULT=0 or 1 in the environment turns the mappings off or on
// whatever a fault costs, PETREL_CLIENT_SLACK=0 the slack (for measuring
// them); on older kernels the advice fails, ignored. cmd/petrel imports
// the package and calls TopUp, as internal/cli/early does before it runs
// a client command. Elsewhere than Linux it does nothing.
package startup
