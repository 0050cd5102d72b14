package stream

import (
	gosync "sync"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// recent is a bounded set of event ids: once it holds max ids, adding one
// forgets the oldest. It is safe for concurrent use.
type recent struct {
	mu   gosync.Mutex
	max  int
	ids  map[nostr.ID]struct{}
	ring []nostr.ID // insertion order; once full, ring[next] is the oldest
	next int
}

func newRecent(max int) *recent {
	return &recent{max: max, ids: make(map[nostr.ID]struct{}, min(max, 1<<12))}
}

// claim adds id and reports whether it was absent.
func (r *recent) claim(id nostr.ID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.ids[id]; ok {
		return false
	}
	r.ids[id] = struct{}{}
	if len(r.ring) < r.max {
		r.ring = append(r.ring, id)
		return true
	}
	delete(r.ids, r.ring[r.next])
	r.ring[r.next] = id
	r.next = (r.next + 1) % r.max
	return true
}

// len returns the number of ids held.
func (r *recent) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ids)
}
