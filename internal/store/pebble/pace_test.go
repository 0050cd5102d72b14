package pebble

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// TestBackgroundPause: a flush pauses after its blocks only while the
// writer commits and pebble is under no write pressure; without
// commits, under pressure, without a pause configured, and in Close's
// final flush, it only yields; during a write stall it does neither.
func TestBackgroundPause(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	n := 0
	// commit saves one event through the writer (a real commit).
	commit := func(s *Store) {
		t.Helper()
		ev := storetest.NewEvent(rng, storetest.Key(n%3), 1, storetest.BaseTime+int64(n), nil, "n")
		n++
		if _, err := s.Save(ctx, []*nostr.Event{ev}); err != nil {
			t.Fatal(err)
		}
	}
	// flush writes a table's worth of keys straight to pebble (no
	// commit of the writer) and flushes them: the counts it added.
	flush := func(s *Store) (pauses, yields uint64) {
		t.Helper()
		p0, y0 := s.pace.pauses.Load(), s.pace.yields.Load()
		for i := 0; i < 2000; i++ {
			k := []byte{0xff, byte(i >> 8), byte(i)}
			if err := s.db.Set(k, bytes.Repeat([]byte{byte(n)}, 100), pebble.NoSync); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
		return s.pace.pauses.Load() - p0, s.pace.yields.Load() - y0
	}

	s := openTest(t, Options{BackgroundPause: time.Microsecond})
	if d := s.BackgroundPause(); d != time.Microsecond {
		t.Errorf("BackgroundPause() = %v, want 1µs", d)
	}
	// The test decides what counts as recent, not the machine's speed.
	s.pace.busyWindow = time.Hour

	if p, y := flush(s); p != 0 || y == 0 {
		t.Errorf("a flush with no commit yet: %d pauses, %d yields; want none, some", p, y)
	}
	commit(s)
	if p, y := flush(s); p == 0 || y != 0 {
		t.Errorf("a flush while committing: %d pauses, %d yields; want some, none", p, y)
	}

	// A write stall (pebble's events, through the store's listener):
	// while it lasts a flush neither pauses nor yields, after it pauses
	// again.
	listener := s.pebbleEvents.listener()
	listener.WriteStallBegin(pebble.WriteStallBeginInfo{Reason: "test"})
	r0 := s.pace.runs.Load()
	if p, y := flush(s); p != 0 || y != 0 || s.pace.runs.Load() == r0 {
		t.Errorf("a flush during a write stall: %d pauses, %d yields, %d blocks run on; want none, none, some", p, y, s.pace.runs.Load()-r0)
	}
	listener.WriteStallEnd()
	commit(s)
	if p, y := flush(s); p == 0 || y != 0 {
		t.Errorf("a flush after the write stall: %d pauses, %d yields; want some, none", p, y)
	}

	// Write pressure: a memtable's worth waiting for its flush beside the
	// one being filled and the one flushed, or a deep L0; just under
	// either is no pressure.
	size := s.opts.MemTableSize
	for _, c := range []struct {
		set      func(*pebble.Metrics)
		pressure bool
	}{
		{func(m *pebble.Metrics) { m.MemTable.Size = pressureMemtables * size }, true},
		{func(m *pebble.Metrics) { m.MemTable.Size = pressureMemtables*size - 1 }, false},
		{func(m *pebble.Metrics) { m.Levels[0].Sublevels = pressureL0Sublevels }, true},
		{func(m *pebble.Metrics) { m.Levels[0].Sublevels = pressureL0Sublevels - 1 }, false},
	} {
		pressured := func() *pebble.Metrics {
			var pm pebble.Metrics
			c.set(&pm)
			return &pm
		}
		s.pace.metrics.Store(&pressured)
		s.pace.mu.Lock()
		s.pace.checked = 0 // read the new metrics at once
		s.pace.mu.Unlock()
		commit(s)
		p, y := flush(s)
		if c.pressure && (p != 0 || y == 0) {
			t.Errorf("a flush under write pressure: %d pauses, %d yields; want none, some", p, y)
		}
		if !c.pressure && p == 0 {
			t.Errorf("a flush just under write pressure: no pause (%d yields)", y)
		}
	}

	// Close's final flush: the writer committed just before.
	commit(s)
	if err := s.db.Set([]byte{0xff, 0, 0}, []byte("last"), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	// The flushes above started an L0 compaction, whose blocks may pause:
	// it ends before the counts are taken.
	for deadline := time.Now().Add(time.Minute); s.db.Metrics().Compact.NumInProgress > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a compaction still running after a minute")
		}
	}
	p0, y0 := s.pace.pauses.Load(), s.pace.yields.Load()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if p, y := s.pace.pauses.Load()-p0, s.pace.yields.Load()-y0; p != 0 || y == 0 {
		t.Errorf("Close's flush: %d pauses, %d yields; want none, some", p, y)
	}

	// No pause configured (the default, and every tool): yields only.
	s = openTest(t, Options{})
	if d := s.BackgroundPause(); d != 0 {
		t.Errorf("BackgroundPause() = %v with none configured, want 0", d)
	}
	s.pace.busyWindow = time.Hour
	commit(s)
	if p, y := flush(s); p != 0 || y == 0 {
		t.Errorf("no pause configured: %d pauses, %d yields; want none, some", p, y)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestBackgroundPauseWindow: a commit older than the busy window no
// longer makes the background pause (an idle relay flushes at full
// speed).
func TestBackgroundPauseWindow(t *testing.T) {
	p := newPacer(time.Microsecond, 64<<20)
	if p.shouldPause() {
		t.Fatal("pauses before any commit")
	}
	p.committed()
	if !p.shouldPause() {
		t.Fatal("no pause right after a commit")
	}
	p.lastCommit.Store(int64(time.Since(paceEpoch) - p.busyWindow - time.Millisecond))
	if p.shouldPause() {
		t.Fatal("pauses after the window")
	}
	p.committed()
	p.quiet.Store(true)
	if p.shouldPause() {
		t.Fatal("pauses once quiet (Close)")
	}
}
