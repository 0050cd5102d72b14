package pebble

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/search"
	"github.com/petrel-relay/petrel/internal/store"
)

// ErrFormat is returned by Open for a database written in another format
// (or by something else).
var ErrFormat = errors.New("store/pebble: unknown database format")

// ErrReadOnly is returned by every write to a store opened with
// Options.ReadOnly.
var ErrReadOnly = errors.New("store/pebble: the store is open read-only")

// Store is the embedded event store. It implements store.Store; all
// methods are safe for concurrent use.
//
// Writes go through one writer goroutine (see writer.go); queries read
// pebble snapshots and never block writes.
type Store struct {
	opts Options
	db   *pebble.DB
	lock *dirLock // the data directory's, released after db is closed
	log  *slog.Logger

	// mu guards the transition to closed: operations that must not run
	// on a closed database hold it for reading; Close takes it for
	// writing once closed is set and closing is closed.
	mu      sync.RWMutex
	closed  atomic.Bool
	closing chan struct{}

	queue      chan *request
	writerDone chan struct{}
	purgeDone  chan struct{}

	itersMu sync.Mutex
	iters   map[*iterator]struct{}

	lastSize atomic.Int64
	// space refuses writes that would fill the disk (MinFreeBytes).
	space *reserve

	// commits is the commit position of the writer's last commit that
	// stored events (commitKey; store.SaveResult.Seq), and HasAt's token
	// (see recentIDs). Only the writer moves it, after the commit.
	commits atomic.Uint64
	// precheckHits counts saves whose duplicate lookup the token spared
	// (for tests).
	precheckHits atomic.Uint64
	// batchIndexed counts the write batches a read made indexed
	// (writer.reader).
	batchIndexed atomic.Uint64
	// syncs counts the writer's synced commits (store.Stats.Commits),
	// whatever they wrote; commits (the commit position) counts those
	// that stored events, synced or not.
	syncs atomic.Uint64
	// seen is the filter of stored ids HasAt consults (nil until built);
	// seenBuilding is a filter being built, which the writer also adds
	// to; seenBuild is set while a build runs (see seen.go).
	seen         atomic.Pointer[idBloom]
	seenBuilding atomic.Pointer[idBloom]
	seenBuild    atomic.Bool
	seenOnce     sync.Once
	seenSkips    atomic.Uint64 // lookups the filter spared (for tests)
	// bodies caches the bodies of recently stored events (nil when off).
	bodies *bodyCache
	// bg counts background goroutines Close waits for before closing
	// pebble.
	bg sync.WaitGroup
	// deadPostings mirrors the writer's count of postings of removed
	// events (Stats).
	deadPostings atomic.Uint64

	// segments says the search index may hold posting segments (G keys,
	// segments.go): set at open when the index has the current layout.
	// A read-only open of an index in the layout before them (searchIndexV1)
	// reads no G key, as a G key there can only be one that an older
	// build left behind (it does not know them).
	segments bool

	// writeOps and writeBytes count the operations (keys set or deleted)
	// and the bytes of the batches the writer committed, for tests and
	// benchmarks (keys written per event).
	writeOps, writeBytes atomic.Uint64
	// events mirrors the writer's count of stored events (Stats).
	events atomic.Int64
	// pebbleEvents counts and logs pebble's flushes, compactions and
	// write stalls (events.go).
	pebbleEvents *events
	// pace decides whether a flush or compaction yields or pauses after
	// each block it writes, and counts both (pace.go, yieldfs.go).
	pace *pacer

	// spares keeps write-ahead log spares (walspare.go); nil when
	// Options.WALSpares is 0, read-only, on a tmpfs or another FS.
	spares *walSpares
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Searcher = (*Store)(nil)
)

// OpenError is every error of Open after its options were checked: the
// directory and why it could not be opened.
type OpenError struct {
	Path string
	Err  error
}

// Error names the directory and the cause.
func (e *OpenError) Error() string { return fmt.Sprintf("open pebble store %q: %v", e.Path, e.Err) }

// Unwrap returns the cause.
func (e *OpenError) Unwrap() error { return e.Err }

// ErrNoStore is wrapped by Open with Options.NoCreate or ReadOnly when
// the directory holds no pebble database.
var ErrNoStore = errors.New("store/pebble: no store in the directory")

