package pebble

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

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
//
// Far from the reserve the filesystem is not asked at every commit: a
// statfs costs a system call (about 2-3% of the relay's CPU at moderate
// ingest rates, one commit per event or two), so while the last answer
// left at least reserveSlack above the reserve, after what was written
// since (counted twice: the write-ahead log, then the flush), a commit
// within reserveRecheck of that answer is let through on it. Near the
// reserve, after a refusal, and at least every reserveRecheck, every
// commit asks.
type reserve struct {
	fs   vfs.FS
	path string
	min  uint64 // 0: no check

	full atomic.Bool // the last check refused

	mu      sync.Mutex
	asked   time.Time // when the filesystem last answered; zero: ask
	room    uint64    // what that answer left above the reserve and the slack
	charged uint64    // bytes let through on that answer since
	now     func() time.Time
	statfs  atomic.Int64 // filesystem queries (tests)
}

const (
	// reserveRecheck is the longest a commit is let through without
	// asking the filesystem.
	reserveRecheck = 100 * time.Millisecond
	// reserveSlack is how far above the reserve the last answer must
	// have been (after the bytes written since) for a commit not to
	// ask: the room for other writers on the filesystem and pebble's
	// compactions within reserveRecheck.
	reserveSlack = 256 << 20
)

func newReserve(fs vfs.FS, path string, min int64) *reserve {
	if fs == nil {
		fs = vfs.Default
	}
	r := &reserve{fs: fs, path: path, now: time.Now}
	if min > 0 {
		r.min = uint64(min)
	}
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
	r.mu.Lock()
	defer r.mu.Unlock()
	cost := 2 * uint64(max(n, 0))
	now := r.now()
	if !r.asked.IsZero() && now.Sub(r.asked) < reserveRecheck && r.charged+cost <= r.room {
		r.charged += cost
		return false, nil
	}
	r.asked = time.Time{}
	r.statfs.Add(1)
	du, uerr := r.fs.GetDiskUsage(r.path)
	if uerr != nil {
		return false, nil
	}
	full := du.AvailBytes < r.min+uint64(n)
	changed = r.full.Swap(full) != full
	if above := r.min + reserveSlack; !full && du.AvailBytes > above {
		r.asked, r.room, r.charged = now, du.AvailBytes-above, 0
	}
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
