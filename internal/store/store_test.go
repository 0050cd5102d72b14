package store

import "testing"

func TestSnapshotIncludes(t *testing.T) {
	f := func(s Snapshot, seq uint64, want bool) {
		t.Helper()
		if got := s.Includes(seq); got != want {
			t.Errorf("%+v.Includes(%d) = %v, want %v", s, seq, got, want)
		}
	}
	// One writer: everything up to the last visible commit (7).
	one := Snapshot{Low: 8, High: 8}
	f(one, 0, false)
	f(one, 1, true)
	f(one, 7, true)
	f(one, 8, false)
	f(one, 9, false)
	// A transaction snapshot: below 100 visible, 100 and 103 in progress,
	// 105 and up not started.
	mvcc := Snapshot{Low: 100, High: 105, Open: []uint64{100, 103}}
	f(mvcc, 0, false)
	f(mvcc, 99, true)
	f(mvcc, 100, false)
	f(mvcc, 101, true)
	f(mvcc, 102, true)
	f(mvcc, 103, false)
	f(mvcc, 104, true)
	f(mvcc, 105, false)
	f(mvcc, 1<<63, false)
	// The zero Snapshot includes nothing.
	var zero Snapshot
	f(zero, 0, false)
	f(zero, 1, false)
	f(zero, ^uint64(0), false)
}
