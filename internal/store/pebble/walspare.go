package pebble

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// Write-ahead log spares: log files whose blocks are written already.
//
// Every commit of the store ends with an fdatasync of pebble's
// write-ahead log. Into a new log file, which pebble reserves with
// fallocate(FALLOC_FL_KEEP_SIZE), each commit's write grows the file and
// turns reserved blocks into written ones, so each fdatasync also has to
// write the inode, and on a journalled filesystem commit the journal.
// On the 2-vCPU test guest (scripts/trace/fsynclat.py, 600-byte writes)
// a write and fdatasync took a median 0.20-0.27 ms that way against
// 0.17-0.19 ms into blocks already written within the file's size, and
// 0.42-0.44 against 0.20-0.29 ms on a journalled ext4; a store's synced
// one-event Save after a restart was 4-9% faster at the median with a
// spare without a journal, 9-36% with one (BenchmarkSyncedSaveAfterRestart;
// docs/BENCHMARKS.md, issue 19). pebble avoids that once it runs by recycling its obsolete
// logs, but the logs it finds at Open are deleted, not recycled, and it
// grows its memtables from 256 KiB: after every
// start its first logs are new files, and a relay taking ten events a
// second stays in them for hours.
//
// walSpareFS keeps spare log files, written with zeros to the size
// pebble reserves for a log (110% of the memtable), as PostgreSQL's
// wal_init_zero does for its WAL segments. A log pebble creates when it
// has no recycled one takes a ready spare instead of a new file: the
// spare is renamed to the new log's name and written from its start, as
// pebble's own recycling does (its reader takes the zeros after the last
// record for the log's end, as it takes a recycled log's older records;
// pebble recycles the spare like any of its logs once it is obsolete).
// A keeper goroutine writes new spares while fewer than want are ready,
// one at a time and gently, because the first memtables take a spare
// each within seconds under load: at most spareRate a second, the
// writeback of each spareChunk started at once (sync_file_range) so that
// no commit's fdatasync waits behind a whole spare's (written at full
// speed and synced at once, spares raised OK p99 to 26-90 ms at
// 200-2,000 events/s against 3-17 ms without), through the page cache
// (a commit writing into a page not cached would first read it; a spare
// taken is also read ahead, for one written before a reboot), and only
// while the filesystem keeps twice a spare above the store's reserve
// (min_free_bytes); it stops at Close. The spares outlive the process,
// so the first log after a restart is one too; Close hands out none, so
// that its final flush's new log (replayed and deleted at the next open)
// does not take the spare the next open's first log will want.
//
// Files: wal-spare-N (ready) and wal-spare-N.tmp (being written; deleted
// at open). pebble ignores both (neither parses as one of its file
// names), and a checkpoint (petrel backup) does not copy them.
type walSpareFS struct {
	vfs.FS
	sp *walSpares
}

// walCategory is the write category pebble gives its write-ahead logs.
const walCategory vfs.DiskWriteCategory = "pebble-wal"

const walSparePrefix = "wal-spare-"

func (fs walSpareFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if category == walCategory && fs.sp.isWAL(name) {
		if spare := fs.sp.take(); spare != "" {
			f, err := fs.FS.ReuseForWrite(spare, name, category)
			if err == nil {
				fs.sp.used.Add(1)
				return f, nil
			}
			fs.sp.log.Warn("store: a write-ahead log spare could not be used", "spare", spare, "err", err)
			fs.sp.unspared.Add(1)
		}
	}
	return fs.FS.Create(name, category)
}

// Unwrap returns the filesystem underneath (pebble's vfs.Root).
func (fs walSpareFS) Unwrap() vfs.FS { return fs.FS }

// walSpares is the pool of spares of one store directory.
type walSpares struct {
	dir     string
	want    int
	size    int64  // a spare's size: pebble's log reservation, in whole chunks
	minFree uint64 // the store's reserve (0: none)
	log     *slog.Logger

	mu      sync.Mutex
	ready   []string // paths of spares ready to use, oldest first
	next    int      // the number of the next spare file
	closing bool     // Close has begun: hand out no spare

	kick chan struct{}
	stop chan struct{}
	done chan struct{}

	// used: pebble's new logs that took a spare; unspared: those that
	// found none ready (Close's last log aside) and were made new (both
	// Store.Stats); written: spares the keeper wrote (tests).
	used, unspared, written atomic.Int64
}