// ErrForeignDir is wrapped by Open when asked to create a store in a
// directory that holds files and no store (a mistyped data directory, a
// home directory): the store's files are not scattered among someone
// else's, where pebble would also delete any file named like one of its
// own that it does not know. The error names the first such file.
var ErrForeignDir = errors.New("store/pebble: the directory holds other files and no store")

// ErrPartialStore is wrapped by Open when asked to create a store in a
// directory that holds a store's tables or write-ahead logs but no
// manifest: a copy or backup that did not finish, or a store whose
// manifest was lost. pebble would start an empty store there and delete
// them as files it does not know. The error counts them and names one.
var ErrPartialStore = errors.New("store/pebble: the directory holds a store's tables but no manifest")

// partialStoreError is checkCreate's ErrPartialStore.
type partialStoreError struct {
	file string
	n    int
}

func (e partialStoreError) Error() string {
	return fmt.Sprintf("the directory holds %d table or log files of a store (%q among them) and no manifest: a copy or backup that did not finish? It cannot be opened, and a new store there would delete them: restore a whole copy, or move them away", e.n, e.file)
}

func (e partialStoreError) Is(target error) bool { return target == ErrPartialStore }

// foreignDirError is checkCreate's ErrForeignDir, naming a file.
type foreignDirError struct{ file string }

func (e foreignDirError) Error() string {
	return fmt.Sprintf("the directory holds other files (%q among them) and no store: give an empty or new directory", e.file)
}

func (e foreignDirError) Is(target error) bool { return target == ErrForeignDir }

// checkCreate returns an error wrapping ErrForeignDir when path holds no
// pebble database and an entry neither pebble nor this package writes
// (ownFile), or ErrPartialStore when it holds tables or non-empty logs
// (dataFile): pebble writes those only once the manifest exists. A
// missing or empty directory, a file system's lost+found and the files
// of a creation that did not finish are fine. An error while looking is
// left for pebble.Open to report.
func checkCreate(fsys vfs.FS, path string) error {
	if fsys == nil {
		fsys = vfs.Default
	}
	if storeExists(fsys, path) != ErrNoStore {
		return nil
	}
	names, err := fsys.List(path)
	if err != nil {
		return nil
	}
	slices.Sort(names)
	for _, n := range names {
		if !ownFile(n) {
			return foreignDirError{n}
		}
	}
	return partialStore(fsys, path, names)
}

// partialStore returns a partialStoreError when names, the entries of
// path (which holds no store), include a store's tables or non-empty logs
// (dataFile), and nil otherwise.
func partialStore(fsys vfs.FS, path string, names []string) error {
	var partial partialStoreError
	for _, n := range names {
		if dataFile(fsys, path, n) {
			if partial.n++; partial.file == "" {
				partial.file = n
			}
		}
	}
	if partial.n > 0 {
		return partial
	}
	return nil
}

// dataFile reports whether name, in dir, holds a store's data: a table
// (.sst, .blob) or a write-ahead log that is not empty.
func dataFile(fsys vfs.FS, dir, name string) bool {
	num, ext, ok := strings.Cut(name, ".")
	if !ok || num == "" || strings.Trim(num, "0123456789") != "" {
		return false
	}
	switch ext {
	case "sst", "blob":
		return true
	case "log":
		fi, err := fsys.Stat(fsys.PathJoin(dir, name))
		return err != nil || fi.Size() > 0
	}
	return false
}

// ownFile reports whether name is one pebble writes in its directory
// (NNNNNN.log, .sst and .blob, MANIFEST-, OPTIONS-, marker., temporary.,
// CURRENT, LOCK), one this package writes (write-ahead log spares) or a
// file system's lost+found.
func ownFile(name string) bool {
	switch name {
	case "LOCK", "CURRENT", "lost+found":
		return true
	}
	for _, p := range []string{"MANIFEST-", "OPTIONS-", "marker.", "temporary.", walSparePrefix} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	num, ext, ok := strings.Cut(name, ".")
	if !ok || num == "" || strings.Trim(num, "0123456789") != "" {
		return false
	}
	switch ext {
	case "log", "sst", "blob":
		return true
	}
	return false
}

// storeExists returns ErrNoStore unless path holds a pebble database (its
// current manifest), reading the directory only.
func storeExists(fsys vfs.FS, path string) error {
	if fsys == nil {
		fsys = vfs.Default
	}
	desc, err := pebble.Peek(path, fsys)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return ErrNoStore
	case err != nil:
		return err
	case !desc.Exists:
		return ErrNoStore
	}
	return nil
}

