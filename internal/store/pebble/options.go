package pebble

import (
	"fmt"
	"log/slog"
	"math/bits"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configures Open. The zero value of every field but Path means
// its default.
type Options struct {
	// Path is the directory holding the database; it is created if
	// missing. Required.
	Path string

	// NoSync commits batches without waiting for the write-ahead log to
	// reach the disk: a crash may then lose the last moments of writes
	// that were reported saved. Meant for bulk imports. Default false
	// (every commit is synced before Save returns or done is called).
	NoSync bool

	// CacheSize is the block cache size in bytes. Default 256 MiB.
	CacheSize int64

	// MemTableSize is the size of one memtable in bytes. Default 64 MiB.
	MemTableSize uint64

	// BackgroundPause is how long a flush or compaction sleeps after
	// each block it writes while the writer is committing (a commit in
	// the last 50 ms) and pebble is under no write pressure (pace.go):
	// the request path then has the processor first. Meant for a relay
	// whose Go code runs on one processor. Default 0: no pause (each
	// block only yields the processor). During a write stall a flush or
	// compaction neither pauses nor yields, whatever this is.
	BackgroundPause time.Duration

	// MaxBatch is the most events the writer puts in one commit (a single
	// Save larger than this is still one commit). Default 1024.
	MaxBatch int

	// MaxBatchBytes is the most event bytes the writer puts in one commit
	// (same caveat). Default 8 MiB.
	MaxBatchBytes int

	// QueueLen is the writer's queue length in requests (one Submit is
	// one request, one Save is one request). Submit and Save block while
	// it is full. Default 4096.
	QueueLen int

	// PurgeInterval is how often expired events are purged in the
	// background. Default 1 minute; negative disables the background
	// purge (PurgeExpired still works).
	PurgeInterval time.Duration

	// Logger receives the store's and pebble's messages. Default
	// slog.Default().
	Logger *slog.Logger

	// DisableSearch turns the NIP-50 search index off: events are not
	// indexed, filters with Search match nothing, and SupportsSearch
	// reports false (the relay must then not advertise NIP-50). Opening
	// a database that has an index with DisableSearch drops the index;
	// opening one without an index (or with an index built by another
	// version of the analyzer) with search on builds it from the stored
	// events before Open returns. Default false (search on).
	DisableSearch bool

	// unsortedCommits commits the writer's batches in the order they were
	// written instead of key order (commitSorted), for the test that
	// compares the two.
	unsortedCommits bool

	// RebuildSearch rebuilds the search index from the stored events at
	// Open (with search on). Postings of removed events (replaced,
	// deleted, vanished, purged) stay in the index, skipped by searches
	// but taking space and search work, until a rebuild clears them
	// (petrel compact --rebuild-search). Default false.
	RebuildSearch bool

	// IDFilterMaxBytes caps the in-memory filter of stored ids that
	// spares HasAt a database lookup for most new ids (16 bits per
	// stored event, rounded to a power of two; past the cap the filter
	// grows less precise, never wrong). Default 64 MiB (32 million events
	// at full precision); negative: no filter.
	IDFilterMaxBytes int

	// ReadOnly opens the database for reading only, for a command that
	// looks something up and exits: nothing is written (no write-ahead
	// log, manifest or options file is created, no format or search key
	// is set, no background purge runs), so opening and closing cost a
	// fraction of a writable open. Save, Submit, Delete and the other
	// writes return ErrReadOnly. The directory's lock is still taken, so
	// a running writer (petrel serve) and a reader never share it. A
	// database that needs an upgrade or has no petrel format key is
	// refused; one whose search index is missing or stale is opened with
	// search off. Lookups read no bloom filters and no table statistics
	// are loaded (a one-shot lookup reads a table's data block rather
	// than its larger filter block). Default false.
	ReadOnly bool

	// NoCreate makes Open fail with ErrNoStore, instead of creating the
	// directory and a database in it, when Path holds no pebble database
	// (a missing or empty directory, or one of other files: tools that
	// read or change an existing store, where a mistyped --data must not
	// leave a new store behind). Nothing is created or written there,
	// not even the lock file. ReadOnly implies it; the postgres store's
	// Options.NoCreate is its counterpart. Default false.
	NoCreate bool

	// BodyCacheBytes is the memory for the bodies of the most recently
	// stored events (at most 65,536 of them), which queries then read
	// without a database seek. Default 32 MiB; negative: no cache.
	BodyCacheBytes int64

	// idFilterMinBytes is the smallest filter (seenMinBytes; tests set
	// it small). A power of two, at least 64.
	idFilterMinBytes int

	// onBatch, if set (benchmarks), is told of every committed batch:
	// its keys, how long the writer took over it (from its first
	// request to the commit's return), and how many S blocks of a fold
	// it wrote.
	onBatch func(keys uint32, took time.Duration, folded int)

	// recentIDs is how many stored ids the writer remembers for
	// SubmitAfter (defaultRecentIDs; tests set it small).
	recentIDs int

	// SearchPostingsPerTerm bounds the work of one search filter: each
	// of its terms' posting lists is read (or sought) at most this many
	// times, newest documents first, so a query for a very common word
	// scores only the newest matches. Default 20000.
	SearchPostingsPerTerm int

	// MinFreeBytes is the space the store keeps free on its filesystem:
	// a commit that would leave less is refused (store.ErrDiskFull), so
	// that pebble never meets a full disk, which it cannot survive. The
	// check costs a statfs per commit near the reserve, and at most one
	// every 100 ms while the last was more than 256 MiB above it (after
	// twice the bytes written since). Default DefaultMinFreeBytes;
	// negative: no check.
	MinFreeBytes int64

	// WALSpares is how many spare write-ahead log files the store keeps
	// written ahead (zeros, 110% of MemTableSize each) for pebble's new
	// logs, so that a commit's fdatasync into a new log does not also
	// write the file's inode (walspare.go). Only on the operating
	// system's filesystem, not a tmpfs, not read-only. Default 0: none
	// (petrel's store.wal_spares defaults to 1).
	WALSpares int

	// FS is the filesystem pebble uses. Default: the operating system's.
	// Tests use vfs.NewCrashableMem to simulate crashes.
	FS vfs.FS

	// CommitFault is for fault-injection tests only; leave it nil. When
	// set, the writer calls it (on its goroutine) just before it commits
	// a batch, and an error it returns fails the batch as a failed commit
	// would: nothing of the batch is written, and every request in it
	// gets the error (Save's error, Failed for Submit). A failing
	// filesystem cannot stand in for it: pebble treats a failed write or
	// sync of its write-ahead log as fatal (Logger.Fatalf, which panics
	// here) once the batch is already in its memtable.
	CommitFault func() error
}

// Defaults.
const (
	DefaultCacheSize     = 256 << 20
	DefaultMemTableSize  = 64 << 20
	DefaultMaxBatch      = 1024
	DefaultMaxBatchBytes = 8 << 20
	DefaultQueueLen      = 4096
	DefaultPurgeInterval = time.Minute

	DefaultSearchPostingsPerTerm = 20000
	DefaultIDFilterMaxBytes      = 64 << 20
	DefaultBodyCacheBytes        = 32 << 20
)

func (o *Options) withDefaults() (Options, error) {
	r := *o
	if r.Path == "" {
		return r, fmt.Errorf("store/pebble: Options.Path is empty")
	}
	if r.MinFreeBytes == 0 {
		r.MinFreeBytes = DefaultMinFreeBytes
	}
	if r.CacheSize <= 0 {
		r.CacheSize = DefaultCacheSize
	}
	if r.MemTableSize == 0 {
		r.MemTableSize = DefaultMemTableSize
	}
	if r.idFilterMinBytes == 0 {
		r.idFilterMinBytes = seenMinBytes
	}
	switch {
	case r.IDFilterMaxBytes == 0:
		r.IDFilterMaxBytes = DefaultIDFilterMaxBytes
	case r.IDFilterMaxBytes > 0:
		// A power of two, at least the smallest filter.
		r.IDFilterMaxBytes = max(1<<(bits.Len(uint(r.IDFilterMaxBytes))-1), r.idFilterMinBytes)
	}
	if r.BodyCacheBytes == 0 {
		r.BodyCacheBytes = DefaultBodyCacheBytes
	}
	if r.MaxBatch <= 0 {
		r.MaxBatch = DefaultMaxBatch
	}
	if r.MaxBatchBytes <= 0 {
		r.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if r.QueueLen <= 0 {
		r.QueueLen = DefaultQueueLen
	}
	if r.PurgeInterval == 0 {
		r.PurgeInterval = DefaultPurgeInterval
	}
	if r.SearchPostingsPerTerm <= 0 {
		r.SearchPostingsPerTerm = DefaultSearchPostingsPerTerm
	}
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	if r.recentIDs <= 0 {
		r.recentIDs = defaultRecentIDs
	}
	return r, nil
}
