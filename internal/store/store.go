package store

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// Sentinel errors.
var (
	// ErrClosed is returned by every method after Close.
	ErrClosed = errors.New("store: closed")
	// ErrTooMany is returned by Items when more items match than allowed.
	ErrTooMany = errors.New("store: too many items")
	// ErrNotFound is returned by point lookups that find nothing.
	ErrNotFound = errors.New("store: not found")
	// ErrEphemeral is the Err of a Failed SaveResult for an ephemeral
	// event (kinds 20000-29999), which is never stored.
	ErrEphemeral = errors.New("store: ephemeral events are not stored")
	// ErrInvalid is the Err of a Failed SaveResult for an event the store
	// cannot hold: nil, kind outside 0-65535, or created_at outside
	// 0-nostr.MaxTimestamp.
	ErrInvalid = errors.New("store: invalid event")
	// ErrInDoubt is (wrapped in) the Err of a Failed SaveResult whose
	// commit may have taken effect: the connection to a database server
	// was lost with the COMMIT sent, and the server could not be asked in
	// time. A backend that reports it finds out later and tells its
	// owner which events were stored after all (see the backend's
	// options), so they can still be fanned out.
	ErrInDoubt = errors.New("store: commit outcome unknown")
	// ErrDiskFull is (wrapped in) the Err of a Failed SaveResult, and the
	// error of other writes, refused because the store's disk is (nearly)
	// full. Nothing of the write was done; reads still work, and writes
	// are accepted again once space is freed.
	ErrDiskFull = errors.New("store: disk full")
)

// Outcome is what saving one event did.
type Outcome uint8

const (
	// Stored: the event is now stored. For a replaceable or addressable
	// event, Removed lists the older version(s) it replaced; for a deletion
	// (kind 5) or a request to vanish (kind 62), Removed lists what it
	// deleted.
	Stored Outcome = iota + 1
	// Duplicate: an event with this id is already stored. Nothing changed.
	Duplicate
	// Superseded: a replaceable or addressable event older than the stored
	// version for its address (or equal created_at with a higher id).
	// Nothing changed.
	Superseded
	// Deleted: the event was deleted earlier (NIP-09 by id, an "a"
	// deletion covering its address and created_at, or NIP-62 covering its
	// author and created_at) and may not come back. Nothing changed.
	Deleted
	// Failed: an internal error; Err says what. Nothing changed.
	Failed
	// Held: the event is held unverified (Unverified.SubmitUnverified):
	// durable, but not served and not applied until it is released.
	Held
)

// String names the outcome.
func (o Outcome) String() string {
	switch o {
	case Stored:
		return "stored"
	case Duplicate:
		return "duplicate"
	case Superseded:
		return "superseded"
	case Deleted:
		return "deleted"
	case Failed:
		return "failed"
	case Held:
		return "held"
	}
	return "outcome(?)"
}

// SaveResult is the result of saving one event.
type SaveResult struct {
	Outcome Outcome
	// Seq is the commit position of the commit that stored the event
	// (Outcome Stored), never 0; 0 for every other outcome. See Snapshot.
	Seq uint64
	// Removed lists the ids this save removed from the store (older
	// replaceable versions, deletion targets). May be nil.
	Removed []nostr.ID
	// Err is set when Outcome is Failed.
	Err error
}

// Snapshot says which commits a query's results reflect, by their commit
// positions (SaveResult.Seq). It is what the relay hands a subscription
// from its stored query to its live feed with: a live event whose
// position the subscription's snapshot includes was already answered (or
// passed over, by the limit) by the stored query and is not delivered
// again; every other live event is.
//
// The shape is that of an MVCC snapshot: every position below Low is
// included, none at or above High is, and a position in [Low, High) is
// included unless it is listed in Open (commits still in progress when
// the snapshot was taken). An embedded store with one writer has
// Low == High (its last visible commit + 1) and no Open list; a shared
// SQL store reports its transaction snapshot (PostgreSQL: xmin, xmax and
// the in-progress list of pg_current_snapshot(), with positions being the
// writing transaction's xid8). Position 0 is never included: it marks an
// event that has no position (ephemeral events, which are never stored).
// The zero Snapshot includes nothing.
type Snapshot struct {
	Low, High uint64
	// Open is sorted ascending; it is shared, not copied: treat it as
	// read-only.
	Open []uint64
}