// Open opens (creating if needed) the store at opts.Path. The store holds
// the directory's lock until Close: while another process, or another
// Store of this one, has it open, Open fails with an error wrapping
// ErrLocked. With Options.NoCreate or ReadOnly, a directory without a
// store is refused (ErrNoStore) untouched; without, a directory of other
// files is (ErrForeignDir).
func Open(opts Options) (*Store, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	popts := &pebble.Options{
		FS:                          o.FS,
		CacheSize:                   o.CacheSize,
		MemTableSize:                o.MemTableSize,
		MemTableStopWritesThreshold: 4,
		FormatMajorVersion:          pebble.FormatNewest,
		Logger:                      slogLogger{o.Logger},
		L0CompactionThreshold:       4,
		L0StopWritesThreshold:       24,
		LBaseMaxBytes:               256 << 20,
		MaxOpenFiles:                4096,
		ReadOnly:                    o.ReadOnly,
	}
	// Tables of 2 MiB in L0 (what a flush writes) and 4 MiB in Lbase,
	// doubling below: pebble's defaults, set here because they matter.
	// A table's filter is built, and its index and properties written,
	// in one stretch when it is finished, without a block write (and so
	// a yield, yieldfs.go) in between; with the 8 MiB L0 and 16 MiB
	// Lbase tables of earlier releases those stretches held the
	// processor 7-16 ms in flushes and compactions, and the request
	// path waited behind them (docs/BENCHMARKS.md, issue 19,
	// thirty-first sitting).
	popts.TargetFileSizes[0] = 2 << 20
	popts.TargetFileSizes[1] = 4 << 20
	for i := range popts.Levels {
		popts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		popts.Levels[i].BlockSize = 16 << 10
	}
	popts.CompactionConcurrencyRange = func() (int, int) { return 1, 2 }
	if o.ReadOnly {
		// A read-only open serves a command that looks a few things up
		// and exits (req --store): it loads no table statistics in the
		// background, and it reads no bloom filters. A table's filter
		// block is 60-110 KiB on a 100k-event store, read whole to answer
		// one point lookup that the table's 16 KiB data block answers
		// too; without a policy configured, pebble leaves the blocks
		// unread (docs/BENCHMARKS.md, issue 15).
		popts.DisableTableStats = true
		for i := range popts.Levels {
			popts.Levels[i].FilterPolicy = nil
		}
		// Nothing is written, so pebble's disk-health checks (a wrapper
		// of every file and a goroutine watching write latency) have
		// nothing to watch; one file-cache shard (one goroutine, one
		// map) serves a command's few tables (pebble makes one per
		// CPU otherwise).
		if popts.FS == nil {
			popts.FS = vfs.Default
		}
		popts.Experimental.FileCacheShards = 1
	}
	if o.NoCreate || o.ReadOnly {
		if err := storeExists(popts.FS, o.Path); err != nil {
			if errors.Is(err, ErrNoStore) {
				// Not "no store" when a store's tables are there.
				fsys := popts.FS
				if fsys == nil {
					fsys = vfs.Default
				}
				if names, lerr := fsys.List(o.Path); lerr == nil {
					if perr := partialStore(fsys, o.Path, names); perr != nil {
						err = perr
					}
				}
			}
			return nil, &OpenError{Path: o.Path, Err: err}
		}
	} else if err := checkCreate(o.FS, o.Path); err != nil {
		return nil, &OpenError{Path: o.Path, Err: err}
	}
	pace := newPacer(o.BackgroundPause, o.MemTableSize)
	ev := &events{log: o.Logger}
	pace.stallStart = &ev.stallStart
	popts.EventListener = ev.listener()
	lock, err := lockDir(o.FS, o.Path)
	if err != nil {
		return nil, &OpenError{Path: o.Path, Err: err}
	}
	popts.Lock = lock.pl
	var spares *walSpares
	if !o.ReadOnly {
		fs := o.FS
		if fs == nil {
			fs = vfs.Default
			if onTmpfs(o.Path) {
				fs = tmpfsWALFS{FS: fs}
			} else if o.WALSpares > 0 {
				// The size pebble reserves for a log (DB.walPreallocateSize).
				size := int64(o.MemTableSize + o.MemTableSize/10)
				spares, err = openWALSpares(o.Path, o.WALSpares, size, o.MinFreeBytes, o.Logger)
				if err != nil {
					lock.release()
					return nil, &OpenError{Path: o.Path, Err: fmt.Errorf("write-ahead log spares: %w", err)}
				}
				fs = walSpareFS{FS: fs, sp: spares}
			}
		}
		popts.FS = yieldFS{FS: fs, pace: pace}
	}
	db, err := pebble.Open(o.Path, popts)
	if err != nil {
		if spares != nil {
			spares.close()
		}
		lock.release()
		return nil, &OpenError{Path: o.Path, Err: err}
	}
	s := &Store{
		opts:         o,
		db:           db,
		lock:         lock,
		log:          o.Logger,
		closing:      make(chan struct{}),
		queue:        make(chan *request, o.QueueLen),
		writerDone:   make(chan struct{}),
		purgeDone:    make(chan struct{}),
		iters:        make(map[*iterator]struct{}),
		bodies:       newBodyCache(o.BodyCacheBytes),
		space:        newReserve(o.FS, o.Path, o.MinFreeBytes),
		pebbleEvents: ev,
		pace:         pace,
		spares:       spares,
	}
	metrics := db.Metrics
	pace.metrics.Store(&metrics)
	from, err := s.checkFormat()
	if err == nil && from != "" && !o.ReadOnly {
		err = s.upgradeMeta(from)
	}
	if err == nil {
		err = s.openSearch()
	}
	var c commitState
	if err == nil {
		var full bool
		c, full, err = readCommit(s.db)
		if err == nil && !full && !o.ReadOnly { // a writable open upgraded it above
			err = fmt.Errorf("%w: no commit state in a %s database", errCorrupt, formatVersion)
		}
		s.commits.Store(c.pos)
	}
	if err != nil {
		s.closeDB()
		return nil, &OpenError{Path: o.Path, Err: err}
	}
	if o.ReadOnly {
		close(s.writerDone)
		close(s.purgeDone)
		return s, nil
	}
	w, err := newWriter(s, c)
	if err != nil {
		s.closeDB()
		return nil, &OpenError{Path: o.Path, Err: err}
	}
	go w.run()
	if o.PurgeInterval > 0 {
		go s.purgeLoop(o.PurgeInterval)
	} else {
		close(s.purgeDone)
	}
	return s, nil
}

