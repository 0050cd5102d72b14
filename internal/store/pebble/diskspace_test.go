package pebble

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// spaceFS is a filesystem whose free space the test sets.
type spaceFS struct {
	vfs.FS
	avail atomic.Uint64
}

func (f *spaceFS) GetDiskUsage(string) (vfs.DiskUsage, error) {
	a := f.avail.Load()
	return vfs.DiskUsage{AvailBytes: a, TotalBytes: 1 << 40, UsedBytes: 1<<40 - a}, nil
}

// TestReserveLimit: a write that leaves exactly the reserve free is
// accepted; one byte more is refused with store.ErrDiskFull.
func TestReserveLimit(t *testing.T) {
	fs := &spaceFS{FS: vfs.NewMem()}
	r := newReserve(fs, "/db", 1000)
	fs.avail.Store(1100)
	if _, err := r.check(100); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	changed, err := r.check(101)
	if !errors.Is(err, store.ErrDiskFull) || !changed {
		t.Fatalf("past the limit: %v, changed %v; want ErrDiskFull, changed", err, changed)
	}
	if changed, err := r.check(101); err == nil || changed {
		t.Fatalf("still past the limit: %v, changed %v", err, changed)
	}
	if changed, err := r.check(100); err != nil || !changed {
		t.Fatalf("back at the limit: %v, changed %v", err, changed)
	}
	if _, err := newReserve(fs, "/db", -1).check(1 << 30); err != nil {
		t.Fatalf("no reserve: %v", err)
	}
}

// TestDiskFull: while free space is below the reserve, saves and meta
// writes are refused with store.ErrDiskFull (nothing of them is stored),
// reads work and Stats says so; once space returns, writes are accepted
// again without reopening, and everything accepted before is there.
func TestDiskFull(t *testing.T) {
	ctx := context.Background()
	fs := &spaceFS{FS: vfs.NewMem()}
	fs.avail.Store(1 << 30)
	s := openTest(t, Options{Path: "/db", FS: fs, PurgeInterval: -1, MinFreeBytes: 64 << 20})
	defer s.Close()
	// Far above the reserve the writer asks the filesystem at most every
	// reserveRecheck; the clock moves past that whenever the free space
	// changes, as it would between two such drops in a real store.
	clock := time.Unix(1e9, 0)
	s.space.mu.Lock()
	s.space.now = func() time.Time { return clock }
	s.space.asked = time.Time{} // Open's writes asked on the real clock
	s.space.mu.Unlock()
	setAvail := func(n uint64) {
		fs.avail.Store(n)
		s.space.mu.Lock()
		clock = clock.Add(reserveRecheck)
		s.space.mu.Unlock()
	}
	rng := rand.New(rand.NewPCG(3, 3))
	alice := storetest.Key(1)
	ts := int64(storetest.BaseTime)
	before := storetest.NewEvent(rng, alice, 1, ts, nil, "before")
	if res, err := s.Save(ctx, []*nostr.Event{before}); err != nil || res[0].Outcome != store.Stored {
		t.Fatalf("before: %v %+v", err, res)
	}
	if st := s.Stats(); st.DiskFull || st.DiskFreeBytes != 1<<30 {
		t.Fatalf("stats with space: %+v", st)
	}

	setAvail(64<<20 - 1)
	during := storetest.NewEvent(rng, alice, 1, ts+1, nil, "during")
	res, err := s.Save(ctx, []*nostr.Event{during})
	if err == nil {
		err = res[0].Err
	}
	if !errors.Is(err, store.ErrDiskFull) {
		t.Fatalf("save on a full disk: %v %+v; want ErrDiskFull", err, res)
	}
	done := make(chan store.SaveResult, 1)
	s.Submit(ctx, during, func(r store.SaveResult) { done <- r })
	if r := <-done; r.Outcome != store.Failed || !errors.Is(r.Err, store.ErrDiskFull) {
		t.Fatalf("submit on a full disk: %+v", r)
	}
	if err := s.SaveMeta(ctx, "x", []byte("y")); !errors.Is(err, store.ErrDiskFull) {
		t.Fatalf("SaveMeta on a full disk: %v", err)
	}
	if st := s.Stats(); !st.DiskFull || st.DiskFreeBytes != 64<<20-1 {
		t.Fatalf("stats on a full disk: %+v", st)
	}
	got := searchIDs(t, s, nostr.Filter{})
	if len(got) != 1 || got[0] != before.ID {
		t.Fatalf("read on a full disk: %v", got)
	}

	setAvail(1 << 30)
	if res, err := s.Save(ctx, []*nostr.Event{during}); err != nil || res[0].Outcome != store.Stored {
		t.Fatalf("after space returned: %v %+v", err, res)
	}
	if st := s.Stats(); st.DiskFull {
		t.Fatalf("stats after space returned: %+v", st)
	}
	if got := searchIDs(t, s, nostr.Filter{}); len(got) != 2 {
		t.Fatalf("after: %v", got)
	}
}

