package pebble

import (
	"github.com/cockroachdb/pebble/v2/vfs"
)

// yieldFS makes pebble's flushes and compactions give the processor back
// after every block they write, so that the request path (reading,
// verifying, committing, answering) is not held up behind them.
//
// Why: a flush or compaction is CPU-bound for hundreds of milliseconds
// (a 64 MiB memtable flush took 280-350 ms, an L0 compaction 550-650 ms
// on the 2-core test machine). Its sstable writer compresses each block
// and hands it over an unbuffered channel to a second goroutine that
// writes it; the hand-off puts that goroutine in the processor's
// "run next" slot, which inherits the time slice, so the pair keeps the
// processor until Go preempts it after 10 ms. With few processors (one
// core, or GOMAXPROCS 1), every goroutine of the request path that
// becomes runnable meanwhile waits: in a runtime trace of a ladder run
// on one core (docs/BENCHMARKS.md, issue 19) those waits had a median of
// 19.6 ms and a 99th percentile of 50 ms, the largest source of the OK
// latency tail. runtime.Gosched after each block write puts the writing
// goroutine at the back of the global run queue, so the goroutines
// already waiting run first; the flush goes on as soon as they are done.
// Its own cost (one Gosched per 16 KiB block written) was not isolated;
// the relay's CPU per event over the quiet ladders did not rise with it.
//
// While the relay is committing, a configured pause replaces the yield
// (pace.go): yielding alone still leaves the flush two thirds of a
// single processor. During a write stall neither happens: no commit
// completes until the flush or compaction frees room.
//
// Only files pebble creates for flushes and compactions yield: the WAL
// (on the commit path itself, and recycled with ReuseForWrite, which is
// not wrapped), the manifest and reads are untouched.
type yieldFS struct {
	vfs.FS
	pace *pacer
}

// yieldCategories are the pebble write categories of background work.
var yieldCategories = map[vfs.DiskWriteCategory]bool{
	"pebble-memtable-flush":    true,
	"pebble-compaction":        true,
	"pebble-blob-file-rewrite": true,
}

func (fs yieldFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil || !yieldCategories[category] {
		return f, err
	}
	return yieldFile{File: f, pace: fs.pace}, nil
}

// Unwrap returns the filesystem underneath (pebble's vfs.Root).
func (fs yieldFS) Unwrap() vfs.FS { return fs.FS }

type yieldFile struct {
	vfs.File
	pace *pacer
}

func (f yieldFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.pace.afterBlock()
	return n, err
}
