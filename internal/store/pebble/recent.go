package pebble

import (
	"encoding/binary"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// The relay asks Has before it verifies an event (a duplicate then costs
// no verification), and the writer used to look the same id up again
// before storing it, because another copy may have been committed in
// between. recentIDs makes the second lookup unnecessary in the usual
// case: HasAt returns the number of commits visible when it looked (its
// token), the writer remembers the ids of its last commits, and an event
// whose id was not committed since the token (and is not earlier in the
// current batch) is known to be absent without asking pebble.

// recentKey is the part of an id the writer remembers: a false match only
// costs the full lookup.
func recentKey(id *nostr.ID) uint64 { return binary.LittleEndian.Uint64(id[:8]) }

// recentIDs remembers the ids stored by the writer's last commits, at
// most len(ring) of them. Used by the writer goroutine only.
type recentIDs struct {
	seq   map[uint64]uint64 // recentKey -> the commit that stored it
	ring  []recentEntry     // in commit order, oldest at next once full
	next  int
	full  bool
	floor uint64 // commits up to floor may be partly forgotten
	batch map[uint64]struct{}
}

type recentEntry struct {
	key, seq uint64
}

// defaultRecentIDs is how many ids the writer remembers: far more than can
// be admitted and not yet committed at once (the relay's in-flight cap is
// a thousand events), so a token is practically never too old.
const defaultRecentIDs = 1 << 16

func newRecentIDs(n int) *recentIDs {
	return &recentIDs{seq: map[uint64]uint64{}, ring: make([]recentEntry, n), batch: map[uint64]struct{}{}}
}

// stored records that the current batch stores id.
func (r *recentIDs) stored(id *nostr.ID) { r.batch[recentKey(id)] = struct{}{} }

// inBatch reports whether the current batch may store id (a false match
// is possible, a miss is not).
func (r *recentIDs) inBatch(id *nostr.ID) bool {
	_, ok := r.batch[recentKey(id)]
	return ok
}

// absentSince reports whether id is certainly absent, given that it was
// absent when token commits were visible: not stored by any commit since
// (all of which are remembered) nor earlier in the current batch.
func (r *recentIDs) absentSince(id *nostr.ID, token uint64) bool {
	if token < r.floor {
		return false
	}
	k := recentKey(id)
	if _, ok := r.batch[k]; ok {
		return false
	}
	_, ok := r.seq[k]
	return !ok
}

// committed records the current batch as commit seq.
func (r *recentIDs) committed(seq uint64) {
	for k := range r.batch {
		if r.full {
			old := r.ring[r.next]
			if r.seq[old.key] == old.seq {
				delete(r.seq, old.key)
			}
			r.floor = old.seq
		}
		r.ring[r.next] = recentEntry{key: k, seq: seq}
		r.seq[k] = seq
		if r.next++; r.next == len(r.ring) {
			r.next, r.full = 0, true
		}
	}
	clear(r.batch)
}

// failed forgets the current batch: nothing of it was committed.
func (r *recentIDs) failed() { clear(r.batch) }
