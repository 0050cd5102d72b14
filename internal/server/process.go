package server

import (
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
)

// ProcessStats is the /stats document's account of the process itself:
// the figures a soak test or an operator watches for drift. The same
// figures are on /metrics from the Go and process collectors.
type ProcessStats struct {
	// RSSBytes is the resident set size (Linux /proc/self/statm; 0
	// where it cannot be read).
	RSSBytes int64 `json:"rss_bytes"`
	// HeapObjectsBytes is the heap held by objects, live or not yet
	// collected; HeapResidentBytes adds the free heap the runtime has not
	// returned to the OS.
	HeapObjectsBytes  uint64 `json:"heap_objects_bytes"`
	HeapResidentBytes uint64 `json:"heap_resident_bytes"`
	// HeapLiveBytes is the heap found live by the last collection.
	HeapLiveBytes uint64 `json:"heap_live_bytes"`
	// GCCycles counts completed collections.
	GCCycles   uint64 `json:"gc_cycles"`
	Goroutines int    `json:"goroutines"`
	// HandlerGoroutinesIdle is how many of them are the server's message
	// handlers waiting for the next message (at most 64; they stay, so
	// that a message does not start a new goroutine): a leak check
	// leaves them out.
	HandlerGoroutinesIdle int `json:"handler_goroutines_idle"`
	// OpenFiles counts open file descriptors (Linux /proc/self/fd; -1
	// where it cannot be read).
	OpenFiles int `json:"open_files"`
}

var processSamples = sync.Pool{New: func() any {
	return &[]metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"},
	}
}}

// readProcess reads the process figures. It does not stop the world.
func readProcess() ProcessStats {
	ssp := processSamples.Get().(*[]metrics.Sample)
	ss := *ssp
	metrics.Read(ss)
	p := ProcessStats{
		HeapObjectsBytes: ss[0].Value.Uint64(),
		HeapLiveBytes:    ss[2].Value.Uint64(),
		GCCycles:         ss[3].Value.Uint64(),
		Goroutines:       runtime.NumGoroutine(),
		RSSBytes:         rssBytes(),
		OpenFiles:        openFiles(),
	}
	p.HeapResidentBytes = p.HeapObjectsBytes + ss[1].Value.Uint64()
	processSamples.Put(ssp)
	return p
}

// rssBytes reads the resident set size from /proc/self/statm (its second
// field, in pages).
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

// openFiles counts the process's open file descriptors. It runs every
// second (the dashboard's sampler calls readProcess), so it must not
// allocate per descriptor: listing /proc/self/fd with Readdirnames made
// a string per open connection each second, about 600 KB of garbage a
// second at 10,000 connections, which let an idle relay's heap grow to
// its GC goal and raised its RSS by 0.6 KiB per connection (issue 14).
// Since Linux 6.2, stat of /proc/self/fd reports the count as its size;
// on older kernels the directory is read into one reused buffer and its
// records are counted.
func openFiles() int {
	if fi, err := os.Stat("/proc/self/fd"); err == nil && fi.Size() > 0 {
		return int(fi.Size())
	}
	return countDirents("/proc/self/fd")
}
