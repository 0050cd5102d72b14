package pebble

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// crashWorkload writes through the store with Save and Submit from several
// goroutines until stop is closed, calling confirm (serialized) with the id
// of every event whose save was reported Stored.
func crashWorkload(s *Store, seed uint64, stop <-chan struct{}, confirm func(nostr.ID)) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	ctx := context.Background()
	ok := func(id nostr.ID) {
		mu.Lock()
		confirm(id)
		mu.Unlock()
	}
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				author := storetest.Key(g*10 + i%10)
				ts := int64(storetest.BaseTime + i)
				if g%2 == 0 {
					// Save batches, including replaceable events.
					var batch []*nostr.Event
					for j := 0; j < 1+rng.IntN(16); j++ {
						kind := []int{1, 1, 7, 0, 30023}[rng.IntN(5)]
						batch = append(batch, crashEvent(rng, author, kind, ts+int64(j), nostr.Tags{{"d", "x"}, {"t", "crash"}}, "save"))
					}
					res, err := s.Save(ctx, batch)
					if err != nil {
						return
					}
					for j, r := range res {
						if r.Outcome == store.Stored && batch[j].Class() == nostr.Regular {
							ok(batch[j].ID)
						}
					}
					continue
				}
				ev := crashEvent(rng, author, 1, ts, nostr.Tags{{"t", "crash"}}, "submit")
				err := s.Submit(ctx, ev, func(r store.SaveResult) {
					if r.Outcome == store.Stored {
						ok(ev.ID)
					}
				})
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// crashEvent builds a workload event whose content has a word of its own
// (wordOf its id), so that the check after the crash can find each event
// by search.
func crashEvent(rng *rand.Rand, author nostr.PubKey, kind int, ts int64, tags nostr.Tags, how string) *nostr.Event {
	ev := storetest.NewEvent(rng, author, kind, ts, tags, how)
	ev.Content = how + " " + wordOf(ev.ID)
	ev.Raw = nostr.Serialize(ev)
	return ev
}

// wordOf returns the search word of a crash workload event.
func wordOf(id nostr.ID) string { return "w" + id.Hex()[:16] }

// checkConfirmed reopens nothing: it checks that every confirmed id is in
// s, with its body, and that the database is consistent.
func checkConfirmed(t *testing.T, s *Store, confirmed []nostr.ID) {
	t.Helper()
	ctx := context.Background()
	missing := 0
	for _, id := range confirmed {
		ok, err := s.Has(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d confirmed events lost in the crash", missing, len(confirmed))
	}
	// Every confirmed event is queryable with its body, and the notes
	// (kind 1; kind 7 content is not indexed) are found by search.
	var notes []nostr.ID
	for i := 0; i < len(confirmed); i += 200 {
		ids := confirmed[i:min(i+200, len(confirmed))]
		it, err := s.Query(ctx, []nostr.Filter{{IDs: ids}})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for it.Next() {
			if _, err := nostr.ParseEvent(it.Record().Raw, nil); err != nil {
				t.Fatalf("body of %s: %v", it.Record().ID.Hex()[:8], err)
			}
			if it.Record().Kind == 1 {
				notes = append(notes, it.Record().ID)
			}
			n++
		}
		it.Close()
		if n != len(ids) {
			t.Fatalf("query by id returned %d of %d", n, len(ids))
		}
	}
	for _, id := range notes {
		it, err := s.Query(ctx, []nostr.Filter{{Search: wordOf(id)}})
		if err != nil {
			t.Fatal(err)
		}
		var got []nostr.ID
		for it.Next() {
			got = append(got, it.Record().ID)
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		it.Close()
		if len(got) != 1 || got[0] != id {
			t.Fatalf("search for the word of %s found %d events", id.Hex()[:8], len(got))
		}
	}
	// Every index entry, search postings included, points at a stored
	// event, and every stored event has all its entries.
	if err := checkIntegrity(s.db); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d confirmed events all present after the crash (%d found by search)", len(confirmed), len(notes))
}

// TestCrashMemFS simulates a machine crash with pebble's crashable
// in-memory filesystem: the clone keeps what was synced and a random part
// of what was not.
func TestCrashMemFS(t *testing.T) {
	f := func(round int, memtable uint64, unsyncedPct int) {
		t.Run(fmt.Sprintf("round=%d", round), func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			s := openTest(t, Options{Path: "/db", FS: fs, MemTableSize: memtable, PurgeInterval: -1, NoSync: os.Getenv("PETREL_CRASH_NOSYNC") != ""})
			var mu sync.Mutex
			var confirmed []nostr.ID
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				crashWorkload(s, uint64(round), stop, func(id nostr.ID) {
					mu.Lock()
					confirmed = append(confirmed, id)
					mu.Unlock()
				})
				close(done)
			}()
			// Let the writers run until a few hundred events are confirmed
			// (slow under the race detector).
			var before []nostr.ID
			for start := time.Now(); time.Since(start) < 30*time.Second; {
				time.Sleep(100 * time.Millisecond)
				mu.Lock()
				n := len(confirmed)
				mu.Unlock()
				if n >= 500 && time.Since(start) > 300*time.Millisecond {
					break
				}
			}
			// Everything confirmed before the crash must survive it.
			mu.Lock()
			before = append(before, confirmed...)
			mu.Unlock()
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsyncedPct, RNG: rand.New(rand.NewPCG(uint64(round), 1))})
			close(stop)
			<-done
			s.Close()
			if len(before) == 0 {
				t.Fatal("no events confirmed before the crash")
			}
			s2 := openTest(t, Options{Path: "/db", FS: crashed, PurgeInterval: -1})
			defer s2.Close()
			checkConfirmed(t, s2, before)
			// The store still works after recovery.
			ev := storetest.NewEvent(rand.New(rand.NewPCG(9, 9)), storetest.Key(999), 1, storetest.BaseTime, nil, "after")
			if res, err := s2.Save(context.Background(), []*nostr.Event{ev}); err != nil || res[0].Outcome != store.Stored {
				t.Fatalf("save after recovery: %v %v", res, err)
			}
		})
	}
	// Exactly the synced data; some of the unsynced; with many memtable
	// flushes. (PETREL_CRASH_NOSYNC=1 shows the test failing when commits
	// are not synced.)
	f(0, 0, 0)
	f(1, 1<<20, 50)
	f(2, 1<<20, 0)
}