// checkFormat writes the format key, the commit state (and an empty
// search index) into an empty database, and refuses a database with
// another (or no) format key. It returns the older format a database is
// in (formatV1 or formatV2, upgraded by upgradeMeta), or "" for the
// current one. A read-only open reads formatV2 as it is and refuses
// formatV1 (whose upgrade builds the search index).
func (s *Store) checkFormat() (from string, err error) {
	v, closer, err := s.db.Get(formatKey)
	if err == nil {
		defer closer.Close()
		switch string(v) {
		case formatVersion:
			return "", nil
		case formatV2:
			return formatV2, nil
		case formatV1:
			if s.opts.ReadOnly {
				return "", fmt.Errorf("%w: %q needs an upgrade, which a read-only open cannot do (open it once with petrel serve)", ErrFormat, v)
			}
			return formatV1, nil
		}
		return "", fmt.Errorf("%w: %q, this build reads %q (and upgrades %q and %q)", ErrFormat, v, formatVersion, formatV2, formatV1)
	}
	if !errors.Is(err, pebble.ErrNotFound) {
		return "", err
	}
	it, err := s.db.NewIter(nil)
	if err != nil {
		return "", err
	}
	nonEmpty := it.First()
	if err := it.Close(); err != nil {
		return "", err
	}
	if nonEmpty {
		return "", fmt.Errorf("%w: no format key in a non-empty database", ErrFormat)
	}
	if s.opts.ReadOnly {
		return "", fmt.Errorf("%w: an empty database (no petrel store here yet)", ErrFormat)
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.Set(formatKey, []byte(formatVersion), nil); err != nil {
		return "", err
	}
	if err := b.Set(commitKey, appendCommitState(nil, commitState{}), nil); err != nil {
		return "", err
	}
	if !s.opts.DisableSearch {
		if err := b.Set(searchKey, []byte(searchIndexVersion), nil); err != nil {
			return "", err
		}
	}
	if err := s.spaceFor(int(b.Len())); err != nil {
		return "", err
	}
	return "", b.Commit(pebble.Sync)
}

// upgradeMeta brings a formatV2 or formatV1 database to the current
// format in one synced batch: the commit state moves into commitKey from
// the position it held, eventCountKey (the I keys are counted when it is
// missing or stale) and searchStatsKey (openSearch then builds, drops or
// keeps the index as for any database of this format).
func (s *Store) upgradeMeta(from string) error {
	pos, _, err := getU64(s.db, commitKey)
	if err != nil {
		return err
	}
	c := commitState{pos: pos}
	v, found, err := getValue(s.db, eventCountKey)
	if err != nil {
		return err
	}
	if found && len(v) == 16 && binary.BigEndian.Uint64(v[8:]) == pos {
		c.events = binary.BigEndian.Uint64(v)
	} else {
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxID}, UpperBound: []byte{pfxID + 1}})
		if err != nil {
			return err
		}
		for it.First(); it.Valid(); it.Next() {
			c.events++
		}
		if err := it.Close(); err != nil {
			return err
		}
		if found || c.events > 0 {
			s.log.Info("store: counted the stored events once", "events", c.events)
		}
	}
	_, indexed, err := getValue(s.db, searchKey)
	if err != nil {
		return err
	}
	if v, found, err = getValue(s.db, searchStatsKey); err != nil {
		return err
	} else if found {
		var ok bool
		if c.search, ok = decodeSearchStats(v); !ok {
			return fmt.Errorf("%w: search stats %x", errCorrupt, v)
		}
	} else if indexed {
		return fmt.Errorf("%w: a search index without its figures", errCorrupt)
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, err := range []error{
		b.Set(commitKey, appendCommitState(nil, c), nil),
		b.Delete(eventCountKey, nil),
		b.Delete(searchStatsKey, nil),
		b.Set(formatKey, []byte(formatVersion), nil),
	} {
		if err != nil {
			return err
		}
	}
	if err := s.spaceFor(int(b.Len())); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("upgrade the store format: %w", err)
	}
	s.log.Info("store: format upgraded", "from", from, "to", formatVersion, "events", c.events)
	return nil
}

