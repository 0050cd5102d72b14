package cluster

import (
	"sync"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// Where an id in the window came from.
const (
	srcLocal  byte = iota + 1 // accepted by this node
	srcRemote                 // accepted elsewhere: from the bus or a catch-up
)

// window is the node-level de-duplication window: the ids of the stored
// events this node has fanned out lately, by whatever path (accepted here,
// received from the bus, replayed by a catch-up). A catch-up hands the
// relay only the ids it does not hold, and the bus path skips ids a
// catch-up delivered first, so each event is fanned out once per node,
// and so reaches each matching subscription once.
//
// Entries are kept in insertion order (a ring) for keep nanoseconds, and
// longer while pin asks for it (a catch-up that has to reach back further
// is pending); never more than max, the oldest going first when full
// (counted in overflows). All methods are safe for concurrent use.
type window struct {
	mu   sync.Mutex
	ids  map[nostr.ID]byte // id -> source
	ring []slot            // FIFO of inserted ids; len is a power of two
	head int               // index of the oldest slot
	n    int
	max  int
	keep int64 // nanoseconds an entry is kept at least

	// pin: entries inserted at or after pin (unix nanos) are kept past
	// keep; 0: no pin.
	pin int64
	// lost is the insertion time of the newest entry evicted: the window
	// holds every id it was given after lost, and maybe none before.
	lost      int64
	overflows int64
}

type slot struct {
	id nostr.ID
	at int64 // unix nanos
}

func newWindow(max int, keep int64) *window {
	return &window{ids: make(map[nostr.ID]byte), ring: make([]slot, 64), max: max, keep: keep}
}

// has reports whether id is in the window.
func (w *window) has(id nostr.ID) bool {
	w.mu.Lock()
	_, ok := w.ids[id]
	w.mu.Unlock()
	return ok
}

// claim adds id from src at time now (unix nanos) and reports true; if id
// is there already it changes nothing and returns its source and false.
func (w *window) claim(id nostr.ID, src byte, now int64) (byte, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if prev, ok := w.ids[id]; ok {
		return prev, false
	}
	w.evict(now)
	if w.n == w.max {
		w.popOldest()
		w.overflows++
	}
	if w.n == len(w.ring) {
		w.grow()
	}
	w.ring[(w.head+w.n)&(len(w.ring)-1)] = slot{id: id, at: now}
	w.n++
	w.ids[id] = src
	return 0, true
}

// evict drops the entries older than keep that no pin protects. w.mu must
// be held.
func (w *window) evict(now int64) {
	cut := now - w.keep
	if w.pin != 0 && w.pin < cut {
		cut = w.pin
	}
	for w.n > 0 && w.ring[w.head].at < cut {
		w.popOldest()
	}
}

// popOldest removes the oldest entry. w.mu must be held.
func (w *window) popOldest() {
	s := &w.ring[w.head]
	delete(w.ids, s.id)
	if s.at > w.lost {
		w.lost = s.at
	}
	*s = slot{}
	w.head = (w.head + 1) & (len(w.ring) - 1)
	w.n--
	if w.n == 0 {
		w.head = 0
	}
}

// grow doubles the ring. w.mu must be held.
func (w *window) grow() {
	next := make([]slot, 2*len(w.ring))
	for i := 0; i < w.n; i++ {
		next[i] = w.ring[(w.head+i)&(len(w.ring)-1)]
	}
	w.ring, w.head = next, 0
}

// expire drops old entries (the monitor calls it, so that a quiet node
// lets go of memory too) and shrinks a ring that is mostly empty.
func (w *window) expire(now int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.evict(now)
	if len(w.ring) > 64 && w.n < len(w.ring)/4 {
		next := make([]slot, len(w.ring)/2)
		for i := 0; i < w.n; i++ {
			next[i] = w.ring[(w.head+i)&(len(w.ring)-1)]
		}
		w.ring, w.head = next, 0
		// A map does not shrink: copy it once it is mostly empty.
		m := make(map[nostr.ID]byte, w.n)
		for k, v := range w.ids {
			m[k] = v
		}
		w.ids = m
	}
}

// setPin keeps the entries inserted at or after pin (unix nanos) past
// keep; 0 removes the pin.
func (w *window) setPin(pin int64) {
	w.mu.Lock()
	w.pin = pin
	w.mu.Unlock()
}

// covers reports whether the window still holds every id it was given at
// or after since (unix nanos).
func (w *window) covers(since int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return since > w.lost
}

// size returns the number of ids held and the overflow count.
func (w *window) size() (int, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n, w.overflows
}
