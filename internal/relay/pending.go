package relay

import (
	"sync"
	"sync/atomic"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// pendingFanout counts the events submitted to the store whose fan-out has
// not finished: an id is added before the event is handed to the store's
// writer and removed by the dispatcher after the event's fan-out (or after
// its OK, when the store did not keep it).
//
// It closes a gap between a subscription's stored query and the live
// fan-out. A subscription is listed in the live index before its stored
// query starts, so every event committed after the query's snapshot is
// fanned out to it. But an event committed before the snapshot can still
// be on its way to the fan-out (the writer's callback and the dispatcher
// lag behind the commit): the stored query sends it, then the late fan-out
// would deliver it a second time, as a held event after EOSE or as a live
// one. So a stored query that sends an event whose id is pending here
// records the id in its subscription (sub.early), and the fan-out skips the
// subscription for that id (see dispatcher.fanout). Because the id stays
// pending until the whole fan-out of the event is done, a query that sends
// the event before the fan-out visits its subscription always sees it
// pending; a query that sends it after the visit finds it held (and marks
// it sent) or the subscription was not listed yet.
//
// sub.early therefore holds only ids that were pending, and each entry is
// removed when the fan-out visits the subscription: it is bounded by the
// events in flight between the verifiers and the dispatcher.
type pendingFanout struct {
	n      atomic.Int64 // total count, for a lock-free fast path
	shards [pendingShards]pendingShard
}

const pendingShards = 32

type pendingShard struct {
	mu sync.Mutex
	m  map[nostr.ID]int32
	_  [40]byte // keep shards on separate cache lines
}

func (p *pendingFanout) shard(id *nostr.ID) *pendingShard {
	return &p.shards[id[0]%pendingShards]
}

// add marks id pending (once more, if it already is).
func (p *pendingFanout) add(id nostr.ID) {
	sh := p.shard(&id)
	sh.mu.Lock()
	if sh.m == nil {
		sh.m = make(map[nostr.ID]int32)
	}
	sh.m[id]++
	sh.mu.Unlock()
	p.n.Add(1)
}

// done undoes one add.
func (p *pendingFanout) done(id nostr.ID) {
	sh := p.shard(&id)
	sh.mu.Lock()
	if c := sh.m[id]; c > 1 {
		sh.m[id] = c - 1
	} else if c == 1 {
		delete(sh.m, id)
	} else {
		sh.mu.Unlock()
		panic("BUG: pendingFanout.done without add")
	}
	sh.mu.Unlock()
	p.n.Add(-1)
}

// has reports whether id is pending. It takes a shard lock (a leaf in the
// lock order) unless nothing is pending.
func (p *pendingFanout) has(id nostr.ID) bool {
	if p.n.Load() == 0 {
		return false
	}
	sh := p.shard(&id)
	sh.mu.Lock()
	_, ok := sh.m[id]
	sh.mu.Unlock()
	return ok
}
