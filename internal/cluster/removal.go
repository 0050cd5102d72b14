package cluster

import (
	"sync"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// removals remembers, for a while, what the deletions (NIP-09) and
// requests to vanish (NIP-62) this node saw lately removed, so that an
// event they removed is not fanned out when it reaches this node after
// them. The bus keeps order only per origin: an event accepted on one node
// and its deletion accepted on another may arrive in either order, and a
// catch-up may read an event just before its deletion commits. The store
// of record has already removed such an event (stored queries on every
// node no longer return it); this keeps the live feeds consistent with it.
//
// The rules are the store's (store.Store, "Storage semantics"), applied to
// what the node sees: an "e" target is removed if the deletion's author
// wrote it and it is not itself a deletion or a request to vanish; an "a"
// target (the author's own replaceable or addressable address) removes the
// versions with created_at at or before the deletion's; a request to
// vanish removes its author's events at or before its created_at (except
// itself) and the gift wraps addressed ("p") to the author at or before
// it. Ephemeral events are never stored, so never removed.
//
// Entries are kept for keep nanoseconds (as long as the de-duplication
// window: the time within which a late copy can arrive), never more than
// max of them. All methods are safe for concurrent use.
type removals struct {
	mu       sync.Mutex
	ids      map[idTarget]int64 // an "e" target and the deletion's author -> when noted
	addrs    map[nostr.Address]cutoff
	vanished map[nostr.PubKey]vanishCut
	fifo     []rmEntry // in insertion order; fifo[0] is the oldest
	max      int
	keep     int64
}

// idTarget is an "e" target of a deletion, with the deletion's author:
// it removes the event only if that author wrote it.
type idTarget struct {
	id     nostr.ID
	author nostr.PubKey
}

type cutoff struct {
	createdAt int64
	at        int64
}

type vanishCut struct {
	createdAt int64
	id        nostr.ID // the request itself, which stays
	at        int64
}

// rmEntry names one map entry for expiry.
type rmEntry struct {
	at   int64
	kind byte // 'e', 'a' or 'v'
	id   nostr.ID
	pk   nostr.PubKey
	addr nostr.Address
}

func newRemovals(max int, keep int64) *removals {
	return &removals{
		ids:      make(map[idTarget]int64),
		addrs:    make(map[nostr.Address]cutoff),
		vanished: make(map[nostr.PubKey]vanishCut),
		max:      max,
		keep:     keep,
	}
}

// note records what ev removes, if it is a deletion or a request to
// vanish, at time now (unix nanos).
func (r *removals) note(ev *nostr.Event, now int64) {
	switch ev.Kind {
	case nostr.KindDeletion:
		ids, addrs := ev.DeletionTargets()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, id := range ids {
			r.ids[idTarget{id, ev.PubKey}] = now
			r.push(rmEntry{at: now, kind: 'e', id: id, pk: ev.PubKey})
		}
		for _, a := range addrs {
			if a.PubKey != ev.PubKey || !(nostr.IsReplaceable(a.Kind) || nostr.IsAddressable(a.Kind)) {
				continue
			}
			c := r.addrs[a]
			c.createdAt = max(c.createdAt, ev.CreatedAt)
			c.at = now
			r.addrs[a] = c
			r.push(rmEntry{at: now, kind: 'a', addr: a})
		}
	case nostr.KindRequestToVanish:
		r.mu.Lock()
		defer r.mu.Unlock()
		if v, ok := r.vanished[ev.PubKey]; ok && v.createdAt >= ev.CreatedAt {
			return
		}
		r.vanished[ev.PubKey] = vanishCut{createdAt: ev.CreatedAt, id: ev.ID, at: now}
		r.push(rmEntry{at: now, kind: 'v', pk: ev.PubKey})
	}
}

// covers reports whether a deletion or request to vanish seen lately
// removed ev.
func (r *removals) covers(ev *nostr.Event) bool {
	if ev.Class() == nostr.Ephemeral {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.fifo) == 0 {
		return false
	}
	if ev.Kind != nostr.KindDeletion && ev.Kind != nostr.KindRequestToVanish {
		if _, ok := r.ids[idTarget{ev.ID, ev.PubKey}]; ok {
			return true
		}
	}
	if a, ok := ev.Address(); ok {
		if c, ok := r.addrs[a]; ok && ev.CreatedAt <= c.createdAt {
			return true
		}
	}
	if v, ok := r.vanished[ev.PubKey]; ok && ev.CreatedAt <= v.createdAt && ev.ID != v.id {
		return true
	}
	if ev.Kind == nostr.KindGiftWrap && len(r.vanished) > 0 {
		for _, t := range ev.Tags {
			if len(t) < 2 || t[0] != "p" {
				continue
			}
			if pk, ok := nostr.ParseHex32(t[1]); ok {
				if v, ok := r.vanished[nostr.PubKey(pk)]; ok && ev.CreatedAt <= v.createdAt {
					return true
				}
			}
		}
	}
	return false
}

// push appends an expiry entry, dropping the oldest past max. r.mu must
// be held.
func (r *removals) push(e rmEntry) {
	if len(r.fifo) >= r.max {
		r.drop(r.fifo[0])
		r.fifo[0] = rmEntry{}
		r.fifo = r.fifo[1:]
	}
	r.fifo = append(r.fifo, e)
}

// expire drops the entries older than keep.
func (r *removals) expire(now int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cut := now - r.keep
	i := 0
	for i < len(r.fifo) && r.fifo[i].at < cut {
		r.drop(r.fifo[i])
		r.fifo[i] = rmEntry{}
		i++
	}
	if i > 0 {
		r.fifo = append(r.fifo[:0], r.fifo[i:]...)
	}
}

// drop removes the map entry e names, unless a later note renewed it.
// r.mu must be held.
func (r *removals) drop(e rmEntry) {
	switch e.kind {
	case 'e':
		k := idTarget{e.id, e.pk}
		if at, ok := r.ids[k]; ok && at == e.at {
			delete(r.ids, k)
		}
	case 'a':
		if c, ok := r.addrs[e.addr]; ok && c.at == e.at {
			delete(r.addrs, e.addr)
		}
	case 'v':
		if v, ok := r.vanished[e.pk]; ok && v.at == e.at {
			delete(r.vanished, e.pk)
		}
	}
}