// setSearchStats adds to b the commit state with the search figures st.
// Only before the writer starts (openSearch): the writer owns the state.
func (s *Store) setSearchStats(b *pebble.Batch, st search.Stats) error {
	c, full, err := readCommit(s.db)
	if err != nil {
		return err
	}
	if !full {
		return fmt.Errorf("%w: no commit state in a %s database", errCorrupt, formatVersion)
	}
	c.search = st
	return b.Set(commitKey, appendCommitState(nil, c), nil)
}

// purgeLoop purges expired events every interval until the store closes.
func (s *Store) purgeLoop(interval time.Duration) {
	defer close(s.purgeDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-t.C:
			n, err := s.PurgeExpired(context.Background(), time.Now().Unix())
			switch {
			case errors.Is(err, store.ErrClosed):
				return
			case err != nil:
				s.log.Error("store: purging expired events", "err", err)
			case n > 0:
				s.log.Debug("store: purged expired events", "count", n)
			}
		}
	}
}

// enqueue hands a request to the writer. It blocks while the queue is
// full, until ctx ends or the store closes.
func (s *Store) enqueue(ctx context.Context, r *request) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return store.ErrClosed
	}
	if s.opts.ReadOnly {
		return ErrReadOnly
	}
	if r.op == opSave {
		s.wantSeen() // here, under s.mu and open: Close waits for the build
	}
	select {
	case s.queue <- r:
		return nil
	default:
	}
	select {
	case s.queue <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.closing:
		return store.ErrClosed
	}
}

// wait waits for a request handed to the writer to be committed. It does
// not give up when the caller's context ends: the writer commits what it
// was handed (Close lets it drain its queue), and a caller told of a
// cancellation meanwhile would not know what was saved (store.Store).
func wait(r *request) error {
	<-r.done
	return r.err
}

// Save implements store.Store.
func (s *Store) Save(ctx context.Context, events []*nostr.Event) ([]store.SaveResult, error) {
	r := &request{op: opSave, events: events, done: make(chan struct{})}
	if err := s.enqueue(ctx, r); err != nil {
		return nil, err
	}
	err := wait(r)
	return r.results, err
}

