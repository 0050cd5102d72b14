package pebble

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"

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

	fs.avail.Store(64<<20 - 1)
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

	fs.avail.Store(1 << 30)
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
