package pebble

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
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
