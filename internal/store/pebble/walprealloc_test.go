package pebble

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// walAllocated saves one event in a new store under dir and returns the
// bytes allocated to its write-ahead log (blocks, not size: a
// preallocation keeps the size).
func walAllocated(t *testing.T, dir string) int64 {
	t.Helper()
	s := openTest(t, Options{Path: dir, PurgeInterval: -1})
	defer s.Close()
	ev := storetest.NewEvent(rand.New(rand.NewPCG(1, 1)), storetest.Key(1), 1, storetest.BaseTime, nil, "one")
	if res, err := s.Save(context.Background(), []*nostr.Event{ev}); err != nil || res[0].Outcome != store.Stored {
		t.Fatalf("save: %v %+v", err, res)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(logs) == 0 {
		t.Fatalf("no write-ahead log in %s", dir)
	}
	var total int64
	for _, l := range logs {
		fi, err := os.Stat(l)
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Sys().(*syscall.Stat_t).Blocks * 512
	}
	return total
}

// TestTmpfsWALNotPreallocated: on a tmpfs the write-ahead log holds
// only the pages written; elsewhere pebble preallocates it (110% of the
// 64 MiB memtable) as before.
func TestTmpfsWALNotPreallocated(t *testing.T) {
	const prealloc = 64 << 20 // at least the memtable size when pebble preallocates
	tmpfs := "/dev/shm"
	if !onTmpfs(tmpfs) {
		tmpfs = mountTestTmpfs(t)
	}
	dir, err := os.MkdirTemp(tmpfs, "petrel-wal-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if got := walAllocated(t, filepath.Join(dir, "db")); got >= 1<<20 {
		t.Errorf("tmpfs: the write-ahead log holds %d bytes for one event; want under 1 MiB (not preallocated)", got)
	}

	disk := t.TempDir()
	if onTmpfs(disk) {
		t.Skipf("%s is a tmpfs too: no disk filesystem to compare with", disk)
	}
	if got := walAllocated(t, disk); got < prealloc {
		t.Errorf("disk: the write-ahead log holds %d bytes; want pebble's preallocation (at least %d)", got, prealloc)
	}
}

// mountTestTmpfs mounts a tmpfs for the test, or skips it.
func mountTestTmpfs(t *testing.T) string {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256m"); err != nil {
		t.Skipf("no tmpfs at /dev/shm and cannot mount one: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}
