package storetest

import (
	"encoding/binary"
	"math/rand/v2"
	"strconv"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// BaseTime is the created_at around which the suite builds its events:
// a fixed point in the past, far from "now", so that expiration tests can
// place expirations on either side of now without touching these.
const BaseTime = 1_700_000_000

// Key returns a deterministic public key for author number n. The bytes are
// not a valid curve point; the store does not care.
func Key(n int) nostr.PubKey {
	var pk nostr.PubKey
	binary.BigEndian.PutUint64(pk[:], uint64(n)*0x9E3779B97F4A7C15+1)
	binary.BigEndian.PutUint64(pk[8:], uint64(n))
	pk[31] = byte(n)
	return pk
}

// NewEvent builds an event with a random id and signature drawn from rng,
// and Raw set to its JSON (nostr.Serialize). The tags slice is used as is.
func NewEvent(rng *rand.Rand, pk nostr.PubKey, kind int, createdAt int64, tags nostr.Tags, content string) *nostr.Event {
	ev := &nostr.Event{PubKey: pk, CreatedAt: createdAt, Kind: kind, Tags: tags, Content: content}
	for i := 0; i < len(ev.ID); i += 8 {
		binary.LittleEndian.PutUint64(ev.ID[i:], rng.Uint64())
	}
	for i := 0; i < len(ev.Sig); i += 8 {
		binary.LittleEndian.PutUint64(ev.Sig[i:], rng.Uint64())
	}
	if ev.Tags == nil {
		ev.Tags = nostr.Tags{}
	}
	ev.Raw = nostr.Serialize(ev)
	return ev
}

// WithID returns a copy of ev with the given id and Raw re-serialized.
func WithID(ev *nostr.Event, id nostr.ID) *nostr.Event {
	c := *ev
	c.ID = id
	c.Raw = nostr.Serialize(&c)
	return &c
}

// IDWithPrefix returns an id whose first byte is b and the rest random, to
// build events whose id order is known.
func IDWithPrefix(rng *rand.Rand, b byte) nostr.ID {
	var id nostr.ID
	for i := 0; i < len(id); i += 8 {
		binary.LittleEndian.PutUint64(id[i:], rng.Uint64())
	}
	id[0] = b
	return id
}

// ATag returns the "a" tag value "kind:pubkey:d".
func ATag(kind int, pk nostr.PubKey, d string) string {
	return strconv.Itoa(kind) + ":" + pk.Hex() + ":" + d
}