// TestReserveRecheck: far above the reserve, commits within
// reserveRecheck of the last answer are let through without asking the
// filesystem, until what they wrote (counted twice) would bring the free
// space within reserveSlack of the reserve; past the interval, near the
// reserve and after a refusal, every commit asks.
func TestReserveRecheck(t *testing.T) {
	fs := &spaceFS{FS: vfs.NewMem()}
	r := newReserve(fs, "/db", 1000)
	clock := time.Unix(1e9, 0)
	r.now = func() time.Time { return clock }
	asks := func() int64 { return r.statfs.Load() }
	fs.avail.Store(1000 + reserveSlack + 10_000) // room: 10,000 bytes

	mustPass := func(n int) {
		t.Helper()
		if _, err := r.check(n); err != nil {
			t.Fatalf("check(%d): %v", n, err)
		}
	}
	mustPass(100) // the first check asks
	if asks() != 1 {
		t.Fatalf("first check: %d queries, want 1", asks())
	}
	// 4,950 bytes charged as 9,900: within the room.
	for range 49 {
		mustPass(100)
	}
	mustPass(50)
	if asks() != 1 {
		t.Fatalf("within the room: %d queries, want 1", asks())
	}
	// 100 more bytes (200 charged) would pass the room of 10,000: ask.
	mustPass(51)
	if asks() != 2 {
		t.Fatalf("past the room: %d queries, want 2", asks())
	}
	// The new answer gives a new room; the interval ends it.
	mustPass(1)
	if asks() != 2 {
		t.Fatalf("after a new answer: %d queries, want 2", asks())
	}
	clock = clock.Add(reserveRecheck - 1)
	mustPass(1)
	if asks() != 2 {
		t.Fatalf("just inside the interval: %d queries, want 2", asks())
	}
	clock = clock.Add(1)
	mustPass(1)
	if asks() != 3 {
		t.Fatalf("at the interval: %d queries, want 3", asks())
	}

	// Free space drops inside the interval: seen at the next ask, and
	// then every commit asks while refusing.
	fs.avail.Store(1000 + 50)
	clock = clock.Add(reserveRecheck)
	if _, err := r.check(51); !errors.Is(err, store.ErrDiskFull) {
		t.Fatalf("below the reserve: %v, want ErrDiskFull", err)
	}
	if _, err := r.check(51); !errors.Is(err, store.ErrDiskFull) {
		t.Fatalf("still below: %v", err)
	}
	if asks() != 5 {
		t.Fatalf("while refusing: %d queries, want 5", asks())
	}
	// Near the reserve (less than the slack above it) every commit asks.
	fs.avail.Store(1000 + reserveSlack)
	mustPass(1)
	mustPass(1)
	if asks() != 7 {
		t.Fatalf("near the reserve: %d queries, want 7", asks())
	}
}