const crashChildEnv = "PETREL_STORE_CRASH_CHILD"

// crashSparesEnv makes TestCrashChild keep write-ahead log spares.
const crashSparesEnv = "PETREL_STORE_CRASH_SPARES"

// TestCrashChild is the child process of TestCrashKill; it does nothing
// unless crashChildEnv names a directory. It writes until killed, printing
// "ok <id>" for each confirmed event.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("child process of TestCrashKill")
	}
	opts := Options{Path: dir, Logger: quiet, PurgeInterval: -1}
	if os.Getenv(crashSparesEnv) != "" {
		// Small memtables: many logs, each a write-ahead log spare.
		opts.WALSpares, opts.MemTableSize = 1, 1<<20
	}
	s, err := Open(opts)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	stop := make(chan struct{})
	time.AfterFunc(60*time.Second, func() { close(stop) }) // never outlive a lost parent
	crashWorkload(s, uint64(time.Now().UnixNano()), stop, func(id nostr.ID) {
		// One write(2) per line: a line printed is a line the parent reads.
		os.Stdout.Write([]byte("ok " + id.Hex() + "\n"))
	})
	os.Exit(0)
}

// TestCrashKill runs the workload in a child process, kills it with
// SIGKILL mid-write, and checks that every event the child saw confirmed
// is in the reopened store.
func TestCrashKill(t *testing.T) {
	if os.Getenv(crashChildEnv) != "" {
		t.Skip("in the child")
	}
	if testing.Short() {
		t.Skip("spawns a process")
	}
	for round := 0; round < 2; round++ {
		crashKill(t, t.TempDir(), 3000+2000*round, false)
	}
}

// TestCrashKillWALSpares: as TestCrashKill, with write-ahead log spares
// and 1 MiB memtables, twice on one directory: first killed within its
// first log, the spare written with zeros before it started (the replay
// meets zeros after the last record), then after many logs, spares
// (earlier logs extended with zeros) and logs pebble recycled.
func TestCrashKillWALSpares(t *testing.T) {
	if os.Getenv(crashChildEnv) != "" {
		t.Skip("in the child")
	}
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := diskDir(t)
	s := openTest(t, Options{Path: dir, WALSpares: 1, MemTableSize: 1 << 20, PurgeInterval: -1})
	waitSpares(t, s.spares, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for i, kill := range []int{100, 4000} {
		logs := crashKill(t, dir, kill, true)
		if i == 0 && !slices.Contains(slices.Collect(maps.Values(logs)), s.spares.size) {
			t.Fatalf("no write-ahead log of a spare's size (%d bytes) at the kill: %v", s.spares.size, logs)
		}
	}
	if got := files(t, dir, walSparePrefix+"*"); len(got) == 0 {
		t.Errorf("no spare left in %s", dir)
	}
}

// crashKill runs TestCrashChild on dir (with spares: crashSparesEnv),
// kills it once it has confirmed kill events (or after 20 s), checks
// that every event it confirmed is in the reopened store, and returns
// the sizes of the write-ahead logs the kill left.
func crashKill(t *testing.T, dir string, kill int, spares bool) map[string]int64 {
	t.Helper()
	env := []string{crashChildEnv + "=" + dir}
	opts := Options{Path: dir, PurgeInterval: -1}
	if spares {
		env = append(env, crashSparesEnv+"=1")
		opts.WALSpares, opts.MemTableSize = 1, 1<<20
	}
	cmd, _, sc := startChild(t, "TestCrashChild", env, false)
	var confirmed []nostr.ID
	killed := false
	deadline := time.Now().Add(20 * time.Second)
	for sc.Scan() {
		line := sc.Text()
		if hex, ok := strings.CutPrefix(line, "ok "); ok {
			id, err := nostr.ParseID(hex)
			if err != nil {
				t.Fatalf("child printed %q", line)
			}
			confirmed = append(confirmed, id)
		}
		if !killed && (len(confirmed) >= kill || time.Now().After(deadline)) {
			cmd.Process.Signal(syscall.SIGKILL)
			killed = true
		}
	}
	cmd.Wait()
	if !killed {
		t.Fatal("child exited before it was killed")
	}
	logs := files(t, dir, "*.log")
	t.Logf("killed after %d confirmed events; write-ahead logs left (name: bytes): %v", len(confirmed), logs)
	s := openTest(t, opts)
	checkConfirmed(t, s, confirmed)
	s.Close()
	return logs
}
