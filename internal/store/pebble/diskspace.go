package pebble

import (
	"fmt"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/petrel-relay/petrel/internal/store"
)

// DefaultMinFreeBytes is the free space the store keeps on its filesystem
// by default: enough for pebble to flush every memtable it may hold
// (MemTableStopWritesThreshold 4 x 64 MiB) and start compacting, with
// room to spare.
const DefaultMinFreeBytes = 512 << 20

// reserve refuses writes that would leave less than Options.MinFreeBytes
// free on the store's filesystem. pebble cannot survive running out of
// space: a write-ahead log write that fails is fatal (Logger.Fatalf) with
// the batch already in the memtable, and a flush that cannot write stalls
// every commit behind it. So the writer asks before each commit, and
// refuses the batch (every event in it Failed with store.ErrDiskFull)
// while space is short; when space returns, the next commit goes ahead.
// Reads are not affected. Safe for concurrent use.
type reserve struct {
	fs   vfs.FS
	path string
	min  uint64 // 0: no check

	full atomic.Bool  // the last check refused
	free atomic.Int64 // bytes free at the last check; -1 unknown
}

func newReserve(fs vfs.FS, path string, min int64) *reserve {
	if fs == nil {
		fs = vfs.Default
	}
	r := &reserve{fs: fs, path: path}
	if min > 0 {
		r.min = uint64(min)
	}
	r.free.Store(-1)
	return r
}

// check reports store.ErrDiskFull (wrapped with the figures) if writing n
// more bytes would leave less than the reserve free. A filesystem that
// cannot say how much is free (an in-memory one) is not checked. The
// first refusal after writes were accepted, and the first acceptance
// after refusals, are reported as changed (Store.spaceFor logs them).
// Safe for concurrent use.
func (r *reserve) check(n int) (changed bool, err error) {
	if r.min == 0 {
		return false, nil
	}
	du, uerr := r.fs.GetDiskUsage(r.path)
	if uerr != nil {
		return false, nil
	}
	r.free.Store(int64(min(du.AvailBytes, 1<<62)))
	full := du.AvailBytes < r.min+uint64(n)
	changed = r.full.Swap(full) != full
	if full {
		return changed, fmt.Errorf("%w: %s free on %s, the reserve is %s (store.min_free_bytes)",
			store.ErrDiskFull, mib(du.AvailBytes), r.path, mib(r.min))
	}
	return changed, nil
}

// usage reads the space available now and the file system's size (for
// Stats), or zeros.
func (r *reserve) usage() (free, size int64) {
	du, err := r.fs.GetDiskUsage(r.path)
	if err != nil {
		return 0, 0
	}
	return int64(min(du.AvailBytes, 1<<62)), int64(min(du.TotalBytes, 1<<62))
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// spaceFor checks the reserve for a write of n bytes, logging when the
// store starts or stops refusing writes. Safe for concurrent use.
func (s *Store) spaceFor(n int) error {
	changed, err := s.space.check(n)
	switch {
	case changed && err != nil:
		s.log.Error("store: refusing writes: the disk is nearly full; free space to resume", "err", err)
	case changed:
		s.log.Warn("store: accepting writes again: disk space is back above the reserve", "path", s.opts.Path)
	}
	return err
}
