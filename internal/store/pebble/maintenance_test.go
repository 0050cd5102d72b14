package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// notes returns n kind-1 notes by a few authors, with a tag and some
// searchable text.
func notes(seed uint64, n int) []*nostr.Event {
	rng := rand.New(rand.NewPCG(seed, 1))
	evs := make([]*nostr.Event, n)
	for i := range evs {
		evs[i] = storetest.NewEvent(rng, storetest.Key(i%5), 1, storetest.BaseTime+int64(i),
			nostr.Tags{{"t", "maint"}}, fmt.Sprintf("maintenance note %d about pebble tables and compaction", i))
	}
	return evs
}

func countAll(t *testing.T, s *Store) int64 {
	t.Helper()
	n, err := s.Count(context.Background(), []nostr.Filter{{}})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestKeyspace writes through every table and checks that every key in
// the database starts with one of tables and lies in keyspace(), the
// range Compact covers; and that the test did reach every table, so the
// list has nothing the store does not write.
func TestKeyspace(t *testing.T) {
	s := openTest(t, Options{NoSync: true})
	defer s.Close()
	rng := rand.New(rand.NewPCG(3, 3))
	a, b := storetest.Key(1), storetest.Key(2)
	ts := int64(storetest.BaseTime)
	target := storetest.NewEvent(rng, a, 1, ts, nil, "to be deleted")
	evs := []*nostr.Event{
		storetest.NewEvent(rng, a, 1, ts+1, nostr.Tags{{"t", "x"}, {"p", b.Hex()}}, "searchable words here"),
		storetest.NewEvent(rng, a, 30023, ts+2, nostr.Tags{{"d", "article"}}, "an article"),
		storetest.NewEvent(rng, a, 1, ts+3, nostr.Tags{{"expiration", strconv.FormatInt(ts+1_000_000, 10)}}, "expires"),
		target,
		storetest.NewEvent(rng, a, 5, ts+4, nostr.Tags{{"e", target.ID.Hex()}, {"a", storetest.ATag(30023, a, "gone")}}, ""),
		storetest.NewEvent(rng, b, 62, ts+5, nostr.Tags{{"relay", "ALL_RELAYS"}}, ""),
	}
	saveAll(t, s, evs...)
	held := make(chan store.SaveResult, 1)
	if err := s.SubmitUnverified(context.Background(), storetest.NewEvent(rng, b, 1, ts, nil, "held"), func(r store.SaveResult) { held <- r }); err != nil {
		t.Fatal(err)
	}
	if r := <-held; r.Outcome != store.Held {
		t.Fatalf("hold: %v", r.Outcome)
	}
	// Fold the posting segment into S blocks, and leave another segment.
	if err := s.foldSegments(context.Background()); err != nil {
		t.Fatal(err)
	}
	saveAll(t, s, storetest.NewEvent(rng, b, 1, ts+6, nil, "more searchable words"))
	start, end := keyspace()
	seen := map[byte]bool{}
	it, err := s.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if !bytes.Contains(tables, k[:1]) {
			t.Errorf("key %x: its table %q is not in tables", k, k[0])
		}
		if bytes.Compare(k, start) < 0 || bytes.Compare(k, end) >= 0 {
			t.Errorf("key %x outside the keyspace [%x, %x)", k, start, end)
		}
		seen[k[0]] = true
	}
	if err := closeIter(it); err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if !seen[tb] {
			t.Errorf("the test wrote no key of table %q", tb)
		}
	}
}

// TestCompact deletes every event, compacts, and checks that the tables
// holding them were rewritten into the bottom level without them.
func TestCompact(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{NoSync: true, PurgeInterval: -1})
	evs := notes(1, 2000)
	saveAll(t, s, evs...)
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	ids := make([]nostr.ID, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	if n, err := s.Delete(ctx, ids); err != nil || n != len(evs) {
		t.Fatalf("delete: %d %v", n, err)
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	tableBytes := func() (upper, bottom int64) {
		m := s.db.Metrics()
		for i, l := range m.Levels {
			if i == len(m.Levels)-1 {
				bottom += l.TablesSize
			} else {
				upper += l.TablesSize
			}
		}
		return upper, bottom
	}
	before, _ := tableBytes()
	if before == 0 {
		t.Fatal("nothing in the upper levels before the compaction: the test compacts nothing")
	}
	if err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	upper, bottom := tableBytes()
	if upper != 0 {
		t.Fatalf("%d bytes of tables above the bottom level after Compact", upper)
	}
	// The bodies and index entries of the deleted events are gone: what
	// is left (metadata and the search blocks deletions leave behind) is
	// a fraction of the tables that held them.
	if bottom*2 >= before {
		t.Fatalf("bottom level %d bytes after Compact, tables held %d before: deleted entries kept", bottom, before)
	}
	if n := countAll(t, s); n != 0 {
		t.Fatalf("%d events after deleting all", n)
	}
	// Compact folds the search index's posting segments too.
	saveAll(t, s, notes(2, 3)...)
	if g := countTable(t, s, pfxSegment); g == 0 {
		t.Fatal("no posting segment before the compaction: the check below proves nothing")
	}
	if err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	if g := countTable(t, s, pfxSegment); g != 0 {
		t.Fatalf("%d posting segments after Compact", g)
	}
	s.Close()
	if err := s.Compact(ctx); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Compact after Close: %v, want ErrClosed", err)
	}
}

