package nip98

import (
	"errors"
	"sync"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// ErrReplayed is returned by Replays.Use for a token already accepted.
var ErrReplayed = errors.New("nip98: token already used")

// ErrTooMany is returned by Replays.Use when it holds its maximum of
// unexpired tokens: the token cannot be remembered, so it is refused.
var ErrTooMany = errors.New("nip98: too many tokens in the window")

// Replays remembers the tokens a server accepted until they expire, so
// that a captured Authorization header cannot be used twice. A token is
// its event's signature: BIP-340 signatures are not malleable, so nobody
// without the key can make a second valid signature of the same event,
// while a signer that uses auxiliary randomness (Event does) makes each
// request's token distinct even for the same call in the same second. A
// signer with deterministic signatures that repeats a call within one
// second makes the same token, and the repeat is refused: it must wait a
// second or vary the event.
//
// Memory is bounded by max tokens (about 100 bytes each). It is safe for
// concurrent use.
type Replays struct {
	mu    sync.Mutex
	max   int
	until map[nostr.Sig]int64 // token -> unix second after which it is stale
	// order lists the tokens by insertion, for pruning; head is its first
	// live entry.
	order []replayEntry
	head  int
}

type replayEntry struct {
	sig   nostr.Sig
	until int64
}

// NewReplays returns a Replays holding at most max unexpired tokens
// (max <= 0: 4096).
func NewReplays(max int) *Replays {
	if max <= 0 {
		max = 4096
	}
	return &Replays{max: max, until: make(map[nostr.Sig]int64)}
}

// Use records the token of ev, valid until the unix second until (the
// end of its created_at window), at time now. It returns ErrReplayed if
// the token was used before and has not expired, ErrTooMany if max
// unexpired tokens are held. Call it only for a token that passed every
// other check (signature included), so that only authorized signers can
// fill it.
func (r *Replays) Use(ev *nostr.Event, until, now int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prune(now)
	if u, ok := r.until[ev.Sig]; ok && u >= now {
		return ErrReplayed
	}
	if len(r.until) >= r.max {
		return ErrTooMany
	}
	r.until[ev.Sig] = until
	r.order = append(r.order, replayEntry{sig: ev.Sig, until: until})
	return nil
}

// Len returns the number of tokens held.
func (r *Replays) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.until)
}

// prune forgets the tokens stale at now. Tokens are inserted in roughly
// increasing expiry (created_at within a window of now), so pruning walks
// from the oldest and stops at the first live one; a token inserted out
// of order is forgotten at the latest when the ones before it are. r.mu
// must be held.
func (r *Replays) prune(now int64) {
	for r.head < len(r.order) && r.order[r.head].until < now {
		e := r.order[r.head]
		if u, ok := r.until[e.sig]; ok && u == e.until {
			delete(r.until, e.sig)
		}
		r.order[r.head] = replayEntry{}
		r.head++
	}
	if r.head > 64 && r.head > len(r.order)/2 {
		n := copy(r.order, r.order[r.head:])
		clear(r.order[n:])
		r.order = r.order[:n]
		r.head = 0
	}
}