// Includes reports whether the commit at position seq is visible in the
// snapshot.
func (s *Snapshot) Includes(seq uint64) bool {
	if seq == 0 || seq >= s.High {
		return false
	}
	if seq < s.Low {
		return true
	}
	_, open := slices.BinarySearch(s.Open, seq)
	return !open
}

// Record is one stored event as a query returns it: the fields the relay
// needs to route and protect it, and the event's raw JSON.
type Record struct {
	ID        nostr.ID
	PubKey    nostr.PubKey
	CreatedAt int64
	Kind      int
	// Raw is the event JSON. It is valid until the next call to the
	// iterator's Next or Close; copy it to keep it.
	Raw []byte
	// Seq is the commit position of the commit that stored the event, in
	// records from Feed.CommittedSince; 0 in records from Query.
	Seq uint64
}

// Iterator is a pull iterator over query results. It is used by one
// goroutine at a time, but may move between goroutines between calls: the
// relay runs a stored query in time slices, parking the iterator between
// them. An open iterator pins a consistent snapshot of the store; it must
// be closed, and should not be parked for long.
type Iterator interface {
	// Next advances to the next record and reports whether there is one.
	// After it returns false, Err tells whether iteration failed.
	Next() bool
	// Record returns the current record. Its Raw is valid until the next
	// call to Next or Close.
	Record() *Record
	// Err returns the error that ended iteration, if any.
	Err() error
	// Close releases the iterator. It is safe to call more than once.
	Close() error
	// Snapshot reports which commits the iterator's results reflect (see
	// the Store contract's hand-off section). It may be called at any
	// time before Close and always returns the same value. An iterator
	// that reads nothing (its filters match nothing) may return the zero
	// Snapshot.
	Snapshot() Snapshot
}

// Item is one (created_at, id) pair, the unit of negentropy reconciliation.
type Item struct {
	CreatedAt int64
	ID        nostr.ID
}

// CompareItems orders items as Items returns them: created_at ascending,
// then id ascending (bytewise).
func CompareItems(a, b Item) int {
	if c := cmp.Compare(a.CreatedAt, b.CreatedAt); c != 0 {
		return c
	}
	return bytes.Compare(a.ID[:], b.ID[:])
}

// Stats is a snapshot of store-level figures for /stats and /metrics.
type Stats struct {
	SizeBytes int64  // bytes on disk (or in the database) used by the store
	Backend   string // "pebble", ...
	// SearchDeadPostings counts the search postings of removed events the
	// index still holds (the pebble store leaves them in place; a rebuild,
	// petrel compact --rebuild-search, clears them).
	SearchDeadPostings int64
	// Events is the number of stored events: exact for the embedded
	// store; for PostgreSQL exact up to 100,000 events and the planner's
	// estimate (pg_class.reltuples) above, refreshed with SizeBytes.
	Events int64
	// DiskFreeBytes and DiskSizeBytes are the space available to the
	// store's user and the size of the file system holding an embedded
	// store (0 where unknown, and for a database server's store).
	DiskFreeBytes int64
	DiskSizeBytes int64
	// IDFilterBytes is the memory of the pebble store's filter of stored
	// ids (0 until it is built, or when it is off).
	IDFilterBytes int64
	// Unavailable is set by a store with a database server (postgres)
	// while it cannot reach the server: the last operation failed to
	// connect or lost its connection. It clears with the next operation
	// that succeeds. Always false for the embedded store.
	Unavailable bool
	// Errors counts the operations that failed on a database error
	// (connectivity or otherwise) since the store was opened; 0 for the
	// embedded store, which reports its errors to each caller only.
	Errors int64
	// DiskFull is set while the store refuses writes for lack of disk
	// space (ErrDiskFull; DiskFreeBytes then says how much is left).
	DiskFull bool
	// Commits counts the synced commits of the store's writer since
	// open, each a group commit of what queued meanwhile (with
	// PostgreSQL, a write transaction, whose COMMIT waits for the
	// server's WAL flush): events stored over commits is how many events
	// share a commit's fsync.
	Commits int64
	// WALSpares is how many write-ahead log spares the embedded store
	// keeps (store.wal_spares; 0 when off, read-only, or on a tmpfs, and
	// for PostgreSQL); WALSparesReady how many are written and waiting;
	// WALSparesUsed how many of pebble's new logs took one since open,
	// and WALLogsUnspared how many found none ready and were made new
	// files (each commit's fdatasync into one also writes the file's
	// inode: docs/storage.md).
	WALSpares, WALSparesReady, WALSparesUsed, WALLogsUnspared int64
	// Background is the embedded store's background work (nil for
	// PostgreSQL).
	Background *Background
	// Postgres is the PostgreSQL store's writer and connection pool (nil
	// for the embedded store).
	Postgres *Postgres
}

