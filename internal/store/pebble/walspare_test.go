package pebble

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// diskDir returns a new directory on a disk filesystem (spares are not
// kept on a tmpfs), or skips.
func diskDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if onTmpfs(dir) {
		t.Skip("the test directory is on a tmpfs")
	}
	return dir
}

// waitSpares waits until sp holds n ready spares (the bound of a hang,
// not a speed target).
func waitSpares(t testing.TB, sp *walSpares, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for sp.readyCount() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d write-ahead log spares ready, want %d", sp.readyCount(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// files returns the names and sizes of dir's files matching pattern.
func files(t *testing.T, dir, pattern string) map[string]int64 {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = fi.Size()
	}
	return out
}

func saveNotes(t *testing.T, s *Store, seed uint64, n int) []nostr.ID {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed))
	var ids []nostr.ID
	for i := 0; i < n; i++ {
		ev := storetest.NewEvent(rng, storetest.Key(i%7), 1, storetest.BaseTime+int64(i), nil, "spare note")
		res, err := s.Save(context.Background(), []*nostr.Event{ev})
		if err != nil || res[0].Outcome != store.Stored {
			t.Fatalf("save: %v %+v", err, res)
		}
		ids = append(ids, ev.ID)
	}
	return ids
}

// TestWALSparesAcrossRestarts: a store keeps a spare written ahead, the
// spare outlives Close (the final flush's new log does not take it), and
// the next open's first write-ahead log is that spare: a file of the
// spare's size from the start, written with every commit's events
// before the zeros, which a reopen replays.
func TestWALSparesAcrossRestarts(t *testing.T) {
	dir := diskDir(t)
	const mem = 1 << 20
	opts := Options{Path: dir, MemTableSize: mem, WALSpares: 1, PurgeInterval: -1}
	s := openTest(t, opts)
	waitSpares(t, s.spares, 1)
	// pebble's reservation for a log, in the keeper's whole chunks.
	size := s.spares.size
	if size < mem+mem/10 || size >= mem+mem/10+spareChunk {
		t.Fatalf("spare size %d for a %d-byte memtable", size, mem)
	}
	// Stats: the fresh store's first log was made before any spare.
	if st := s.Stats(); st.WALSpares != 1 || st.WALSparesReady != 1 || st.WALSparesUsed != 0 || st.WALLogsUnspared < 1 {
		t.Fatalf("fresh store's spare stats: %+v", st)
	}
	ids := saveNotes(t, s, 1, 20)
	unspared := s.Stats().WALLogsUnspared
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Close's final flush makes a log that takes no spare and is not
	// counted as one that found none.
	if st := s.Stats(); st.WALLogsUnspared != unspared || st.WALSparesUsed != 0 {
		t.Fatalf("spare stats after Close: %+v, want %d logs unspared as before", st, unspared)
	}
	spares := files(t, dir, walSparePrefix+"*")
	if len(spares) != 1 {
		t.Fatalf("after Close: spares %v, want one", spares)
	}
	for name, n := range spares {
		if n != size {
			t.Fatalf("spare %s holds %d bytes, want %d", name, n, size)
		}
	}

	s = openTest(t, opts)
	if got := s.spares.used.Load(); got != 1 {
		t.Fatalf("the open's first write-ahead log took %d spares, want 1", got)
	}
	logs := files(t, dir, "*.log")
	var spareLog string
	for name, n := range logs {
		if n == size {
			spareLog = name
		}
	}
	if spareLog == "" {
		t.Fatalf("no write-ahead log of the spare's size: %v", logs)
	}
	waitSpares(t, s.spares, 1) // and a new one is made
	if st := s.Stats(); st.WALSpares != 1 || st.WALSparesReady != 1 || st.WALSparesUsed != 1 || st.WALLogsUnspared != 0 {
		t.Fatalf("reopened store's spare stats: %+v, want 1 used, none unspared", st)
	}
	more := saveNotes(t, s, 2, 20)
	if n := files(t, dir, spareLog)[spareLog]; n != size {
		t.Fatalf("the write-ahead log %s grew to %d bytes, want the spare's %d", spareLog, n, size)
	}
	// The commits went into the spare's first blocks, before its zeros.
	data, err := os.ReadFile(filepath.Join(dir, spareLog))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data[:len(data)/2], more[len(more)-1][:]) {
		t.Fatalf("the last event's id is not in the first half of %s", spareLog)
	}
	if bytes.ContainsFunc(data[len(data)/2:], func(r rune) bool { return r != 0 }) {
		t.Fatalf("the second half of %s is not zeros", spareLog)
	}
	// A reopen without Close in between is the crash tests' matter; a
	// clean one finds every event.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, opts)
	defer s.Close()
	for _, id := range append(ids, more...) {
		if ok, err := s.Has(context.Background(), id); err != nil || !ok {
			t.Fatalf("event %s missing after the reopen: %v", id, err)
		}
	}
}