// openWALSpares adopts the spares left in dir (up to want; .tmp files,
// spares of another size and spares past want are deleted) and starts
// the keeper. dir must be locked by the caller.
func openWALSpares(dir string, want int, size int64, minFree int64, log *slog.Logger) (*walSpares, error) {
	sp, err := newWALSpares(dir, want, size, minFree, log)
	if err != nil {
		return nil, err
	}
	sp.start()
	return sp, nil
}

// start starts the keeper.
func (sp *walSpares) start() {
	go sp.keep()
	sp.poke()
}

// newWALSpares is openWALSpares without the keeper.
func newWALSpares(dir string, want int, size int64, minFree int64, log *slog.Logger) (*walSpares, error) {
	sp := &walSpares{
		dir:  filepath.Clean(dir),
		want: want, log: log,
		size: (size + spareChunk - 1) / spareChunk * spareChunk,
		kick: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	if minFree > 0 {
		sp.minFree = uint64(minFree)
	}
	ents, err := os.ReadDir(sp.dir)
	if err != nil {
		return nil, err
	}
	found, err := sp.scan(ents)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(found, func(a, b spare) int { return a.n - b.n })
	for i, f := range found {
		if i < want {
			sp.ready = append(sp.ready, f.path)
		} else if err := removeGone(f.path); err != nil {
			return nil, err
		}
	}
	return sp, nil
}

// spare is a spare found in the store's directory at open.
type spare struct {
	n    int
	path string
}

// scan picks the spares of the right size out of the directory's entries
// ents, removes the rest of petrel's (half-written ones, and those of
// another size), and moves sp.next past every number in use. A spare
// that is gone by the time it is looked at (removed after the directory
// was read) is skipped.
func (sp *walSpares) scan(ents []fs.DirEntry) ([]spare, error) {
	var found []spare
	for _, e := range ents {
		name := e.Name()
		num, ok := strings.CutPrefix(name, walSparePrefix)
		if !ok {
			continue
		}
		path := filepath.Join(sp.dir, name)
		tmp := strings.HasSuffix(num, ".tmp")
		n, err := strconv.Atoi(strings.TrimSuffix(num, ".tmp"))
		if err != nil {
			continue // not ours
		}
		sp.next = max(sp.next, n+1)
		if tmp {
			if err := removeGone(path); err != nil {
				return nil, err
			}
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if fi.Size() != sp.size {
			// Written for another memtable size (store.memtable_bytes
			// changed): a smaller one would be outgrown, a larger one
			// holds disk for nothing. The keeper writes a new one.
			if err := removeGone(path); err != nil {
				return nil, err
			}
			continue
		}
		found = append(found, spare{n, path})
	}
	return found, nil
}

// removeGone removes path; that it is gone already is no error.
func removeGone(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// isWAL reports whether name is a write-ahead log of the store's
// directory (NNNNNN.log).
func (sp *walSpares) isWAL(name string) bool {
	if filepath.Clean(filepath.Dir(name)) != sp.dir {
		return false
	}
	num, ok := strings.CutSuffix(filepath.Base(name), ".log")
	if !ok || num == "" {
		return false
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// take returns the path of a ready spare, which the caller now owns, or
// "" when there is none (or Close has begun).
func (sp *walSpares) take() string {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closing {
		return ""
	}
	if len(sp.ready) == 0 {
		sp.unspared.Add(1)
		return ""
	}
	p := sp.ready[0]
	sp.ready = sp.ready[1:]
	sp.poke()
	prefetch(p)
	return p
}

// prefetch has the kernel read path into the page cache, from another
// goroutine (the caller, pebble making a log, is on the commit path): a
// commit's write into a page of the file that is not cached would first
// read the page from the disk. The spares are written through the page
// cache, so this matters for one written before a reboot.
func prefetch(path string) {
	f, err := os.Open(path) // before the caller renames it
	if err != nil {
		return
	}
	go func() {
		unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_WILLNEED)
		f.Close()
	}()
}

// newName returns the path of the next spare file (sp.mu held).
func (sp *walSpares) newName() string {
	sp.next++
	return filepath.Join(sp.dir, walSparePrefix+strconv.Itoa(sp.next-1))
}

func (sp *walSpares) poke() {
	select {
	case sp.kick <- struct{}{}:
	default:
	}
}

// readyCount is how many spares are ready (Store.Stats, tests).
func (sp *walSpares) readyCount() int {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return len(sp.ready)
}

// beginClose makes take hand out nothing more: the store is closing.
func (sp *walSpares) beginClose() {
	sp.mu.Lock()
	sp.closing = true
	sp.mu.Unlock()
}

// close stops the keeper and waits for it; a spare it was writing is
// deleted (the next open would delete it anyway).
func (sp *walSpares) close() {
	sp.beginClose()
	close(sp.stop)
	<-sp.done
}

// keep is the keeper: on each poke it writes new spares until want are
// ready.
func (sp *walSpares) keep() {
	defer close(sp.done)
	for {
		select {
		case <-sp.stop:
			return
		case <-sp.kick:
		}
		for sp.step() {
		}
	}
}

// step writes one spare and reports whether there may be more to do.
func (sp *walSpares) step() bool {
	sp.mu.Lock()
	var ready string
	if !sp.closing && len(sp.ready) < sp.want {
		ready = sp.newName()
	}
	sp.mu.Unlock()
	if ready == "" {
		return false
	}
	tmp := ready + ".tmp"
	start := time.Now()
	err := sp.fill(tmp)
	sp.mu.Lock()
	if err == nil && sp.closing {
		err = errSpareStopped
	}
	if err == nil {
		if err = os.Rename(tmp, ready); err == nil {
			sp.ready = append(sp.ready, ready)
			sp.written.Add(1)
		}
	}
	sp.mu.Unlock()
	if err != nil {
		os.Remove(tmp)
		if err != errSpareStopped {
			// Tried again at the next poke (the next log pebble creates).
			sp.log.Warn("store: no write-ahead log spare", "err", err)
		}
		return false
	}
	if err := syncDir(sp.dir); err != nil {
		sp.log.Warn("store: syncing the store directory after a write-ahead log spare", "err", err)
	}
	sp.log.Debug("store: write-ahead log spare ready", "path", ready, "bytes", sp.size, "took", time.Since(start))
	return true
}

var errSpareStopped = errors.New("store: closing")

// The keeper's pace: spareChunk bytes a write, at most spareRate bytes a
// second (a 70 MiB spare in about nine seconds).
const (
	spareChunk = 256 << 10
	spareRate  = 8 << 20
)

// fill writes path, a new file, with zeros to the spare size and syncs
// it, if the filesystem keeps twice the spare size above the reserve.
func (sp *walSpares) fill(path string) error {
	du, err := vfs.Default.GetDiskUsage(sp.dir)
	if err != nil {
		return err
	}
	if !roomForSpare(du.AvailBytes, sp.minFree, sp.size) {
		return fmt.Errorf("%s free on %s, under twice a spare (%s) above the reserve (%s)",
			mib(du.AvailBytes), sp.dir, mib(uint64(sp.size)), mib(sp.minFree))
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, spareChunk)
	every := time.Second * spareChunk / spareRate
	next := time.Now()
	for off := int64(0); off < sp.size; off += spareChunk {
		select {
		case <-sp.stop:
			return errSpareStopped
		case <-time.After(time.Until(next)): // at once when next is past
		}
		if _, err := f.WriteAt(buf, off); err != nil {
			return err
		}
		// Start the chunk's writeback now, so that the final sync has
		// little left to write at once: a commit's sync meanwhile would
		// wait behind it.
		unix.SyncFileRange(int(f.Fd()), off, spareChunk, unix.SYNC_FILE_RANGE_WRITE)
		next = next.Add(every)
	}
	return unix.Fdatasync(int(f.Fd()))
}

// roomForSpare reports whether a filesystem with free bytes available
// keeps twice a spare of size above the store's reserve minFree.
func roomForSpare(free, minFree uint64, size int64) bool {
	return free >= minFree+2*uint64(size)
}

// syncDir makes the directory's entries (a rename) durable.
func syncDir(dir string) error {
	d, err := vfs.Default.OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