// Postgres is what the PostgreSQL store's writer and connection pool
// report. The counters run from the store's open; the gauges are as of
// the call. The JSON names are /stats's (store_postgres).
type Postgres struct {
	// WriteRetries counts write transactions tried again after a
	// failure worth retrying (a deadlock, a serialization failure, a
	// unique violation between nodes, a lost connection).
	WriteRetries int64 `json:"write_retries"`
	// InDoubtCommitted counts write transactions whose COMMIT reply was
	// lost with the connection and which the database reported
	// committed in time for their events to be answered stored;
	// LateCommitted counts the events of those it reported committed
	// only after they were answered failed (postgres.Options.OnLateCommit).
	InDoubtCommitted int64 `json:"commits_in_doubt_committed"`
	LateCommitted    int64 `json:"late_committed_events"`
	// The connection pool (pgxpool's Stat): its size limit, the
	// connections open, of those the ones in use and the idle ones.
	PoolMaxConns      int64 `json:"pool_max_conns"`
	PoolConns         int64 `json:"pool_conns"`
	PoolAcquiredConns int64 `json:"pool_acquired_conns"`
	PoolIdleConns     int64 `json:"pool_idle_conns"`
	// PoolAcquires counts connections taken from the pool (each query,
	// count and write transaction takes one); PoolAcquireWaits those
	// that found none idle and waited for one to be made or given back,
	// PoolAcquireWaitSeconds the time they waited, PoolAcquiresCanceled
	// those given up (a query's deadline passed while it waited);
	// PoolConnsOpened the connections made (more than the pool's size:
	// the database or the network closed some).
	PoolAcquires           int64   `json:"pool_acquires"`
	PoolAcquireWaits       int64   `json:"pool_acquire_waits"`
	PoolAcquireWaitSeconds float64 `json:"pool_acquire_wait_seconds"`
	PoolAcquiresCanceled   int64   `json:"pool_acquires_canceled"`
	PoolConnsOpened        int64   `json:"pool_conns_opened"`
}

// Background is what the embedded store's LSM (pebble) does beside the
// commits: memtable flushes and compactions, and the write stalls it
// imposes when they fall behind. The counters run from the store's
// open; the gauges are as of the call. The JSON names are /stats's
// (store_background).
type Background struct {
	Flushes     int64 `json:"flushes"`     // memtable flushes finished
	FlushBytes  int64 `json:"flush_bytes"` // bytes of tables (and blob files) the flushes wrote
	Compactions int64 `json:"compactions"` // compactions finished
	// CompactionBytes is the bytes of tables (and blob files) the
	// compactions wrote; over FlushBytes, what each byte flushed is
	// written again (write amplification past the log and the flush).
	CompactionBytes int64 `json:"compaction_bytes"`
	// CompactionDebtBytes is pebble's estimate of the bytes compactions
	// must still rewrite to bring every level within its size target.
	CompactionDebtBytes int64 `json:"compaction_debt_bytes"`
	// L0Sublevels is the depth of level 0 (a query may read a table of
	// every sublevel; pebble stalls commits at 24, the store's
	// L0StopWritesThreshold).
	L0Sublevels int64 `json:"l0_sublevels"`
	L0Tables    int64 `json:"l0_tables"` // tables in level 0
	// WriteStalls counts the times pebble stopped commits until a flush
	// or compaction caught up; WriteStallSeconds is how long they were
	// stopped in all, the stall in progress included.
	WriteStalls       int64   `json:"write_stalls"`
	WriteStallSeconds float64 `json:"write_stall_seconds"`
}

