package relay

import (
	"sync/atomic"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// subscription states, guarded by Session.out.mu.
const (
	subStored uint8 = iota // stored query running: live matches are held
	subLive                // after EOSE: live matches are queued directly
	subClosed              // closed: nothing more is delivered
)

// held is a live event matched while the subscription's stored query was
// still running, with its commit position; it is sent after EOSE unless
// the stored query's snapshot includes that position.
type held struct {
	raw []byte
	seq uint64
}

// sub is one REQ subscription. There is one per subscribed connection at
// least, so its size counts in the memory per connection: the fields are
// ordered so that it fits the 288-byte size class (see TestSizes).
type sub struct {
	s       *Session
	id      string // shares prefix's bytes when it needs no escaping
	prefix  string // `["EVENT","<id>",`, built once
	filters []nostr.Filter
	one     [1]nostr.Filter // storage for filters when there is one
	entries []*entry        // index entries; guarded by index.mu

	// guarded by s.out.mu
	job *queryJob // the stored query, until EOSE; it holds the held events
	// The stored query's snapshot (store.Snapshot), set when its iterator
	// opens: the commits its answer reflects. Live events from those
	// commits are not delivered (see sawCommit). snapOpen is nil unless
	// the snapshot lists commits in progress (a shared SQL store).
	snapLow, snapHigh uint64
	snapOpen          *[]uint64

	stamp uint64 // dispatcher-only: last event sequence that visited this sub

	listed  bool        // guarded by index.mu
	state   uint8       // guarded by s.out.mu
	counted atomic.Bool // counted in Stats.SubscriptionsActive
}

// setSnapshot records the stored query's snapshot. s.out.mu must be held.
func (sb *sub) setSnapshot(snap store.Snapshot) {
	sb.snapLow, sb.snapHigh = snap.Low, snap.High
	if len(snap.Open) > 0 {
		open := snap.Open
		sb.snapOpen = &open
	}
}

// sawCommit reports whether the subscription's stored query saw the commit
// at position seq, so that a live event from it is not delivered again:
// the one stored-to-live hand-off rule (store.Snapshot). Before the query
// has opened its iterator it reports false. s.out.mu must be held.
func (sb *sub) sawCommit(seq uint64) bool {
	snap := store.Snapshot{Low: sb.snapLow, High: sb.snapHigh}
	if sb.snapOpen != nil {
		snap.Open = *sb.snapOpen
	}
	return snap.Includes(seq)
}

// setID sets the subscription's id and builds its EVENT prefix. An id
// that needs no JSON escaping (the usual case) is kept inside the prefix,
// so the two cost one allocation.
func (sb *sub) setID(id string) {
	sb.prefix = string(append(nostr.AppendString(append(make([]byte, 0, len(id)+14), `["EVENT",`...), id), ','))
	sb.id = id
	if len(sb.prefix) == len(id)+12 { // `["EVENT","` id `",`: nothing escaped
		sb.id = sb.prefix[10 : 10+len(id)]
	}
}

// handleClose closes one subscription (NIP-01 CLOSE: no reply).
func (s *Session) handleClose(subID string) {
	s.mu.Lock()
	sb := s.subs.get(subID)
	if sb != nil {
		s.removeSub(sb)
	}
	s.mu.Unlock()
	if sb != nil {
		s.r.closeSub(sb)
	}
}

// dropSub closes a subscription on the relay's initiative and tells the
// client with CLOSED.
func (s *Session) dropSub(sb *sub, reason string) {
	s.mu.Lock()
	if s.subs.get(sb.id) == sb {
		s.removeSub(sb)
	}
	s.mu.Unlock()
	s.r.closeSub(sb)
	s.closedMsg(sb.id, reason)
}

// removeSub unlists sb, an open subscription, and releases its filter
// values. s.mu must be held.
func (s *Session) removeSub(sb *sub) {
	s.subs.remove(sb)
	s.subValues -= int32(filterValues(sb.filters))
}

// filterValues counts the values of filters' lists (ids, authors, kinds
// and tag values): what a subscription holds in the index, bounded by
// Config.MaxSubscriptionValues per connection.
func filterValues(filters []nostr.Filter) int {
	n := 0
	for i := range filters {
		f := &filters[i]
		n += len(f.IDs) + len(f.Authors) + len(f.Kinds)
		for _, t := range f.Tags {
			n += len(t.Values)
		}
	}
	return n
}

// subList is a session's open subscriptions: a slice searched linearly.
// Most connections hold one to a few subscriptions, and MaxSubscriptions
// bounds the scan; a slice costs far less per idle connection than a map.
type subList []*sub

func (l subList) get(id string) *sub {
	for _, sb := range l {
		if sb.id == id {
			return sb
		}
	}
	return nil
}

// put adds sb, replacing the subscription with the same id; it returns
// the replaced one.
func (l *subList) put(sb *sub) (old *sub) {
	for i, x := range *l {
		if x.id == sb.id {
			(*l)[i] = sb
			return x
		}
	}
	*l = append(*l, sb)
	return nil
}

// remove deletes sb if it is listed.
func (l *subList) remove(sb *sub) {
	for i, x := range *l {
		if x == sb {
			last := len(*l) - 1
			(*l)[i] = (*l)[last]
			(*l)[last] = nil
			*l = (*l)[:last]
			if len(*l) == 0 {
				*l = nil
			}
			return
		}
	}
}

// closeSub unlists a subscription and stops its stored query.
func (r *Relay) closeSub(sb *sub) {
	r.idx.remove(sb)
	o := &sb.s.out
	o.mu.Lock()
	sb.state = subClosed
	j := sb.job
	sb.job = nil
	if j != nil {
		j.unhold(o)
	}
	var parked *queryJob
	if j != nil && sb.s.parked == j {
		sb.s.parked = nil
		parked = j
	}
	o.mu.Unlock()
	if j != nil {
		j.cancel()
	}
	if parked != nil {
		parked.release()
	}
	if sb.counted.CompareAndSwap(true, false) {
		r.stats.SubscriptionsActive.Add(-1)
	}
}