// Submit implements store.Store.
func (s *Store) Submit(ctx context.Context, ev *nostr.Event, done func(store.SaveResult)) error {
	return s.enqueue(ctx, &request{op: opSubmit, events: []*nostr.Event{ev}, callback: done})
}

// SubmitAfter implements store.Prechecker: the writer skips its duplicate
// lookup when no commit since token stored ev's id (see recentIDs).
func (s *Store) SubmitAfter(ctx context.Context, ev *nostr.Event, token uint64, done func(store.SaveResult)) error {
	return s.enqueue(ctx, &request{op: opSubmit, events: []*nostr.Event{ev}, callback: done, token: token, checked: true})
}

var _ store.Prechecker = (*Store)(nil)

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, ids []nostr.ID) (int, error) {
	r := &request{op: opDelete, ids: ids, done: make(chan struct{})}
	if err := s.enqueue(ctx, r); err != nil {
		return 0, err
	}
	if err := wait(r); err != nil {
		return 0, err
	}
	return r.n, nil
}

// foldSegments makes the writer fold the posting segments into S blocks
// now (segments.go), in a batch of its own or one shared with other
// requests.
func (s *Store) foldSegments(ctx context.Context) error {
	r := &request{op: opFold, done: make(chan struct{})}
	if err := s.enqueue(ctx, r); err != nil {
		return err
	}
	return wait(r)
}

// purgeChunk is the most expired events one writer request removes.
const purgeChunk = 4096

// PurgeExpired implements store.Store. It removes the expired events in
// chunks of purgeChunk, one writer request each, so that it never holds up
// other writes for long.
func (s *Store) PurgeExpired(ctx context.Context, now int64) (int, error) {
	total := 0
	for {
		r := &request{op: opPurge, now: now, done: make(chan struct{})}
		if err := s.enqueue(ctx, r); err != nil {
			return total, err
		}
		if err := wait(r); err != nil {
			return total, err
		}
		total += r.n
		if !r.more {
			return total, nil
		}
	}
}

// Has implements store.Store.
func (s *Store) Has(ctx context.Context, id nostr.ID) (bool, error) {
	found, _, err := s.HasAt(ctx, id)
	return found, err
}

// HasAt implements store.Prechecker. The token is the number of commits
// visible before the lookup, so any commit the lookup may have missed
// comes after it.
func (s *Store) HasAt(ctx context.Context, id nostr.ID) (bool, uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return false, 0, store.ErrClosed
	}
	token := s.commits.Load()
	f := s.seen.Load()
	if f == nil {
		s.wantSeen()
	} else if !f.mayContain(&id) {
		s.seenSkips.Add(1)
		return false, token, nil
	}
	found, err := hasKey(s.db, idKey(&id))
	if err != nil {
		return false, 0, err
	}
	return found, token, nil
}

// wantSeen starts building the filter of stored ids (seen.go) unless it
// was started before. The caller holds s.mu (read) and has seen the
// store open, so that Close, which takes s.mu before it waits for s.bg,
// waits for the build. Called by the first HasAt and the first Save, not
// at Open: tools that neither ask nor save (export, scan) do not pay for
// it. With it the writer's duplicate check of a Save (import, sync,
// migrate) costs no lookup for most new ids, and so a batch of them is
// never made indexed for one (writer.reader).
func (s *Store) wantSeen() {
	s.seenOnce.Do(func() { s.startSeenBuild(s.estimateIDs()) })
}

// Stats implements store.Store. SizeBytes is pebble's disk space usage
// (sstables, WAL, manifests, blob files).
func (s *Store) Stats() store.Stats {
	st := store.Stats{Backend: "pebble", DiskFull: s.space.full.Load()}
	st.DiskFreeBytes, st.DiskSizeBytes = s.space.usage()
	s.mu.RLock()
	defer s.mu.RUnlock()
	st.SearchDeadPostings = int64(s.deadPostings.Load())
	st.Events = s.events.Load()
	st.Commits = int64(s.syncs.Load())
	if sp := s.spares; sp != nil {
		st.WALSpares, st.WALSparesReady = int64(sp.want), int64(sp.readyCount())
		st.WALSparesUsed, st.WALLogsUnspared = sp.used.Load(), sp.unspared.Load()
	}
	if f := s.seen.Load(); f != nil {
		st.IDFilterBytes = int64(len(f.words) * 8)
	}
	if s.closed.Load() {
		st.SizeBytes = s.lastSize.Load()
		return st
	}
	m := s.db.Metrics()
	st.SizeBytes = int64(m.DiskSpaceUsage())
	s.lastSize.Store(st.SizeBytes)
	st.Background = s.background(m)
	return st
}