// TestWALSparesAdopted: an open adopts the spares of the right size left
// in the directory up to want, deletes the rest, those of another size
// and every half-written one, and numbers new spares after the highest it
// saw.
func TestWALSparesAdopted(t *testing.T) {
	dir := diskDir(t)
	const size = 1 << 20
	zeros := make([]byte, size)
	for _, name := range []string{"wal-spare-3", "wal-spare-8", "wal-spare-5", "wal-spare-9.tmp", "wal-spare-x", "000004.log"} {
		if err := os.WriteFile(filepath.Join(dir, name), zeros, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Spares of another size (written for another memtable size).
	for name, n := range map[string]int{"wal-spare-1": size / 2, "wal-spare-4": size + spareChunk} {
		if err := os.WriteFile(filepath.Join(dir, name), zeros[:0], 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(filepath.Join(dir, name), int64(n)); err != nil {
			t.Fatal(err)
		}
	}
	sp, err := newWALSpares(dir, 2, size, 0, quiet)
	if err != nil {
		t.Fatal(err)
	}
	got := files(t, dir, "*")
	for _, name := range []string{"wal-spare-3", "wal-spare-5", "wal-spare-x", "000004.log"} {
		if _, ok := got[name]; !ok {
			t.Errorf("%s was deleted; files %v", name, got)
		}
	}
	for _, name := range []string{"wal-spare-1", "wal-spare-4", "wal-spare-8", "wal-spare-9.tmp"} {
		if _, ok := got[name]; ok {
			t.Errorf("%s was kept; files %v", name, got)
		}
	}
	if p := sp.take(); filepath.Base(p) != "wal-spare-3" {
		t.Errorf("first spare taken %q, want wal-spare-3", p)
	}
	sp.mu.Lock()
	next := sp.newName()
	sp.mu.Unlock()
	if filepath.Base(next) != "wal-spare-10" {
		t.Errorf("next spare %q, want wal-spare-10", next)
	}
}

// TestWALSparesGoneWhileScanned: spares removed between the directory's
// read and their own look (another process tidying the directory, an
// operator's rm) are skipped, not a failed open: a spare whose size can
// no longer be read, a half-written one and one of another size, each
// removed after ReadDir. The one left is adopted; numbering goes past all.
// (Before, the first two failed the store's open with ENOENT.)
func TestWALSparesGoneWhileScanned(t *testing.T) {
	dir := t.TempDir()
	const size = 1 << 20
	for name, n := range map[string]int{"wal-spare-2": size, "wal-spare-4": size, "wal-spare-6.tmp": size, "wal-spare-7": size / 2} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, int64(n)); err != nil {
			t.Fatal(err)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"wal-spare-4", "wal-spare-6.tmp", "wal-spare-7"} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	// os.ReadDir's entries read a file's size when asked (lstat), so the
	// three are gone for scan as they would be in the race.
	sp := &walSpares{dir: dir, size: size}
	found, err := sp.scan(ents)
	if err != nil {
		t.Fatalf("scan with spares gone: %v", err)
	}
	if len(found) != 1 || filepath.Base(found[0].path) != "wal-spare-2" {
		t.Errorf("found %v, want wal-spare-2 alone", found)
	}
	if sp.next != 8 {
		t.Errorf("next spare number %d, want 8", sp.next)
	}
}

// TestWALSparesNeedRoom: a spare is written only where the filesystem
// keeps twice a spare above the store's reserve: at that much free
// space, yes; a byte less, no. A store whose reserve the filesystem
// cannot keep gets none.
func TestWALSparesNeedRoom(t *testing.T) {
	const size = 70 << 20
	for _, c := range []struct {
		free, min uint64
		want      bool
	}{
		{512<<20 + 2*size, 512 << 20, true},
		{512<<20 + 2*size - 1, 512 << 20, false},
		{2 * size, 0, true},
		{2*size - 1, 0, false},
	} {
		if got := roomForSpare(c.free, c.min, size); got != c.want {
			t.Errorf("roomForSpare(%d, %d, %d) = %v, want %v", c.free, c.min, size, got, c.want)
		}
	}

	dir := diskDir(t)
	sp, err := newWALSpares(dir, 1, 1<<20, 1<<60, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if sp.step() { // what the keeper does at a poke
		t.Fatal("a spare was written without the room for it")
	}
	if got := files(t, dir, "*"); len(got) != 0 || sp.written.Load() != 0 {
		t.Fatalf("files %v, %d spares written, without the room for them", got, sp.written.Load())
	}
}

// BenchmarkSyncedSaveAfterRestart: one event a synced Save (a relay at a
// low rate: one event a commit) into two stores just reopened, one whose
// first write-ahead log is a new file and one whose first log is a spare
// written ahead (its keeper's next spare written before the timing
// starts), in turn, so that the disk's noise falls on both alike. It
// reports the median and mean of each: new-µs and spare-µs. The
// directories are TMPDIR's: run it on the filesystem to judge
// (docs/BENCHMARKS.md, issue 19).
func BenchmarkSyncedSaveAfterRestart(b *testing.B) {
	if onTmpfs(b.TempDir()) {
		b.Skip("the directory is on a tmpfs")
	}
	rng := rand.New(rand.NewPCG(9, 9))
	evs := make([]*nostr.Event, 2*b.N)
	for i := range evs {
		evs[i] = storetest.NewEvent(rng, storetest.Key(i%50), 1, storetest.BaseTime+int64(i), nil,
			"a note of about the length of a text note, written to the write-ahead log")
	}
	restarted := func(spares int) *Store {
		opts := Options{Path: b.TempDir(), WALSpares: spares, PurgeInterval: -1, Logger: quiet, MinFreeBytes: -1}
		s := openTest(b, opts)
		if spares > 0 {
			waitSpares(b, s.spares, 1)
		}
		s.Close()
		s = openTest(b, opts)
		if spares > 0 {
			if s.spares.used.Load() != 1 {
				b.Fatal("the first write-ahead log took no spare")
			}
			waitSpares(b, s.spares, 1)
		}
		return s
	}
	stores := [2]*Store{restarted(0), restarted(1)}
	defer stores[0].Close()
	defer stores[1].Close()
	var took [2][]time.Duration
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range 2 {
			k := (i + j) % 2 // each first in every other round
			start := time.Now()
			if _, err := stores[k].Save(ctx, evs[2*i+j:2*i+j+1]); err != nil {
				b.Fatal(err)
			}
			took[k] = append(took[k], time.Since(start))
		}
	}
	b.StopTimer()
	for k, name := range []string{"new", "spare"} {
		d := took[k]
		slices.Sort(d)
		var sum time.Duration
		for _, x := range d {
			sum += x
		}
		b.ReportMetric(float64(d[len(d)/2].Nanoseconds())/1e3, name+"-µs-p50")
		b.ReportMetric(float64(sum.Nanoseconds())/1e3/float64(len(d)), name+"-µs-mean")
	}
}