// TestCheckpoint copies a NoSync store (so the flushed WAL matters) and
// opens the copy: it holds exactly what was committed before the call.
func TestCheckpoint(t *testing.T) {
	s := openTest(t, Options{NoSync: true, PurgeInterval: -1})
	defer s.Close()
	evs := notes(2, 300)
	saveAll(t, s, evs...)
	dest := filepath.Join(t.TempDir(), "copy")
	if err := s.Checkpoint(dest); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(dest); err == nil {
		t.Fatal("a second checkpoint into the same directory succeeded")
	}
	// Written beside dest under another name and renamed: nothing else
	// is left there.
	if ents, err := os.ReadDir(filepath.Dir(dest)); err != nil || len(ents) != 1 || ents[0].Name() != "copy" {
		t.Fatalf("beside the copy: %v %v", ents, err)
	}
	saveAll(t, s, notes(3, 10)...) // after the checkpoint: not in the copy

	cp := openTest(t, Options{Path: dest, PurgeInterval: -1})
	defer cp.Close()
	if n := countAll(t, cp); n != int64(len(evs)) {
		t.Fatalf("the copy holds %d events, want %d", n, len(evs))
	}
	it, err := cp.Query(context.Background(), []nostr.Filter{{IDs: []nostr.ID{evs[0].ID}}})
	if err != nil {
		t.Fatal(err)
	}
	if !it.Next() || !bytes.Equal(it.Record().Raw, evs[0].Raw) {
		t.Fatal("the copy lacks the first event's body")
	}
	it.Close()
	if err := checkIntegrity(cp.db); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := s.Checkpoint(filepath.Join(t.TempDir(), "late")); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Checkpoint after Close: %v, want ErrClosed", err)
	}
}

// TestSync commits without syncing (NoSync), then crashes the machine
// (pebble's crashable in-memory filesystem, keeping only synced data)
// before and after Sync: only Sync makes the writes survive.
func TestSync(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s := openTest(t, Options{Path: "/db", FS: fs, NoSync: true, PurgeInterval: -1})
	evs := notes(4, 200)
	saveAll(t, s, evs...)
	crashed := func() int64 {
		t.Helper()
		c := openTest(t, Options{Path: "/db", FS: fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}), PurgeInterval: -1})
		defer c.Close()
		return countAll(t, c)
	}
	if n := crashed(); n != 0 {
		t.Fatalf("%d unsynced events survived the crash: the test shows nothing", n)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := crashed(); n != int64(len(evs)) {
		t.Fatalf("%d events survived a crash after Sync, want %d", n, len(evs))
	}
	s.Close()
	if err := s.Sync(); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Sync after Close: %v, want ErrClosed", err)
	}
}

// watchFS notes, at every file a checkpoint writes, whether its final
// directory exists yet.
type watchFS struct {
	vfs.FS
	dest          string
	writes, early int
}

func (w *watchFS) note(name string) {
	if strings.HasPrefix(name, w.dest+"/") || strings.HasPrefix(name, w.dest+".partial-") {
		w.writes++
		if _, err := os.Stat(w.dest); err == nil {
			w.early++
		}
	}
}

func (w *watchFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	w.note(name)
	return w.FS.Create(name, c)
}

func (w *watchFS) Link(oldname, newname string) error {
	w.note(newname)
	return w.FS.Link(oldname, newname)
}

// TestCheckpointWhole: while a checkpoint writes its files, its directory
// does not exist under the name asked for, so an interrupted copy is never
// taken for a backup.
func TestCheckpointWhole(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "copy")
	w := &watchFS{FS: vfs.Default, dest: dest}
	s := openTest(t, Options{FS: w, PurgeInterval: -1})
	defer s.Close()
	saveAll(t, s, notes(2, 300)...)
	if err := s.Checkpoint(dest); err != nil {
		t.Fatal(err)
	}
	if w.writes < 3 || w.early != 0 {
		t.Fatalf("%d files written by the checkpoint, %d of them with %s already there", w.writes, w.early, dest)
	}
	cp := openTest(t, Options{Path: dest, PurgeInterval: -1})
	defer cp.Close()
	if n := countAll(t, cp); n != 300 {
		t.Fatalf("the copy holds %d events", n)
	}
	// A name given with a trailing slash is the same directory.
	slashed := filepath.Join(t.TempDir(), "copy2") + "/"
	if err := s.Checkpoint(slashed); err != nil {
		t.Fatalf("checkpoint into %s: %v", slashed, err)
	}
	cp2 := openTest(t, Options{Path: slashed, PurgeInterval: -1})
	defer cp2.Close()
	if n := countAll(t, cp2); n != 300 {
		t.Fatalf("the copy into %s holds %d events", slashed, n)
	}
}
