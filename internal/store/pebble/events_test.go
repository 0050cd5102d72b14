package pebble

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
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
// (at debug level) and are counted, so a latency spike can be matched
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
	if n := s.pebbleEvents.flushes.Load(); n == 0 {
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
