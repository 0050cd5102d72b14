package pebble

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/petrel-relay/petrel/internal/store"
)

// syncBuffer is a bytes.Buffer safe for pebble's goroutines to log into.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestEventListenerLogsFlushes: pebble's flushes reach the store's log
// (at debug level) and its stats, so a latency spike can be matched
// with the background work that caused it.
func TestEventListenerLogsFlushes(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := openTest(t, Options{Path: t.TempDir(), Logger: log})
	defer s.Close()
	if err := s.db.Set([]byte{0xff, 1}, []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := s.Stats().Background.Flushes; n == 0 {
		t.Fatal("no flush counted")
	}
	if !strings.Contains(buf.String(), "store: memtable flushed") {
		t.Fatalf("no flush in the log:\n%s", buf.String())
	}
}

// TestFlushYields: the block writes of a memtable flush and of a
// compaction give the processor back (yieldfs.go), and the commits'
// own writes (the WAL) do not.
func TestFlushYields(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, Options{Path: dir})
	put := func(v byte) {
		for i := 0; i < 2000; i++ {
			k := []byte{0xff, byte(i >> 8), byte(i)}
			if err := s.db.Set(k, bytes.Repeat([]byte{v}, 100), pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(1)
	if n := s.pace.yields.Load(); n != 0 {
		t.Fatalf("%d yields before any flush: the WAL's writes yield", n)
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	afterFlush := s.pace.yields.Load()
	if afterFlush == 0 {
		t.Fatal("a flush wrote its table without yielding")
	}
	// A second table over the same keys, so that the compaction merges
	// and rewrites them rather than moving one table down.
	put(2)
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	afterFlush = s.pace.yields.Load()
	if err := s.db.Compact(context.Background(), []byte{0}, []byte{0xff, 0xff, 0xff, 0xff}, true); err != nil {
		t.Fatal(err)
	}
	if s.pace.yields.Load() == afterFlush {
		t.Fatal("a compaction wrote its tables without yielding")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStatsBackground: Stats reports pebble's background work as it
// happens: a flush (its count and bytes, the table it leaves in L0), a
// compaction that rewrites two overlapping L0 tables (its count and
// bytes, L0 empty after it), and a write stall, counted when it begins
// and timed while it lasts.
func TestStatsBackground(t *testing.T) {
	s := openTest(t, Options{Path: t.TempDir(), PurgeInterval: -1})
	defer s.Close()
	bg := func() store.Background {
		t.Helper()
		b := s.Stats().Background
		if b == nil {
			t.Fatal("no Background in the stats of an open pebble store")
		}
		return *b
	}
	if b := bg(); b != (store.Background{}) {
		t.Fatalf("a new store reports background work: %+v", b)
	}
	put := func(v byte) {
		for i := 0; i < 2000; i++ {
			if err := s.db.Set([]byte{0xff, byte(i >> 8), byte(i)}, bytes.Repeat([]byte{v}, 100), nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	put(1)
	b := bg()
	if b.Flushes != 1 || b.FlushBytes <= 0 || b.L0Tables != 1 || b.L0Sublevels != 1 || b.Compactions != 0 || b.CompactionBytes != 0 {
		t.Fatalf("after one flush: %+v", b)
	}
	put(2)
	if err := s.db.Compact(context.Background(), []byte{0xff}, []byte{0xff, 0xff, 0xff}, false); err != nil {
		t.Fatal(err)
	}
	b = bg()
	if b.Flushes != 2 || b.Compactions < 1 || b.CompactionBytes <= 0 || b.L0Tables != 0 || b.L0Sublevels != 0 {
		t.Fatalf("after two flushes and a compaction: %+v", b)
	}
	// The compaction kept the newer value of each of the 2,000 keys only.
	if b.CompactionBytes >= b.FlushBytes {
		t.Fatalf("the compaction wrote %d bytes, the two flushes %d: it did not drop the older values", b.CompactionBytes, b.FlushBytes)
	}

	l := s.pebbleEvents.listener()
	l.WriteStallBegin(pebble.WriteStallBeginInfo{Reason: "test"})
	time.Sleep(2 * time.Millisecond)
	during := bg()
	if during.WriteStalls != 1 || during.WriteStallSeconds < 0.002 {
		t.Fatalf("during a stall: %+v", during)
	}
	l.WriteStallEnd()
	after := bg()
	if after.WriteStalls != 1 || after.WriteStallSeconds < during.WriteStallSeconds {
		t.Fatalf("after the stall: %+v (during it: %+v)", after, during)
	}
	if again := bg(); again.WriteStallSeconds != after.WriteStallSeconds {
		t.Fatalf("the stall time grows after the stall ended: %v then %v s", after.WriteStallSeconds, again.WriteStallSeconds)
	}
}