// Store is an event store. All methods are safe for concurrent use.
//
// # Storage semantics
//
// Ephemeral events (kinds 20000-29999) are never stored: Save returns
// Failed with ErrEphemeral for them; the relay must not pass them in. Events
// with a kind or created_at outside the NIP-01 ranges are Failed with
// ErrInvalid. An event with an empty Raw is stored as nostr.Serialize(ev).
//
// Outcomes are decided in this order: Failed (invalid), Duplicate (the id
// is stored, expired or not), Deleted, Superseded, Stored.
//
// Replaceable (0, 3, 10000-19999) and addressable (30000-39999) events keep
// one version per address ((pubkey, kind) or (pubkey, kind, d tag)): the one
// with the highest created_at, ties going to the lowest id. Saving an older
// version returns Superseded; saving a newer one removes the older.
//
// A deletion request (kind 5, NIP-09) is stored, and deletes, among its
// targets, only events by its own author: "e" targets by id, "a" targets
// every version of the address with created_at <= the request's created_at.
// Deleted ids are remembered: saving one again returns Deleted. An event
// covered by an "a" deletion (same author, same address, created_at <= the
// deletion's) is Deleted too. A deletion request that targets another
// deletion request has no effect on it: deletion requests are kept
// indefinitely (NIP-09); nor does one that targets a request to vanish
// (NIP-62). Deletion targets that are not stored yet are remembered all the
// same (if the author matches when they arrive, they are refused as
// Deleted). "a" targets count only when the address's pubkey is the
// request's author and its kind is replaceable or addressable; the address
// is compared exactly (kind, pubkey, d), so a replaceable address has d "".
//
// A request to vanish (kind 62, NIP-62) is stored, and deletes every event
// of its author with created_at <= its created_at (except itself, and
// including the author's deletion requests and older requests to vanish);
// later saves of that author's events with created_at <= its created_at
// return Deleted, whatever their kind. It also deletes the gift wraps
// (kind 1059, NIP-59) with a "p" tag naming the author (lowercase hex) and
// created_at <= its created_at, whoever wrote them, and later saves of
// such wraps return Deleted. The store applies this to every kind
// 62 event it is given: the relay decides which ones (its own URL or
// ALL_RELAYS) reach the store.
//
// Events whose NIP-40 expiration is at or before now are never returned by
// Query, Count or Items, and are purged eventually. The store does not
// refuse an event that is already expired when saved (the relay does): it
// is stored, hidden, and purged like any other; until it is purged it still
// counts as stored for Duplicate and for replaceable addresses. Tombstones
// (deleted ids, "a" deletions, vanished authors) are never purged.
//
// # Commit positions and the stored-to-live hand-off
//
// Every commit that stores events has a commit position, a number above 0
// that SaveResult.Seq reports for each event it stored; events stored by
// one commit share it. Every iterator Query returns reports, through
// Snapshot, exactly which commit positions its results reflect: a
// backend must guarantee that a query sees an event's commit if and only
// if its Snapshot includes the event's position. That is all the relay
// needs to hand a subscription from its stored query to its live feed
// without losing or repeating an event: the subscription is listed for
// live events before its query runs, so every event committed after the
// query's snapshot reaches it live, and the relay drops, for that
// subscription, each live event whose position the snapshot includes.
// Because the rule is decided per event, by its own position, events may
// reach the fan-out in any order: a store with one writer fans out in
// position order, a shared store fed by several nodes does not, and the
// relay treats both alike. Positions must be comparable across every
// process that shares the store (a shared store hands them to other nodes
// with the event, over the live bus) and must not be reused while any
// subscription may hold a snapshot that refers to them. The relay keeps
// no list of ids per subscription for this; an id-based window is needed
// only where a node replays events it may already have fanned out (a
// cluster node catching up after its bus connection dropped), and that
// is the node's business, not the store's.
//
// # Ordering
//
// Query returns events newest first: created_at descending, ties by id
// ascending (bytewise). Items returns (created_at, id) ascending.
type Store interface {
	// Save stores the events as one batch, committed (and synced, if the
	// store is configured to sync) before Save returns, and returns one
	// result per event, in order. Events in one call are applied in order,
	// so a later event in the batch sees the effect of earlier ones. The
	// error is non-nil only when the whole batch failed (each result then
	// has Outcome Failed). The events must have valid ids and signatures:
	// the store does not check them. If ctx ends before the batch is
	// handed to the store's writer (while Save waits for room in its
	// queue), Save returns ctx's error and nothing was saved; once handed
	// over, Save waits for the commit whatever ctx does, so its results
	// always say what was saved (a caller interrupted mid-way counts
	// right).
	Save(ctx context.Context, events []*nostr.Event) ([]SaveResult, error)

	// Submit queues one event for the store's single writer, which commits
	// queued events in batches. done is called exactly once, from the
	// writer goroutine, after the batch holding ev has committed (or
	// failed), and in the order the events were submitted. done must not
	// call back into the store. It may block: that holds up the writer,
	// and so every later commit, which a caller may want on purpose (the
	// relay's done blocks while its fan-out queue is full, so a slow
	// fan-out slows the writer instead of growing a queue); it must
	// never block on something that waits for the writer.
	// Submit blocks while the writer's queue is full, and returns ctx's
	// error (without calling done) if ctx ends first, or ErrClosed.
	Submit(ctx context.Context, ev *nostr.Event, done func(SaveResult)) error

	// Query returns the events matching any of filters. Each filter
	// contributes at most its Limit newest matches (all matches when it
	// has no limit); the union is returned newest first without
	// duplicates. A filter with Search returns its matches by relevance
	// instead (and a store without search returns none for it). Filters
	// that are Empty match nothing, and so does a filter with a limit of 0
	// or less (HasLimit && Limit <= 0). The iterator sees the store as it
	// was when Query was called, whatever is written meanwhile. Iterators
	// still open when the store is closed are closed by it: their Next
	// returns false and Err returns ErrClosed.
	Query(ctx context.Context, filters []nostr.Filter) (Iterator, error)

	// Count returns the number of distinct stored events matching any of
	// filters. Limit is ignored (NIP-45 counts everything that matches).
	Count(ctx context.Context, filters []nostr.Filter) (int64, error)

	// Items returns the (created_at, id) of every stored event matching
	// any of filters, ascending, ignoring Limit. If more than max items
	// match (max > 0), it returns ErrTooMany.
	Items(ctx context.Context, filters []nostr.Filter, max int) ([]Item, error)

	// Has reports whether an event with this id is stored (it may be
	// expired but not yet purged).
	Has(ctx context.Context, id nostr.ID) (bool, error)

	// Delete removes the events with these ids, whoever wrote them, and
	// returns how many were removed. It does not record them as deleted:
	// they may be saved again (the relay's ban list is the place for that).
	// As for Save, the count says what was removed whenever ctx ends: it
	// is 0 with ctx's error only if nothing was.
	Delete(ctx context.Context, ids []nostr.ID) (int, error)

	// PurgeExpired removes events whose expiration is at or before now
	// and returns how many were removed. Backends also do this on their
	// own in the background. It works in chunks; ctx ends it between
	// them, and the count is what the chunks before removed.
	PurgeExpired(ctx context.Context, now int64) (int, error)

	// Stats returns current store figures.
	Stats() Stats

	// Close waits for queued writes to commit, then releases the store.
	// Calling it again returns ErrClosed.
	Close() error
}

