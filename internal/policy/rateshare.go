package policy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// Sharing the rate limits between the nodes of a cluster. Each node keeps
// its own buckets; a client the load balancer spreads over several nodes
// (several connections from one address, or one pubkey publishing through
// several) would get the limit once per node. With Share on, a node notes
// the tokens it takes, key by key, and hands them out as messages
// (Spent); the other nodes take the same tokens from their buckets
// (Debit). Every bucket then sees what the whole cluster took, one
// message late: over a rate limit, a client spread over N nodes gets at
// most what one node allows plus, in all, (N-1) times a burst and what
// the rate refills in a message's delay.
//
// A message is a version byte, then sections, one a limit (Spent writes
// one section a message; Debit reads any number):
//
//	section = tag (1 byte) | body length (uvarint) | body
//	body    = { key (16 bytes: an address key; 32: a pubkey) | tokens (uvarint) }
//
// A section of a limit that is off here, or of a tag this version does not
// know, is skipped whole.

const rateShareV1 = 1

// The sections' tags.
const (
	tagEventIP = 1 + iota
	tagEventPK
	tagReqIP
	tagConnectIP
)

// Share makes r note the tokens it takes for Spent. Call it before r is
// in use.
func (r *RateLimits) Share() {
	r.eventIP.share()
	r.eventPK.share()
	r.reqIP.share()
	r.connIP.share()
}

func (l *limiter[K]) share() {
	if l != nil {
		l.shared = true
	}
}

// Spent returns the tokens r took since the last call (with Share on), as
// messages of at most maxBytes each (at least 256; each holds one limit's
// section, and a key's entry is never split), or none when it took none.
func (r *RateLimits) Spent(maxBytes int) [][]byte {
	w := spentWriter{max: max(maxBytes, 256)}
	harvest(&w, tagEventIP, r.eventIP, addrKeys)
	harvest(&w, tagEventPK, r.eventPK, pubKeys)
	harvest(&w, tagReqIP, r.reqIP, addrKeys)
	harvest(&w, tagConnectIP, r.connIP, addrKeys)
	return w.msgs
}

// keyCodec writes and reads one kind of limit's keys in a section.
type keyCodec[K comparable] struct {
	size int
	put  func([]byte, K) []byte
	get  func([]byte) K
}

var (
	addrKeys = keyCodec[[16]byte]{16,
		func(b []byte, k [16]byte) []byte { return append(b, k[:]...) },
		func(b []byte) [16]byte { return [16]byte(b) }}
	pubKeys = keyCodec[nostr.PubKey]{32,
		func(b []byte, k nostr.PubKey) []byte { return append(b, k[:]...) },
		func(b []byte) nostr.PubKey { return nostr.PubKey(b) }}
)

// spentWriter builds Spent's messages: one section each.
type spentWriter struct {
	max  int
	msgs [][]byte
	tag  byte   // the open section's
	body []byte // the open section's entries
}

// header is the most a message holds besides its section's body.
const header = 1 + 1 + binary.MaxVarintLen32

// add appends one entry to the section of tag, starting a new message
// when the entry would take this one past max.
func add[K comparable](w *spentWriter, tag byte, kc keyCodec[K], k K, n uint32) {
	if len(w.body) > 0 && (w.tag != tag || header+len(w.body)+kc.size+binary.MaxVarintLen32 > w.max) {
		w.flush()
	}
	w.tag = tag
	w.body = kc.put(w.body, k)
	w.body = binary.AppendUvarint(w.body, uint64(n))
}

// flush closes the open section as a message of its own.
func (w *spentWriter) flush() {
	if len(w.body) == 0 {
		return
	}
	m := make([]byte, 0, header+len(w.body))
	m = append(m, rateShareV1, w.tag)
	m = binary.AppendUvarint(m, uint64(len(w.body)))
	w.msgs = append(w.msgs, append(m, w.body...))
	w.body = w.body[:0]
}

// harvest takes l's noted spending, shard by shard, into w as one
// section (or several messages' worth).
func harvest[K comparable](w *spentWriter, tag byte, l *limiter[K], kc keyCodec[K]) {
	if l == nil || !l.shared {
		return
	}
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		spent := sh.spent
		sh.spent = nil
		sh.mu.Unlock()
		for k, n := range spent {
			add(w, tag, kc, k, n)
		}
	}
	w.flush()
}

// errRateShare is a message Debit cannot read.
var errRateShare = errors.New("policy: bad rate-limit share message")

// Debit takes from r's buckets the tokens another node took, as a
// message of its Spent says. Sections of limits r has off are skipped. A
// bucket may go below empty, down to minus its burst: its client waits
// for what it took elsewhere. It fails on a message it cannot read,
// having applied the sections before the fault.
func (r *RateLimits) Debit(msg []byte) error {
	if len(msg) == 0 || msg[0] != rateShareV1 {
		return fmt.Errorf("%w: version %v", errRateShare, msg[:min(len(msg), 1)])
	}
	now := r.now().UnixNano()
	for p := msg[1:]; len(p) > 0; {
		tag := p[0]
		n, w := binary.Uvarint(p[1:])
		if w <= 0 || n > uint64(len(p)-1-w) {
			return fmt.Errorf("%w: section length", errRateShare)
		}
		body := p[1+w : 1+w+int(n)]
		p = p[1+w+int(n):]
		var err error
		switch tag {
		case tagEventIP:
			err = debit(r.eventIP, body, now, addrKeys)
		case tagEventPK:
			err = debit(r.eventPK, body, now, pubKeys)
		case tagReqIP:
			err = debit(r.reqIP, body, now, addrKeys)
		case tagConnectIP:
			err = debit(r.connIP, body, now, addrKeys)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// debit applies one section's entries to l (nil: off, skipped).
func debit[K comparable](l *limiter[K], body []byte, now int64, kc keyCodec[K]) error {
	if l == nil {
		return nil
	}
	for len(body) > 0 {
		if len(body) < kc.size {
			return fmt.Errorf("%w: short key", errRateShare)
		}
		k := kc.get(body[:kc.size])
		n, w := binary.Uvarint(body[kc.size:])
		if w <= 0 {
			return fmt.Errorf("%w: token count", errRateShare)
		}
		body = body[kc.size+w:]
		l.debit(k, float64(min(n, math.MaxUint32)), now)
	}
	return nil
}
