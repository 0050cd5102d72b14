package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/petrel-relay/petrel/internal/nostr"

	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func openTest(t testing.TB, opts Options) *Store {
	t.Helper()
	if opts.Path == "" {
		opts.Path = t.TempDir()
	}
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checked is a Store whose Close first checks the database's integrity.
type checked struct {
	*Store
	t *testing.T
}

func (c checked) Close() error {
	if !c.closed.Load() {
		if err := checkIntegrity(c.db); err != nil {
			c.t.Errorf("before Close: %v", err)
		}
	}
	return c.Store.Close()
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return checked{openTest(t, Options{NoSync: true}), t}
	})
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	var all []*nostr.Event
	for round := 0; round < 3; round++ {
		s := openTest(t, Options{Path: dir})
		var evs []*nostr.Event
		for i := 0; i < 500; i++ {
			evs = append(evs, storetest.NewEvent(rng, storetest.Key(i%7), 1, storetest.BaseTime+int64(round*1000+i), nostr.Tags{{"t", "x"}}, "reopen"))
		}
		if _, err := s.Save(ctx, evs); err != nil {
			t.Fatal(err)
		}
		all = append(all, evs...)
		// Tombstones survive a reopen: author 100 vanished in round 0.
		vanished := storetest.NewEvent(rng, storetest.Key(100), 1, storetest.BaseTime, nil, "old")
		want := store.Deleted
		if round == 0 {
			want = store.Stored
			res, err := s.Save(ctx, []*nostr.Event{storetest.NewEvent(rng, storetest.Key(100), 62, storetest.BaseTime+5, nil, "")})
			if err != nil || res[0].Outcome != store.Stored {
				t.Fatal(res, err)
			}
			all = append(all, nil) // count the request itself
			vanished.CreatedAt = storetest.BaseTime + 6
			vanished.Raw = nostr.Serialize(vanished)
			all = append(all, vanished)
		}
		if res, err := s.Save(ctx, []*nostr.Event{vanished}); err != nil || res[0].Outcome != want {
			t.Fatalf("round %d: save of a vanished author's event: %v %v, want %v", round, res, err, want)
		}
		// So do deletions of events not yet seen: deleted in round 0,
		// refused in every round.
		target := storetest.NewEvent(rand.New(rand.NewPCG(77, 77)), storetest.Key(200), 1, storetest.BaseTime, nil, "target")
		if round == 0 {
			del := storetest.NewEvent(rng, storetest.Key(200), 5, storetest.BaseTime+1, nostr.Tags{{"e", target.ID.Hex()}}, "")
			if res, err := s.Save(ctx, []*nostr.Event{del}); err != nil || res[0].Outcome != store.Stored {
				t.Fatal(res, err)
			}
			all = append(all, del)
		}
		if res, err := s.Save(ctx, []*nostr.Event{target}); err != nil || res[0].Outcome != store.Deleted {
			t.Fatalf("round %d: save of a deleted event: %v %v, want deleted", round, res, err)
		}
		// Everything saved in earlier rounds is still there, bodies intact.
		if n, err := s.Count(ctx, []nostr.Filter{{}}); err != nil || n != int64(len(all)) {
			t.Fatalf("round %d: count %d, %v; want %d", round, n, err, len(all))
		}
		if got := s.Stats().Events; got != int64(len(all)) {
			t.Fatalf("round %d: Stats().Events = %d, want %d", round, got, len(all))
		}
		it, err := s.Query(ctx, []nostr.Filter{{IDs: []nostr.ID{all[0].ID, evs[len(evs)-1].ID}}})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for it.Next() {
			n++
			r := it.Record()
			want := all[0]
			if r.ID != want.ID {
				want = evs[len(evs)-1]
			}
			if string(r.Raw) != string(want.Raw) {
				t.Fatalf("round %d: body of %s changed", round, r.ID.Hex()[:8])
			}
		}
		it.Close()
		if n != 2 {
			t.Fatalf("round %d: %d of 2 found by id", round, n)
		}
		if err := checkIntegrity(s.db); err != nil {
			t.Fatal(err)
		}
		if s.Stats().SizeBytes <= 0 {
			t.Fatal("SizeBytes <= 0")
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEventCountCounted: the event count survives a reopen without a
// recount; a formatV2 store whose count is missing (written before it
// existed) or stamped with another commit position (a build without it
// stored events since) is counted once when it is upgraded, one with a
// current count is not; the count then follows stores and removals.
func TestEventCountCounted(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	var logs bytes.Buffer
	open := func() *Store {
		logs.Reset()
		return openTest(t, Options{Path: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	}
	recounted := func() bool { return strings.Contains(logs.String(), "counted the stored events") }
	s := open()
	if recounted() { // a store just made has nothing to count, nor to say
		t.Fatalf("a new store logged a recount: %s", logs.String())
	}
	var evs []*nostr.Event
	for i := 0; i < 40; i++ {
		evs = append(evs, storetest.NewEvent(rng, storetest.Key(i%3), 1, storetest.BaseTime+int64(i), nil, "n"))
	}
	if _, err := s.Save(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().Events; got != 40 {
		t.Fatalf("Events = %d after 40 stored, want 40", got)
	}
	if st := s.Stats(); st.DiskSizeBytes <= 0 || st.DiskFreeBytes <= 0 || st.DiskFreeBytes > st.DiskSizeBytes {
		t.Fatalf("disk space: %d free of %d", st.DiskFreeBytes, st.DiskSizeBytes)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	if got := s.Stats().Events; got != 40 || recounted() {
		t.Fatalf("reopened: Events = %d (want 40), recounted %v", got, recounted())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		count   func(commitState) []byte // formatV2's count key (nil value: absent)
		recount bool
	}{
		{func(commitState) []byte { return nil }, true},
		{func(c commitState) []byte { return appendU64(appendU64(nil, 7), c.pos-1) }, true}, // stamped at another position
		{currentCount, false},
	} {
		toFormatV2(t, dir, c.count)
		s = open()
		if got := s.Stats().Events; got != 40 || recounted() != c.recount {
			t.Fatalf("count key %d: Events = %d after open (want 40), recounted %v", i, got, recounted())
		}
		if !strings.Contains(logs.String(), "format upgraded") {
			t.Fatalf("count key %d: no upgrade logged: %s", i, logs.String())
		}
		if err := checkIntegrity(s.db); err != nil { // formatVersion, one commit state
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s = open()
	defer s.Close()
	// A deletion request stores itself and removes its target.
	del := storetest.NewEvent(rng, evs[0].PubKey, 5, storetest.BaseTime+100, nostr.Tags{{"e", evs[0].ID.Hex()}}, "")
	if res, err := s.Save(ctx, []*nostr.Event{del}); err != nil || res[0].Outcome != store.Stored {
		t.Fatal(res, err)
	}
	if got := s.Stats().Events; got != 40 {
		t.Fatalf("Events = %d after a deletion of one stored event, want 40", got)
	}
	if err := checkIntegrity(s.db); err != nil {
		t.Fatal(err)
	}
}

func TestFormat(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, Options{Path: dir})
	if err := s.db.Set(formatKey, []byte("petrel-pebble/0"), nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(Options{Path: dir, Logger: quiet}); !errors.Is(err, ErrFormat) {
		t.Fatalf("Open with another format = %v, want ErrFormat", err)
	}
	// A non-empty database without the key is refused too.
	dir2 := t.TempDir()
	db, err := pebble.Open(dir2, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Set([]byte("some"), []byte("thing"), pebble.Sync)
	db.Close()
	if _, err := Open(Options{Path: dir2, Logger: quiet}); !errors.Is(err, ErrFormat) {
		t.Fatalf("Open of a foreign database = %v, want ErrFormat", err)
	}
	if _, err := Open(Options{}); err == nil {
		t.Fatal("Open without a path succeeded")
	}
}

func TestPlanner(t *testing.T) {
	s := openTest(t, Options{})
	defer s.Close()
	q := testQuery(t, s)
	defer q.close()
	pk := storetest.Key(1).Hex()
	many := storetest.FixtureAuthors(100)
	f := func(fl nostr.Filter, want byte, scanPhase bool) {
		t.Helper()
		fs, err := q.plan(&fl, true, true)
		if err != nil {
			t.Fatal(err)
		}
		if fs == nil || fs.plannedIdx != want {
			t.Fatalf("plan = %+v, want table %c", fs, want)
		}
		if (fs.budget >= 0) != scanPhase {
			t.Fatalf("scan phase = %v, want %v", fs.budget >= 0, scanPhase)
		}
	}
	one := []nostr.PubKey{storetest.Key(1)}
	f(nostr.Filter{IDs: []nostr.ID{{1}}, Authors: one, Kinds: []int{1}}, pfxID, false)
	f(nostr.Filter{Authors: one, Kinds: []int{1}}, pfxAuthKind, false)
	f(nostr.Filter{Authors: one}, pfxAuthor, false)
	f(nostr.Filter{Authors: one, Tags: []nostr.TagFilter{{Name: 'e', Values: []string{pk}}}}, pfxTag, false)
	f(nostr.Filter{Authors: one, Tags: []nostr.TagFilter{{Name: 't', Values: []string{"x"}}}}, pfxAuthor, false)
	f(nostr.Filter{Kinds: []int{1}, Tags: []nostr.TagFilter{{Name: 'p', Values: []string{pk}}}}, pfxTag, false)
	f(nostr.Filter{Kinds: []int{1, 7}}, pfxKind, false)
	f(nostr.Filter{Since: 5, HasSince: true}, pfxCreated, false)
	f(nostr.Filter{Authors: many, Kinds: []int{1}, Limit: 10, HasLimit: true}, pfxAuthKind, true)
	f(nostr.Filter{Authors: many, Kinds: []int{1}}, pfxAuthKind, false)
	f(nostr.Filter{Authors: many, Limit: 10, HasLimit: true}, pfxAuthor, true)
	if fs, _ := q.plan(&nostr.Filter{Kinds: []int{-1, 70000}}, true, true); fs != nil {
		t.Fatal("kinds out of range planned")
	}
	if fs, _ := q.plan(&nostr.Filter{Since: 10, HasSince: true, Until: 5, HasUntil: true}, true, true); fs != nil {
		t.Fatal("since > until planned")
	}
}

func TestSubmitQueueFull(t *testing.T) {
	s := openTest(t, Options{QueueLen: 1, MaxBatch: 1, NoSync: true})
	rng := rand.New(rand.NewPCG(3, 4))
	ev := func() *nostr.Event {
		return storetest.NewEvent(rng, storetest.Key(1), 1, storetest.BaseTime, nil, "q")
	}
	ctx := context.Background()
	// The first done blocks the writer until release is closed.
	release := make(chan struct{})
	entered := make(chan struct{})
	if err := s.Submit(ctx, ev(), func(store.SaveResult) { close(entered); <-release }); err != nil {
		t.Fatal(err)
	}
	<-entered
	// One more fits in the queue.
	var calls atomic.Int32
	count := func(store.SaveResult) { calls.Add(1) }
	if err := s.Submit(ctx, ev(), count); err != nil {
		t.Fatal(err)
	}
	// The next one blocks until its context ends, and done is not called.
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := s.Submit(tctx, ev(), count); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Submit on a full queue = %v, want DeadlineExceeded", err)
	}
	// Close while a Submit is blocked: the Submit gets ErrClosed, Close
	// commits what was queued.
	blocked := make(chan error, 1)
	go func() { blocked <- s.Submit(ctx, ev(), count) }()
	time.Sleep(20 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	if err := <-blocked; !errors.Is(err, store.ErrClosed) {
		// It may also have got into the queue before Close started.
		if err != nil {
			t.Fatalf("blocked Submit = %v", err)
		}
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n < 1 || n > 2 {
		t.Fatalf("%d done calls, want the queued one (and maybe the blocked one)", n)
	}
}

// TestNoCreate: with NoCreate or ReadOnly, a directory without a store
// (missing, empty, or of other files) is refused with ErrNoStore and left
// as it was; a store is opened.
func TestNoCreate(t *testing.T) {
	root := t.TempDir()
	missing := filepath.Join(root, "missing")
	empty := filepath.Join(root, "empty")
	other := filepath.Join(root, "other")
	for _, d := range []string{empty, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(other, "notes.txt"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Options{{NoCreate: true}, {ReadOnly: true}} {
		for _, d := range []string{missing, empty, other} {
			o.Path = d
			before := ""
			if _, err := os.Stat(d); err == nil {
				before = dirListing(t, d)
			}
			s, err := Open(o)
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, ErrNoStore) {
				t.Fatalf("%s (read-only %v): %v, want ErrNoStore", d, o.ReadOnly, err)
			}
			if d == missing {
				if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("the refused open made the missing directory: %v", err)
				}
			} else if after := dirListing(t, d); after != before {
				t.Fatalf("%s: the refused open changed the directory: %q, was %q", d, after, before)
			}
		}
	}
	dir := filepath.Join(root, "store")
	s := openTest(t, Options{Path: dir})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, Options{Path: dir, NoCreate: true})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReadOnly: a read-only open serves what a writable one stored,
// writes nothing to the directory, refuses writes, and still excludes a
// writer.
func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	s := openTest(t, Options{Path: dir})
	var evs []*nostr.Event
	for i := 0; i < 200; i++ {
		evs = append(evs, storetest.NewEvent(rng, storetest.Key(i%5), 1, storetest.BaseTime+int64(i), nil, "hello readers"))
	}
	if _, err := s.Save(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := dirListing(t, dir)

	ro := openTest(t, Options{Path: dir, ReadOnly: true, DisableSearch: true})
	if n, err := ro.Count(ctx, []nostr.Filter{{}}); err != nil || n != int64(len(evs)) {
		t.Fatalf("count = %d, %v; want %d", n, err, len(evs))
	}
	it, err := ro.Query(ctx, []nostr.Filter{{IDs: []nostr.ID{evs[17].ID}}})
	if err != nil {
		t.Fatal(err)
	}
	if !it.Next() || it.Record().ID != evs[17].ID {
		t.Fatalf("lookup by id: %v", it.Err())
	}
	it.Close()
	// The index was built by the writable open: search works read-only,
	// whatever DisableSearch says (nothing can be dropped).
	if !ro.SupportsSearch() {
		t.Error("read-only open of a store with a current search index reports no search")
	}
	if n, err := ro.Count(ctx, []nostr.Filter{{Search: "readers"}}); err != nil || n != int64(len(evs)) {
		t.Errorf("search count = %d, %v; want %d", n, err, len(evs))
	}
	extra := storetest.NewEvent(rng, storetest.Key(9), 1, storetest.BaseTime+1000, nil, "late")
	if _, err := ro.Save(ctx, []*nostr.Event{extra}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Save on a read-only store: %v, want ErrReadOnly", err)
	}
	if err := ro.SaveMeta(ctx, "x", []byte("y")); !errors.Is(err, ErrReadOnly) {
		t.Errorf("SaveMeta on a read-only store: %v, want ErrReadOnly", err)
	}
	if _, err := Open(Options{Path: dir, Logger: quiet}); !errors.Is(err, ErrLocked) {
		t.Errorf("writable open beside a read-only one: %v, want ErrLocked", err)
	}
	size := ro.Stats().SizeBytes
	if size <= 0 {
		t.Errorf("read-only Stats: size %d", size)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	// Close of a read-only store reads no metrics: Stats then reports the
	// size of the last call.
	if got := ro.Stats().SizeBytes; got != size {
		t.Errorf("Stats after a read-only Close: size %d, want %d", got, size)
	}
	if after := dirListing(t, dir); after != before {
		t.Errorf("a read-only open changed the directory:\nbefore %s\nafter  %s", before, after)
	}

	empty := t.TempDir()
	if _, err := Open(Options{Path: empty, ReadOnly: true, Logger: quiet}); err == nil {
		t.Error("read-only open of an empty directory succeeded")
	}
	if l := dirListing(t, empty); strings.Contains(l, "MANIFEST") || strings.Contains(l, ".log") {
		t.Errorf("a read-only open of an empty directory created a database: %s", l)
	}
}

// dirListing is the names and sizes of the files in dir, one string.
func dirListing(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s:%d ", e.Name(), fi.Size())
	}
	return b.String()
}

// TestCloseEmptiesTheLog: Close flushes the memtable, so the write-ahead
// log is empty at rest and a read-only open (which cannot flush, and
// would replay the log into memory at every open) reads the tables only.
func TestCloseEmptiesTheLog(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(5, 6))
	s := openTest(t, Options{Path: dir, NoSync: true})
	var evs []*nostr.Event
	for i := 0; i < 2000; i++ {
		evs = append(evs, storetest.NewEvent(rng, storetest.Key(i%9), 1, storetest.BaseTime+int64(i), nil, "logged"))
	}
	if _, err := s.Save(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ro := openTest(t, Options{Path: dir, ReadOnly: true})
	defer ro.Close()
	m := ro.db.Metrics()
	if n := m.MemTable.Count; n > 1 {
		t.Errorf("read-only open after Close has %d memtables", n)
	}
	if sz := m.MemTable.Size; sz > 1<<20 {
		t.Errorf("read-only open after Close replayed %d bytes of log into its memtable", sz)
	}
	if n, err := ro.Count(context.Background(), []nostr.Filter{{}}); err != nil || n != int64(len(evs)) {
		t.Fatalf("count %d, %v; want %d", n, err, len(evs))
	}
}

// TestReadOnlyReadsNoFilters: a read-only open answers lookups, present
// and absent ids alike, without reading the tables' bloom filters (a
// one-shot lookup reads a table's data block rather than its much larger
// filter block); a writable open of the same store consults them.
func TestReadOnlyReadsNoFilters(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 8))
	s := openTest(t, Options{Path: dir, NoSync: true})
	var evs []*nostr.Event
	for i := 0; i < 500; i++ {
		evs = append(evs, storetest.NewEvent(rng, storetest.Key(i%7), 1, storetest.BaseTime+int64(i), nil, "filtered"))
	}
	if _, err := s.Save(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	absent := storetest.NewEvent(rng, storetest.Key(8), 1, storetest.BaseTime, nil, "never stored").ID
	lookups := func(st *Store) {
		t.Helper()
		for _, id := range []nostr.ID{evs[3].ID, evs[499].ID, absent} {
			found, err := st.Has(ctx, id)
			if err != nil || found != (id != absent) {
				t.Fatalf("Has(%x) = %v, %v; want %v", id[:4], found, err, id != absent)
			}
		}
	}
	filterReads := func(st *Store) int64 {
		m := st.db.Metrics()
		return m.Filter.Hits + m.Filter.Misses
	}

	ro := openTest(t, Options{Path: dir, ReadOnly: true, IDFilterMaxBytes: -1})
	lookups(ro)
	if n := filterReads(ro); n != 0 {
		t.Errorf("a read-only open consulted bloom filters %d times", n)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	rw := openTest(t, Options{Path: dir, IDFilterMaxBytes: -1})
	defer rw.Close()
	lookups(rw)
	if n := filterReads(rw); n == 0 {
		t.Error("a writable open consulted no bloom filter (the test shows nothing)")
	}
}

// TestReadOnlyTinyCache: a read-only open with a block cache smaller
// than the memtable pebble reserves in it, as req --store opens a store
// (cmd/petrel: storeReadCacheBytes), keeps no block, and still finds
// every event by id and answers a feed as a writable open does, from a
// store of several tables; the directory is left as it was.
func TestReadOnlyTinyCache(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 10))
	s := openTest(t, Options{Path: dir, NoSync: true})
	var evs []*nostr.Event
	for i := 0; i < 1200; i++ {
		evs = append(evs, storetest.NewEvent(rng, storetest.Key(i%40), []int{1, 7}[i%2], storetest.BaseTime+int64(i), nil, strings.Repeat("tiny cache ", 20)))
	}
	// Three flushes: overlapping tables, as an import leaves.
	for i := 0; i < len(evs); i += 400 {
		if _, err := s.Save(ctx, evs[i:i+400]); err != nil {
			t.Fatal(err)
		}
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	feed := []nostr.Filter{{Authors: []nostr.PubKey{storetest.Key(1), storetest.Key(7), storetest.Key(22)}, Kinds: []int{1, 7}, Limit: 40, HasLimit: true}}
	answer := func(st *Store, filters []nostr.Filter) []string {
		t.Helper()
		it, err := st.Query(ctx, filters)
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		var out []string
		for it.Next() {
			out = append(out, string(it.Record().Raw))
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := answer(s, feed)
	if len(want) != 40 {
		t.Fatalf("writable open: feed of %d events", len(want))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := dirListing(t, dir)

	ro := openTest(t, Options{Path: dir, ReadOnly: true, CacheSize: 64 << 10, IDFilterMaxBytes: -1, BodyCacheBytes: -1})
	if m := ro.db.Metrics(); m.Levels[0].TablesCount < 1 || m.Total().TablesCount < 2 {
		t.Fatalf("the store has %d tables, %d in L0: the test shows nothing", m.Total().TablesCount, m.Levels[0].TablesCount)
	}
	for i, ev := range evs {
		got := answer(ro, []nostr.Filter{{IDs: []nostr.ID{ev.ID}}})
		if len(got) != 1 || got[0] != string(ev.Raw) {
			t.Fatalf("event %d by id: %q", i, got)
		}
	}
	if got := answer(ro, feed); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("feed: %d events, want the writable open's %d", len(got), len(want))
	}
	if n, err := ro.Count(ctx, []nostr.Filter{{}}); err != nil || n != int64(len(evs)) {
		t.Fatalf("count %d, %v; want %d", n, err, len(evs))
	}
	if m := ro.db.Metrics().BlockCache; m.Size != 0 || m.Misses == 0 {
		t.Errorf("block cache after the lookups: %d bytes kept, %d misses; want none kept", m.Size, m.Misses)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if after := dirListing(t, dir); after != before {
		t.Errorf("a read-only open changed the directory:\nbefore %s\nafter  %s", before, after)
	}
}

// TestStatsCommits: Stats.Commits counts the writer's synced commits:
// one per Save here (each waits for its commit), none for a batch that
// needs no sync (an unsynced store's, or one whose events were all
// refused), so events over commits is what a commit's fsync is shared by.
func TestStatsCommits(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	note := func(i int) *nostr.Event {
		return storetest.NewEvent(rng, storetest.Key(i%3), 1, storetest.BaseTime+int64(i), nil, "n")
	}
	s := openTest(t, Options{PurgeInterval: -1})
	defer s.Close()
	evs := []*nostr.Event{note(0), note(1), note(2)}
	for _, ev := range evs {
		if _, err := s.Save(ctx, []*nostr.Event{ev}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Save(ctx, []*nostr.Event{note(4), note(5), note(6)}); err != nil { // one commit
		t.Fatal(err)
	}
	if got := s.Stats().Commits; got != 4 {
		t.Fatalf("Commits = %d after four Saves, want 4", got)
	}
	if _, err := s.Save(ctx, evs); err != nil { // duplicates: nothing to write
		t.Fatal(err)
	}
	if got := s.Stats().Commits; got != 4 {
		t.Fatalf("Commits = %d after a Save of duplicates, want 4", got)
	}

	u := openTest(t, Options{PurgeInterval: -1, NoSync: true})
	defer u.Close()
	if _, err := u.Save(ctx, []*nostr.Event{note(3)}); err != nil {
		t.Fatal(err)
	}
	if got := u.Stats().Commits; got != 0 {
		t.Fatalf("Commits = %d for an unsynced store, want 0", got)
	}
}