// Prechecker is implemented by stores that can spare their writer its own
// duplicate lookup for an event the caller has just found absent with
// Has (the relay checks before verifying, so that duplicates cost no
// verification; the writer must check again, since another copy may
// have been stored in between, unless it knows none was).
type Prechecker interface {
	// HasAt is Has, and also returns a token naming what the store had
	// committed when it looked.
	HasAt(ctx context.Context, id nostr.ID) (bool, uint64, error)
	// SubmitAfter is Submit for an event that HasAt reported absent with
	// token. The outcome is the same as Submit's.
	SubmitAfter(ctx context.Context, ev *nostr.Event, token uint64, done func(SaveResult)) error
}

// Availability is implemented by a store with a database server
// (postgres). Unavailable reports what Stats().Unavailable reports, from
// memory and cheaply enough to ask on every refused EVENT: the relay's
// capacity valves fill while the writer waits on an unreachable
// database, and a refusal then says the store is unavailable rather than
// that the relay is at capacity.
type Availability interface {
	Unavailable() bool
}

// Feed is implemented by stores that several nodes share (the store of
// record of a cluster). A node that may have missed events on the live bus
// (its connection dropped, or a gap in the bus's sequence showed a loss)
// asks the store what was committed since a moment before the loss, and
// fans out what it had not: the store, not the bus, is what makes the
// live feed whole.
type Feed interface {
	// CommittedSince returns the events committed at or after since, by
	// the store's own clock (the time the store accepted each event, never
	// the client's created_at), oldest commit first, each with its
	// commit position (Record.Seq). Events removed since are not returned.
	// The iterator holds no lock on the store between calls.
	CommittedSince(ctx context.Context, since time.Time) (Iterator, error)
}

// Searcher is implemented by stores that may support NIP-50 search.
// SupportsSearch reports whether Query honours filters with Search (ranked
// by relevance); when it is false, or the store does not implement
// Searcher, such filters match nothing and the relay must not advertise
// NIP-50. The answer does not change while the store is open.
type Searcher interface {
	SupportsSearch() bool
}