// background is store.Stats.Background from pebble's metrics and the
// store's event listener.
func (s *Store) background(m *pebble.Metrics) *store.Background {
	ev := s.pebbleEvents
	bg := &store.Background{
		Flushes:             m.Flush.Count,
		Compactions:         m.Compact.Count,
		CompactionDebtBytes: int64(m.Compact.EstimatedDebt),
		L0Sublevels:         int64(m.Levels[0].Sublevels),
		L0Tables:            m.Levels[0].TablesCount,
		WriteStalls:         int64(ev.stalls.Load()),
	}
	stalled := ev.stalledNs.Load()
	if start := ev.stallStart.Load(); start != 0 {
		stalled += max(0, time.Now().UnixNano()-start)
	}
	bg.WriteStallSeconds = float64(stalled) / 1e9
	for i := range m.Levels {
		l := &m.Levels[i]
		bg.FlushBytes += int64(l.TableBytesFlushed + l.BlobBytesFlushed)
		bg.CompactionBytes += int64(l.TableBytesCompacted + l.BlobBytesCompacted)
	}
	return bg
}

// Close implements store.Store: it stops accepting work, lets the writer
// commit everything queued, closes open iterators, then closes pebble.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return store.ErrClosed
	}
	close(s.closing)
	s.pace.quiet.Store(true) // the final flush runs at full speed
	s.mu.Lock()              // wait for in-flight enqueues and reads
	s.mu.Unlock()
	<-s.purgeDone
	close(s.queue)
	<-s.writerDone
	s.bg.Wait()
	s.itersMu.Lock()
	iters := s.iters
	s.iters = nil
	s.itersMu.Unlock()
	for it := range iters {
		it.forceClose()
	}
	if s.spares != nil {
		// The final flush's new log (replayed and deleted at the next
		// open) takes no spare: the next open's first log will
		// (walspare.go).
		s.spares.beginClose()
	}
	if !s.opts.ReadOnly {
		// Leave nothing in the write-ahead log: the next open, above all
		// a read-only one (req --store), which cannot flush and replays
		// the whole log into memory every time, then starts from the
		// tables alone (after an import, the log held the whole import).
		if err := s.db.Flush(); err != nil {
			s.log.Warn("store: flushing the memtable at close", "err", err)
		}
	}
	if !s.opts.ReadOnly {
		// Stats after Close report the size at Close. A read-only open
		// changed nothing, and a command that looked something up and
		// exits would pay for pebble's whole metrics here: it reports the
		// size of its last Stats call instead.
		s.lastSize.Store(int64(s.db.Metrics().DiskSpaceUsage()))
	}
	return s.closeDB()
}

// closeDB closes pebble, then releases the data directory.
func (s *Store) closeDB() error {
	err := s.db.Close()
	if s.spares != nil {
		s.spares.close()
	}
	if lerr := s.lock.release(); err == nil {
		err = lerr
	}
	return err
}

// track registers an open iterator, or reports false after Close.
func (s *Store) track(it *iterator) bool {
	s.itersMu.Lock()
	defer s.itersMu.Unlock()
	if s.iters == nil {
		return false
	}
	s.iters[it] = struct{}{}
	return true
}

func (s *Store) untrack(it *iterator) {
	s.itersMu.Lock()
	defer s.itersMu.Unlock()
	if s.iters != nil {
		delete(s.iters, it)
	}
}

// slogLogger adapts slog to pebble.Logger. Pebble's informational
// messages go out at debug level.
type slogLogger struct{ l *slog.Logger }

func (l slogLogger) Infof(format string, args ...any) {
	// Formatted only when it will be written: pebble reports every open
	// (the write-ahead logs it replays, for one), and a read-only open in
	// a short command is otherwise paying for messages nobody sees.
	if !l.l.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	l.l.Debug("pebble: " + fmt.Sprintf(format, args...))
}

func (l slogLogger) Errorf(format string, args ...any) {
	l.l.Error("pebble: " + fmt.Sprintf(format, args...))
}

func (l slogLogger) Fatalf(format string, args ...any) {
	msg := "pebble: " + fmt.Sprintf(format, args...)
	l.l.Error(msg)
	panic(msg)
}
